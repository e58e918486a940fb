#pragma once
// cli/collective_errors: how the MPI commands (decode, train) report errors. They are printed here, inside
// the command, before MPI_Finalize (the dist::Environment's destructor), whose fence holds every rank
// until all have printed: mpiexec ends the job at the first non-zero exit and would otherwise cut off a
// slower rank's message. Every rank returns the failing rank's exit code (dist/collective.hpp).
#include <iostream>
#include <string>

#include "core/error.hpp"
#include "dist/collective.hpp"

namespace hsipipe::cli {

template <class F>
int run_reporting_errors(const char* command, const dist::Comm& comm, F&& body) {
  try {
    return body();
  } catch (const dist::QuietError& e) {
    return e.exit_code();  // rank 0 failed the same way and says why
  } catch (const dist::PeerError& e) {
    if (comm.rank() == 0) std::cerr << "hsipipe " << command << ": error: " << e.what() << "\n" << std::flush;
    return e.exit_code();  // the failing rank says why
  } catch (const Error& e) {
    std::cerr << "hsipipe " << command << ": " << (comm.rank() != 0 ? "rank " + std::to_string(comm.rank()) + ": " : "")
              << "error: " << e.what() << "\n" << std::flush;
    return e.exit_code();
  }
}

}  // namespace hsipipe::cli

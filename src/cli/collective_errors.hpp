#pragma once
// cli/collective_errors: how the MPI commands (decode, train) report errors. They are printed here, inside
// the command, before MPI_Finalize (the dist::Environment's destructor), whose fence holds every rank
// until all have printed: mpiexec ends the job at the first non-zero exit and would otherwise cut off a
// slower rank's message. Every rank returns the failing rank's exit code (dist/collective.hpp). A message
// several ranks fail with in one collective step is printed once (by the lowest of them), each as one whole line.
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
    if (comm.rank() == 0) print_error_line("hsipipe " + std::string(command) + ": error: " + e.what());
    return e.exit_code();  // the failing rank says why
  } catch (const Error& e) {  // one write per line: ranks' lines never interleave (print_error_line)
    print_error_line("hsipipe " + std::string(command) + ": " +
                     (comm.rank() != 0 ? "rank " + std::to_string(comm.rank()) + ": " : "") + "error: " + e.what());
    return e.exit_code();
  }
}

}  // namespace hsipipe::cli

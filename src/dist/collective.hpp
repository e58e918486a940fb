#pragma once
// dist/collective: turning an error on some ranks into an error on every rank, instead of a deadlock in
// the next collective call. Used by phase one (decode) and phase two (train), and by the commands that
// print those errors.
#include <algorithm>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <new>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/hash.hpp"
#include "dist/mpi.hpp"

namespace hsipipe::dist {

/// An error raised on behalf of a failing rank: it exits with that rank's code.
class RankError : public Error {
 public:
  RankError(const std::string& what, int code) : Error(what), code_(code) {}
  int exit_code() const noexcept override { return code_; }

 private:
  int code_;
};

/// Another rank failed (its own message names the cause); thrown on the ranks that did not fail, with the
/// failing rank's exit code, so whichever rank exits first, mpiexec reports the same status.
class PeerError : public RankError {
 public:
  using RankError::RankError;
};

/// This rank failed in the same step as rank 0: the CLI prints rank 0's message only.
class QuietError : public RankError {
 public:
  using RankError::RankError;
};

/// Runs a rank-local step `f`; if it failed on any rank, every rank throws: the failing rank its own
/// error (as QuietError when a lower failing rank has the same message: each distinct message is printed
/// once), the others a PeerError naming the first failing rank and carrying its exit code. COLLECTIVE (one
/// allgather of an exit code; when more than one rank failed, one more of the messages' hashes).
template <class F>
void collective_step(const Comm& comm, const std::string& what, F&& f) {
  std::exception_ptr err;
  std::int32_t code = 0;
  try {
    f();
  } catch (const Error& e) {
    err = std::current_exception();
    code = e.exit_code() != 0 ? e.exit_code() : 1;
  } catch (const std::filesystem::filesystem_error& e) {  // named like any I/O error, exit code 4
    const IoError io = io_error_from(e);
    err = std::make_exception_ptr(io);
    code = io.exit_code();
  } catch (const std::bad_alloc&) {  // no file of its own: named by the step, with the likely cause
    err = std::make_exception_ptr(Error(what + ": " + kOutOfMemory));
    code = 1;
  } catch (const std::exception& e) {  // a library's or the standard library's (a thread not started...)
    err = std::make_exception_ptr(Error(what + ": " + e.what()));
    code = 1;
  } catch (...) {
    err = std::current_exception();
    code = 1;
  }
  const std::vector<std::int32_t> codes = comm.allgatherv(std::vector<std::int32_t>{code});
  int first_bad = -1;
  for (std::size_t r = 0; r < codes.size() && first_bad < 0; ++r)
    if (codes[r] != 0) first_bad = static_cast<int>(r);
  const auto failed = std::count_if(codes.begin(), codes.end(), [](std::int32_t c) { return c != 0; });
  std::string message;
  if (err) {
    try {
      std::rethrow_exception(err);
    } catch (const std::exception& e) {
      message = e.what();
    } catch (...) {
      message = what + ": an unknown exception";
    }
  }
  if (failed > 1) {  // every rank knows: each distinct message once, from the lowest rank that has it
    const std::uint64_t mine = err ? xxh3_64(message.data(), message.size()) | 1 : 0;
    const std::vector<std::uint64_t> all = comm.allgatherv(std::vector<std::uint64_t>{mine});
    if (err && std::find(all.begin(), all.begin() + comm.rank(), mine) != all.begin() + comm.rank())
      throw QuietError(message, code);
  }
  if (err) std::rethrow_exception(err);
  if (first_bad >= 0)
    throw PeerError(what + " failed on rank " + std::to_string(first_bad) + " (see its message)",
                    codes[static_cast<std::size_t>(first_bad)]);
}

}  // namespace hsipipe::dist

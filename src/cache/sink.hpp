#pragma once
// cache/sink: where decode's ranks write their disjoint ranges. Internal to cache.
//
// Contract: the factories and every member are COLLECTIVE over `comm` (all ranks, same order, the
// same `array` index); a rank with nothing to write passes n = 0. Errors on one rank are turned into
// an exception on every rank (Comm::all_ok) wherever a rank-local step (open, pwrite) can fail,
// except inside HDF5's own collective calls, where the MPI job aborts as a whole.
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "dist/mpi.hpp"

namespace hsipipe::cache {

/// One big array written in ranges along its first axis. npy: DIR/<name>.npy; h5: /<h5name>.
struct ArraySpec {
  std::string name;    ///< "samples", "cube_0", "labels", "coords"
  std::string h5name;  ///< "/samples", "/cube/0", "/labels", "/coords"
  DType dtype = DType::f32;
  std::vector<std::uint64_t> shape;
  std::uint64_t item_bytes() const;  ///< bytes of one index along the first axis
};

/// Another rank failed (its own message names the cause); thrown on the ranks that did not fail.
class PeerError : public Error {
 public:
  using Error::Error;
};
/// This rank failed in the same step as rank 0: the CLI prints rank 0's message only.
class QuietError : public Error {
 public:
  QuietError(const std::string& what, int code) : Error(what), code_(code) {}
  int exit_code() const noexcept override { return code_; }

 private:
  int code_;
};

/// Runs a rank-local step `f`; if it failed on any rank, every rank throws: the failing rank its own
/// error (as QuietError on ranks other than 0 when rank 0 failed too), the others a PeerError naming
/// the first failing rank. COLLECTIVE (one allgather of a flag).
template <class F>
void collective_step(const dist::Comm& comm, const std::string& what, F&& f) {
  std::exception_ptr err;
  try {
    f();
  } catch (...) {
    err = std::current_exception();
  }
  const std::vector<std::int32_t> flags = comm.allgatherv(std::vector<std::int32_t>{err ? 0 : 1});
  int first_bad = -1;
  for (std::size_t r = 0; r < flags.size() && first_bad < 0; ++r)
    if (!flags[r]) first_bad = static_cast<int>(r);
  if (err) {
    if (comm.rank() != 0 && !flags.empty() && flags[0] == 0) {
      try {
        std::rethrow_exception(err);
      } catch (const Error& e) {
        throw QuietError(e.what(), e.exit_code());
      } catch (const std::exception& e) {
        throw QuietError(e.what(), 1);
      }
    }
    std::rethrow_exception(err);
  }
  if (first_bad >= 0) throw PeerError(what + " failed on rank " + std::to_string(first_bad) + " (see its message)");
}

class Sink {
 public:
  virtual ~Sink() = default;
  /// COLLECTIVE. Writes items [first, first + n) of arrays[array] from `data` (n * item_bytes()).
  virtual void write(int array, std::uint64_t first, std::uint64_t n, const void* data) = 0;
  /// COLLECTIVE. A whole small array; `data` is read on rank 0 only.
  virtual void write_small(const ArraySpec& spec, const void* data) = 0;
  /// COLLECTIVE. Flushes (fsync) and closes; h5 also stores `manifest` as the root attribute.
  virtual void finish(const std::string& manifest) = 0;
  std::uint64_t bytes_written() const noexcept { return bytes_written_; }

 protected:
  std::uint64_t bytes_written_ = 0;
};

/// COLLECTIVE. Rank 0 creates every DIR/<name>.npy with its header and its full size (ftruncate).
std::unique_ptr<Sink> make_npy_sink(const std::string& dir, const std::vector<ArraySpec>& arrays,
                                    const dist::Comm& comm);
/// COLLECTIVE. Creates DIR/cache.h5 with the MPI-IO driver; datasets chunked along the first axis;
/// writes use collective transfers.
std::unique_ptr<Sink> make_h5_sink(const std::string& dir, const std::vector<ArraySpec>& arrays,
                                   const dist::Comm& comm);

}  // namespace hsipipe::cache

#pragma once
// cache/sink: where decode's ranks write their disjoint ranges. Internal to cache.
//
// Contract: the factories and every member are COLLECTIVE over `comm` (all ranks, same order, the
// same `array` index; a rank with nothing to write passes n = 0), except place(), and write() of a sink
// whose independent_writes() is true (npy: each rank its own byte ranges, called any number of times).
// Errors on one rank are turned into an exception on every rank (dist::collective_step) wherever a
// rank-local step (open, pwrite) can fail, except inside HDF5's own collective calls, where the MPI job
// aborts as a whole.
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "dist/collective.hpp"
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

// Rank-local failures in collective steps: see dist/collective.hpp.
using dist::collective_step;
using dist::PeerError;
using dist::QuietError;

class Sink {
 public:
  virtual ~Sink() = default;
  /// COLLECTIVE (rank-local when independent_writes()). Writes items [first, first + n) of arrays[array]
  /// from `data` (n * item_bytes()).
  /// `data` may be the memory place() returned for that range: nothing is copied then.
  virtual void write(int array, std::uint64_t first, std::uint64_t n, const void* data) = 0;
  /// Rank-local. Memory in which this rank may build items [first, first + n) of arrays[array] in place
  /// (the file's own pages), or nullptr when this sink copies from write()'s buffer. The range must then
  /// be passed to write() as usual. Throws IoError when the pages cannot be had (e.g. a full disk).
  virtual void* place(int /*array*/, std::uint64_t /*first*/, std::uint64_t /*n*/) { return nullptr; }
  /// Rank-local. Whether place() gives memory for arrays[array] (false: it returns nullptr).
  virtual bool places(int /*array*/) const { return false; }
  /// True when write() is in fact rank-local (each rank its own byte ranges, no collective I/O): the
  /// caller need not keep the ranks in step between writes.
  virtual bool independent_writes() const { return false; }
  /// COLLECTIVE. A whole small array; `data` is read on rank 0 only.
  virtual void write_small(const ArraySpec& spec, const void* data) = 0;
  /// Rank-local. After this rank's last write: starts making the bytes written so far durable (fsync on a
  /// thread of the sink's own), beside whatever the caller does until finish(), which then waits only for
  /// what is left and reports a failure of it.
  virtual void start_flush() {}
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

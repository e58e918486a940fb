#pragma once
// dist/comm: the communicator the trainer uses for gradients and other bulk float traffic. One
// interface, two implementations chosen at build time (is NCCL compiled in?) and at run time
// (--backend auto|nccl|mpi), so callers contain no #ifdef:
//   MPI   host buffers, MPI_Allreduce / MPI_Allgatherv / MPI_Bcast on a private duplicate communicator.
//   NCCL  CUDA device buffers, ops enqueued on a CUDA stream (default: the legacy default stream, the
//         one libtorch computes on unless told otherwise), so they are ordered after the kernels that
//         produced the data without a host synchronisation. Device = local rank on the node
//         (MPI_Comm_split_type SHARED); the unique id is made by rank 0 and shared with MPI_Bcast.
// Buffer-based (raw pointers and counts): dist stays free of libtorch.
//
// Contract: every member marked COLLECTIVE must be called by all ranks of the communicator, in the
// same order, with matching counts. memory() says where buffers must live; passing a host pointer to
// an NCCL communicator (or a device pointer to MPI without CUDA-aware MPI) is undefined.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "dist/mpi.hpp"

namespace hsipipe::dist {

enum class Backend { mpi, nccl };
std::string backend_name(Backend b);

/// Where the buffers handed to a Communicator must live.
enum class Memory { host, cuda };

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual Backend backend() const noexcept = 0;
  virtual Memory memory() const noexcept = 0;
  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  /// CUDA device ordinal this communicator works on (NCCL), -1 for host communicators.
  virtual int device() const noexcept { return -1; }

  /// COLLECTIVE. In-place element-wise sum over all ranks; n equal on every rank.
  virtual void allreduce_sum(float* data, std::size_t n) = 0;
  virtual void allreduce_sum(double* data, std::size_t n) = 0;
  /// COLLECTIVE. Concatenates every rank's `counts[rank]` floats from `send` into `recv` in rank order
  /// (recv holds sum(counts) floats). `counts` has size() entries and is the same on every rank.
  virtual void allgatherv(const float* send, float* recv, const std::vector<std::size_t>& counts) = 0;
  /// COLLECTIVE. Copies `bytes` bytes from root's buffer into everyone's.
  virtual void broadcast(void* data, std::size_t bytes, int root) = 0;
  /// COLLECTIVE. Returns when every rank has entered it (NCCL: and the stream has drained).
  virtual void barrier() = 0;
  /// Rank-local. Blocks the host until every operation issued so far has completed (no-op for MPI,
  /// whose calls complete before they return).
  virtual void synchronize() {}
  /// Rank-local. NCCL: the cudaStream_t (as void*) used by later operations; nullptr = legacy default
  /// stream. Ignored by MPI.
  virtual void set_stream(void* stream) { (void)stream; }
};

/// True when this build contains the NCCL implementation (HSIPIPE_HAVE_NCCL at configure time).
bool nccl_compiled() noexcept;

/// --backend value: "auto" -> nccl when `device_is_cuda` and nccl_compiled(), else mpi; "nccl" needs
/// both (ConfigError naming --backend otherwise); "mpi" always works (host staging on CUDA).
Backend choose_backend(const std::string& choice, bool device_is_cuda);

/// COLLECTIVE over `comm`. Builds the communicator for `b` (NCCL: selects the CUDA device = local
/// rank and initialises NCCL; throws NcclError naming the call, the rank and NCCL's message).
std::unique_ptr<Communicator> make_communicator(Backend b, const Comm& comm);

}  // namespace hsipipe::dist

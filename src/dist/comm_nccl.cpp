// dist/comm_nccl: the CUDA-device communicator (NCCL). Built as its own target (hsipipe_dist_nccl)
// only when CMake found the CUDA toolkit and NCCL; plain C++ against the CUDA runtime API, no nvcc.
//
// Lifetime: NcclComm owns the ncclComm_t. destroy() is the orderly, collective shutdown (flushes
// outstanding work); abort() is the local, non-blocking one used after an error or from the destructor
// (never ncclCommDestroy there: other ranks may be gone, and it may run during unwinding). Neither
// touches CUDA after the driver has shut down: we only run them while main() is alive.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <source_location>
#include <string>
#include <utility>

#include "core/error.hpp"
#include "dist/comm_nccl.hpp"

namespace hsipipe::dist::detail {

namespace {

int world_rank() noexcept {
  int init = 0, fin = 0, r = -1;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (init && !fin) MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

std::string where(const char* call, const std::source_location& loc) {
  return std::string(call) + " failed at " + loc.file_name() + ":" + std::to_string(loc.line()) + " on rank " +
         std::to_string(world_rank());
}

void check_cuda(cudaError_t rc, const char* call, const std::source_location& loc = std::source_location::current()) {
  if (rc == cudaSuccess) return;
  throw NcclError(where(call, loc) + ": CUDA " + cudaGetErrorName(rc) + ": " + cudaGetErrorString(rc));
}

void check_nccl(ncclResult_t rc, const char* call, ncclComm_t comm = nullptr,
                const std::source_location& loc = std::source_location::current()) {
  if (rc == ncclSuccess) return;
  std::string msg = where(call, loc) + ": NCCL " + ncclGetErrorString(rc);
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= 21300
  if (const char* last = ncclGetLastError(comm); last && *last) msg += " (" + std::string(last) + ")";
#else
  (void)comm;
#endif
  throw NcclError(msg);
}

#define HSIPIPE_CUDA(call) check_cuda((call), #call)
#define HSIPIPE_NCCL(call) check_nccl((call), #call, comm_)

void check_mpi_local(int rc, const char* call, const std::source_location& loc = std::source_location::current()) {
  if (rc == MPI_SUCCESS) return;
  char buf[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, buf, &len);
  throw MpiError(where(call, loc) + ": " + std::string(buf, static_cast<std::size_t>(len)));
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(MPI_Comm mpi, int rank, int size, int local_rank) : rank_(rank), size_(size), device_(local_rank) {
    int ndev = 0;
    HSIPIPE_CUDA(cudaGetDeviceCount(&ndev));
    if (device_ >= ndev) {
      throw NcclError("NCCL: local rank " + std::to_string(device_) + " on this node needs CUDA device " +
                      std::to_string(device_) + " but only " + std::to_string(ndev) +
                      " are visible (one rank per GPU; NCCL cannot put two ranks on one device)");
    }
    HSIPIPE_CUDA(cudaSetDevice(device_));
    ncclUniqueId id{};
    if (rank_ == 0) HSIPIPE_NCCL(ncclGetUniqueId(&id));
    check_mpi_local(MPI_Bcast(&id, static_cast<int>(sizeof id), MPI_BYTE, 0, mpi), "MPI_Bcast(ncclUniqueId)");
    HSIPIPE_NCCL(ncclCommInitRank(&comm_, size_, id, rank_));
    HSIPIPE_CUDA(cudaMalloc(&scratch_, sizeof(float)));
  }

  ~NcclCommunicator() override { abort(); }

  /// COLLECTIVE: orderly shutdown after all work completed.
  void destroy() {
    if (!comm_) return;
    synchronize();
    ncclComm_t c = std::exchange(comm_, nullptr);
    check_nccl(ncclCommDestroy(c), "ncclCommDestroy");
    free_scratch();
  }
  /// Rank-local, non-throwing.
  void abort() noexcept {
    if (comm_) ncclCommAbort(std::exchange(comm_, nullptr));
    free_scratch();
  }

  Backend backend() const noexcept override { return Backend::nccl; }
  Memory memory() const noexcept override { return Memory::cuda; }
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  int device() const noexcept override { return device_; }

  void allreduce_sum(float* data, std::size_t n) override {
    HSIPIPE_NCCL(ncclAllReduce(data, data, n, ncclFloat32, ncclSum, comm_, stream_));
  }
  void allreduce_sum(double* data, std::size_t n) override {
    HSIPIPE_NCCL(ncclAllReduce(data, data, n, ncclFloat64, ncclSum, comm_, stream_));
  }
  void allgatherv(const float* send, float* recv, const std::vector<std::size_t>& counts) override {
    if (counts.size() != static_cast<std::size_t>(size_)) {
      throw NcclError("allgatherv: counts has " + std::to_string(counts.size()) + " entries for " +
                      std::to_string(size_) + " ranks");
    }
    // NCCL has no allgatherv: one broadcast per root inside a group (as c10d does).
    HSIPIPE_NCCL(ncclGroupStart());
    std::size_t off = 0;
    for (int r = 0; r < size_; ++r) {
      const std::size_t n = counts[static_cast<std::size_t>(r)];
      const float* src = r == rank_ ? send : recv + off;
      if (n) HSIPIPE_NCCL(ncclBroadcast(src, recv + off, n, ncclFloat32, r, comm_, stream_));
      off += n;
    }
    HSIPIPE_NCCL(ncclGroupEnd());
  }
  void broadcast(void* data, std::size_t bytes, int root) override {
    HSIPIPE_NCCL(ncclBroadcast(data, data, bytes, ncclUint8, root, comm_, stream_));
  }
  void barrier() override {
    HSIPIPE_NCCL(ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, stream_));
    synchronize();
  }
  void synchronize() override { HSIPIPE_CUDA(cudaStreamSynchronize(stream_)); }
  void set_stream(void* stream) override { stream_ = static_cast<cudaStream_t>(stream); }

 private:
  void free_scratch() noexcept {
    if (scratch_) cudaFree(std::exchange(scratch_, nullptr));
  }

  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* scratch_ = nullptr;
  int rank_ = 0, size_ = 1, device_ = 0;
};

}  // namespace

bool nccl_compiled() noexcept { return true; }

std::unique_ptr<Communicator> make_nccl(MPI_Comm comm, int rank, int size, int local_rank) {
  return std::make_unique<NcclCommunicator>(comm, rank, size, local_rank);
}

}  // namespace hsipipe::dist::detail

// dist/comm_nccl: the CUDA-device communicator (NCCL). Built as its own target (hsipipe_dist_nccl)
// only when CMake found the CUDA toolkit and NCCL; plain C++ against the CUDA runtime API, no nvcc.
//
// Lifetime: NcclComm owns the ncclComm_t. destroy() is the orderly, collective shutdown (flushes
// outstanding work); abort() is the local, non-blocking one used after an error or from the destructor
// (never ncclCommDestroy there: other ranks may be gone, and it may run during unwinding). Neither
// touches CUDA after the driver has shut down: we only run them while main() is alive.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>
#include <source_location>
#include <string>
#include <utility>
#include <vector>

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
  NcclCommunicator(MPI_Comm mpi, int rank, int size, int local_rank) : rank_(rank), size_(size) {
    // The device: the node-local rank modulo the devices this rank sees, as the trainer picks its torch
    // device (trainer.cpp), so that the two agree. One rule for both ways Slurm hands out GPUs: with
    // --gpus-per-task (implied --gpu-bind=per_task) each rank sees only its own GPU, as device 0; with
    // --gpus-per-node every rank sees all of them and takes device local_rank.
    int ndev = 0;
    const cudaError_t rc = cudaGetDeviceCount(&ndev);
    cudaError_t set = cudaSuccess;
    if (rc == cudaSuccess && ndev > 0) {
      device_ = local_rank % ndev;
      set = cudaSetDevice(device_);
    }
    // Every rank's device UUID, gathered before any rank throws (a collective no rank may leave alone):
    // NCCL cannot put two ranks on one device, which happens when the ranks of a node outnumber the GPUs
    // they all see.
    struct Seen {
      unsigned char uuid[16];
      int ok;
      int device;
    } mine{};
    mine.ok = rc == cudaSuccess && ndev > 0 && set == cudaSuccess;
    mine.device = device_;
    if (mine.ok) {
      cudaDeviceProp prop{};
      mine.ok = cudaGetDeviceProperties(&prop, device_) == cudaSuccess;
      if (mine.ok) std::memcpy(mine.uuid, prop.uuid.bytes, sizeof mine.uuid);
    }
    std::vector<Seen> all(static_cast<std::size_t>(size_));
    check_mpi_local(MPI_Allgather(&mine, static_cast<int>(sizeof mine), MPI_BYTE, all.data(), static_cast<int>(sizeof mine),
                                  MPI_BYTE, mpi),
                    "MPI_Allgather(CUDA device UUIDs)");
    if (rc != cudaSuccess) check_cuda(rc, "cudaGetDeviceCount");
    if (ndev == 0) throw NcclError("NCCL: rank " + std::to_string(rank_) + " sees no CUDA device");
    if (set != cudaSuccess) check_cuda(set, "cudaSetDevice");
    for (int r = 0; r < size_; ++r) {
      if (!all[static_cast<std::size_t>(r)].ok) throw NcclError("NCCL: rank " + std::to_string(r) + " has no usable CUDA device");
      for (int q = 0; q < r; ++q)
        if (std::memcmp(all[static_cast<std::size_t>(q)].uuid, all[static_cast<std::size_t>(r)].uuid, 16) == 0)
          throw NcclError("NCCL: ranks " + std::to_string(q) + " and " + std::to_string(r) + " would share one GPU (device " +
                          std::to_string(all[static_cast<std::size_t>(r)].device) +
                          " of theirs): run one rank per GPU (more GPUs, or fewer ranks per node)");
    }
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

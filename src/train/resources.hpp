#pragma once
// train/resources: what a training epoch costs in memory. Rank-local.
//   host: peak resident set size of this process (VmHWM of /proc/self/status, falling back to
//         getrusage ru_maxrss), and a reset of the high-water mark where the kernel allows it
//         (writing 5 to /proc/self/clear_refs), so a per-epoch peak is the epoch's own peak.
//   CUDA: the caching allocator's peak allocated / reserved bytes for a device. Only compiled in when
//         the libtorch has CUDA (HSIPIPE_TORCH_CUDA); otherwise, and at run time without a usable
//         GPU (torch::cuda::is_available() false), the query returns nullopt.
#include <cstdint>
#include <optional>
#include <string>

namespace hsipipe::train {

std::uint64_t peak_rss_bytes();
/// Tries to reset the peak RSS; returns false if the kernel refused (peaks then accumulate).
bool reset_peak_rss();

struct DeviceMemory {
  std::uint64_t peak_allocated = 0;  ///< bytes held by tensors at the peak
  std::uint64_t peak_reserved = 0;   ///< bytes the allocator held from the driver at the peak
};
std::optional<DeviceMemory> cuda_peak_memory(int device);
void cuda_reset_peak_memory(int device);
/// Free bytes of a CUDA device (cudaMemGetInfo), nullopt without CUDA.
std::optional<std::uint64_t> cuda_free_memory(int device);
/// The file of the reference (netlib) BLAS when it is the libblas.so.3 this process loaded, else empty.
/// Debian's libtorch runs its CPU matrix products through whichever libblas.so.3 the system's alternative
/// names; without OpenBLAS installed that is the reference one, single-threaded and unblocked (hu1d training
/// 13,752 samples/s with it, 81,305 with libopenblas0-openmp, 5 Dec 2026, scripts/bench_train.sh).
std::string reference_blas();
/// The line train and predict print (rank 0, CPU) when reference_blas() is not empty, else empty.
std::string reference_blas_note();
/// True when this build's libtorch was compiled with CUDA.
bool torch_built_with_cuda() noexcept;

}  // namespace hsipipe::train

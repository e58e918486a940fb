#include "train/resources.hpp"

#include <link.h>
#include <sys/resource.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <torch/cuda.h>

#if HSIPIPE_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

namespace hsipipe::train {

std::string reference_blas() {
  std::string found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        const std::string name = info->dlpi_name ? info->dlpi_name : "";
        if (name.find("libblas.so") == std::string::npos) return 0;
        std::error_code ec;
        const auto real = std::filesystem::canonical(name, ec);
        // Debian installs the reference BLAS as .../blas/libblas.so.3 (OpenBLAS: .../openblas-*/libblas.so.3)
        if (!ec && real.parent_path().filename() == "blas") *static_cast<std::string*>(out) = real.string();
        return 0;
      },
      &found);
  return found;
}

std::string reference_blas_note() {
  const std::string ref = reference_blas();
  if (ref.empty()) return {};
  return "note: libtorch's matrix products go through the reference BLAS (" + ref +
         "): CPU training and predict run several times slower than with OpenBLAS (apt install libopenblas0-openmp, "
         "as scripts/setup.sh does)\n";
}

std::uint64_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;  // "VmHWM:   1234 kB"
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<std::uint64_t>(ru.ru_maxrss) * 1024;
}

bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  if (!out) return false;
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

bool torch_built_with_cuda() noexcept { return HSIPIPE_TORCH_CUDA != 0; }

std::optional<DeviceMemory> cuda_peak_memory(int device) {
#if HSIPIPE_TORCH_CUDA
  if (device < 0 || !torch::cuda::is_available()) return std::nullopt;
  // Index 0 of every stat array is the aggregate over pool types in all PyTorch versions.
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
  DeviceMemory m;
  m.peak_allocated = static_cast<std::uint64_t>(stats.allocated_bytes[0].peak);
  m.peak_reserved = static_cast<std::uint64_t>(stats.reserved_bytes[0].peak);
  return m;
#else
  (void)device;
  return std::nullopt;
#endif
}

void cuda_reset_peak_memory(int device) {
#if HSIPIPE_TORCH_CUDA
  if (device >= 0 && torch::cuda::is_available()) {
    c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(device));
  }
#else
  (void)device;
#endif
}

std::optional<std::uint64_t> cuda_free_memory(int device) {
#if HSIPIPE_TORCH_CUDA
  if (device < 0 || !torch::cuda::is_available()) return std::nullopt;
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  std::size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) return std::nullopt;
  return static_cast<std::uint64_t>(free);
#else
  (void)device;
  return std::nullopt;
#endif
}

}  // namespace hsipipe::train

// dist/comm_factory: --backend resolution and construction. The NCCL side is reached only through
// detail::make_nccl (comm_nccl.cpp or comm_nccl_none.cpp, picked by CMake), so no caller has an #ifdef.
#include <string>

#include "core/error.hpp"
#include "dist/comm.hpp"
#include "dist/comm_nccl.hpp"

namespace hsipipe::dist {

std::unique_ptr<Communicator> make_mpi_communicator(const Comm& comm);  // comm_mpi.cpp

std::string backend_name(Backend b) { return b == Backend::nccl ? "nccl" : "mpi"; }

bool nccl_compiled() noexcept { return detail::nccl_compiled(); }

Backend choose_backend(const std::string& choice, bool device_is_cuda) {
  if (choice == "mpi") return Backend::mpi;
  if (choice == "auto") return device_is_cuda && nccl_compiled() ? Backend::nccl : Backend::mpi;
  if (choice == "nccl") {
    if (!nccl_compiled()) {
      throw ConfigError("--backend nccl: this hsipipe was built without NCCL (CUDA toolkit or NCCL not found "
                        "at configure time); use --backend mpi or auto");
    }
    if (!device_is_cuda) throw ConfigError("--backend nccl needs --device cuda (NCCL reduces device memory)");
    return Backend::nccl;
  }
  throw ConfigError("--backend: unknown value '" + choice + "' (expected auto, nccl or mpi)");
}

std::unique_ptr<Communicator> make_communicator(Backend b, const Comm& comm) {
  if (b == Backend::mpi) return make_mpi_communicator(comm);
  const Comm local = comm.split_shared();
  return detail::make_nccl(comm.get(), comm.rank(), comm.size(), local.rank());
}

}  // namespace hsipipe::dist

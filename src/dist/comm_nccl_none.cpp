// dist/comm_nccl_none: stands in for comm_nccl.cpp in builds without CUDA + NCCL.
#include "core/error.hpp"
#include "dist/comm_nccl.hpp"

namespace hsipipe::dist::detail {

bool nccl_compiled() noexcept { return false; }

std::unique_ptr<Communicator> make_nccl(MPI_Comm, int, int, int) {
  throw ConfigError("--backend nccl: this hsipipe was built without NCCL");
}

}  // namespace hsipipe::dist::detail

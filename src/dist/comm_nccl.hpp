#pragma once
// dist/comm_nccl: internal seam between the communicator factory (comm_factory.cpp, always built)
// and the NCCL implementation (comm_nccl.cpp, its own target, built only with CUDA + NCCL) or its
// stand-in (comm_nccl_none.cpp). Not for callers: use make_communicator().
#include <mpi.h>

#include <memory>

#include "dist/comm.hpp"

namespace hsipipe::dist::detail {

/// COLLECTIVE over `comm` (rank 0 makes the unique id, MPI_Bcast shares it). `local_rank` modulo the
/// CUDA devices this rank sees picks its device, as the trainer picks its torch device; two ranks on one
/// GPU are refused. Throws NcclError when NCCL or CUDA fail, ConfigError when built without NCCL.
std::unique_ptr<Communicator> make_nccl(MPI_Comm comm, int rank, int size, int local_rank);
bool nccl_compiled() noexcept;

}  // namespace hsipipe::dist::detail

// dist/comm_mpi: the host-memory communicator on a private duplicate of the caller's MPI communicator.
#include <climits>
#include <cstdint>
#include <string>

#include "dist/comm.hpp"

namespace hsipipe::dist {

namespace {

int checked_int(std::size_t n, const char* what) {
  if (n > static_cast<std::size_t>(INT_MAX)) {
    throw MpiError(std::string(what) + ": count " + std::to_string(n) + " exceeds MPI's int range");
  }
  return static_cast<int>(n);
}

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(const Comm& parent) : comm_(parent.get()) {}

  Backend backend() const noexcept override { return Backend::mpi; }
  Memory memory() const noexcept override { return Memory::host; }
  int rank() const noexcept override { return comm_.rank(); }
  int size() const noexcept override { return comm_.size(); }

  void allreduce_sum(float* data, std::size_t n) override { reduce(data, n, MPI_FLOAT); }
  void allreduce_sum(double* data, std::size_t n) override { reduce(data, n, MPI_DOUBLE); }

  void allgatherv(const float* send, float* recv, const std::vector<std::size_t>& counts) override {
    if (counts.size() != static_cast<std::size_t>(size())) {
      throw MpiError("allgatherv: counts has " + std::to_string(counts.size()) + " entries for " +
                     std::to_string(size()) + " ranks");
    }
    std::vector<int> c(counts.size()), d(counts.size());
    std::size_t off = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      c[r] = checked_int(counts[r], "allgatherv");
      d[r] = checked_int(off, "allgatherv displacement");
      off += counts[r];
    }
    HSIPIPE_MPI(MPI_Allgatherv(send, c[static_cast<std::size_t>(rank())], MPI_FLOAT, recv, c.data(), d.data(),
                               MPI_FLOAT, comm_.get()));
  }

  void broadcast(void* data, std::size_t bytes, int root) override {
    auto* p = static_cast<char*>(data);
    while (bytes > 0) {  // chunks below INT_MAX
      const std::size_t chunk = bytes < (std::size_t{1} << 30) ? bytes : (std::size_t{1} << 30);
      HSIPIPE_MPI(MPI_Bcast(p, static_cast<int>(chunk), MPI_BYTE, root, comm_.get()));
      p += chunk;
      bytes -= chunk;
    }
  }

  void barrier() override { comm_.barrier(); }

 private:
  void reduce(void* data, std::size_t n, MPI_Datatype t) {
    if (comm_.size() == 1 || n == 0) return;
    const std::size_t elem = t == MPI_FLOAT ? 4 : 8;
    auto* p = static_cast<char*>(data);
    while (n > 0) {
      const std::size_t chunk = n < (std::size_t{1} << 28) ? n : (std::size_t{1} << 28);
      HSIPIPE_MPI(MPI_Allreduce(MPI_IN_PLACE, p, static_cast<int>(chunk), t, MPI_SUM, comm_.get()));
      p += chunk * elem;
      n -= chunk;
    }
  }

  Comm comm_;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(const Comm& comm) {
  return std::make_unique<MpiCommunicator>(comm);
}

}  // namespace hsipipe::dist

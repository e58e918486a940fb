// dist::Communicator (MPI implementation) under real mpiexec with 1, 2 and 3 ranks, and the --backend
// rule. The NCCL implementation is compiled in this build when CUDA + NCCL were found (no GPU here).
#include <catch2/catch.hpp>

#include <numeric>
#include <vector>

#include "core/error.hpp"
#include "dist/comm.hpp"

using namespace hsipipe;

TEST_CASE("mpi communicator: allreduce, allgatherv with counts, broadcast", "[dist][mpi]") {
  const dist::Comm world(MPI_COMM_WORLD);
  auto c = dist::make_communicator(dist::Backend::mpi, world);
  const int R = c->size(), r = c->rank();
  REQUIRE(R == world.size());
  REQUIRE(c->memory() == dist::Memory::host);

  std::vector<float> f(1001);
  for (std::size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(r + 1) * static_cast<float>(i);
  c->allreduce_sum(f.data(), f.size());
  const float tri = static_cast<float>(R * (R + 1) / 2);
  for (std::size_t i = 0; i < f.size(); ++i) REQUIRE(f[i] == tri * static_cast<float>(i));

  std::vector<double> d{0.5 * r, 1.0};
  c->allreduce_sum(d.data(), d.size());
  CHECK(d[0] == Approx(0.5 * R * (R - 1) / 2));
  CHECK(d[1] == R);

  // rank q contributes q + 1 values (rank 0 also zero values in a second round)
  for (int zero_first : {0, 1}) {
    std::vector<std::size_t> counts(static_cast<std::size_t>(R));
    for (int q = 0; q < R; ++q) counts[static_cast<std::size_t>(q)] = (zero_first && q == 0) ? 0 : static_cast<std::size_t>(q + 1);
    std::vector<float> send(counts[static_cast<std::size_t>(r)], static_cast<float>(r));
    std::vector<float> recv(std::accumulate(counts.begin(), counts.end(), std::size_t{0}), -1.0f);
    c->allgatherv(send.data(), recv.data(), counts);
    std::size_t k = 0;
    for (int q = 0; q < R; ++q)
      for (std::size_t j = 0; j < counts[static_cast<std::size_t>(q)]; ++j) REQUIRE(recv[k++] == static_cast<float>(q));
  }

  std::vector<char> buf(10, static_cast<char>(r == R - 1 ? 'x' : 'o'));
  c->broadcast(buf.data(), buf.size(), R - 1);
  CHECK(std::string(buf.begin(), buf.end()) == "xxxxxxxxxx");
  c->barrier();
}

TEST_CASE("--backend resolution", "[dist]") {
  CHECK(dist::choose_backend("mpi", false) == dist::Backend::mpi);
  CHECK(dist::choose_backend("mpi", true) == dist::Backend::mpi);
  CHECK(dist::choose_backend("auto", false) == dist::Backend::mpi);
  CHECK(dist::choose_backend("auto", true) == (dist::nccl_compiled() ? dist::Backend::nccl : dist::Backend::mpi));
  CHECK_THROWS_AS(dist::choose_backend("nccl", false), ConfigError);
  CHECK_THROWS_AS(dist::choose_backend("gloo", false), ConfigError);
#ifdef HSIPIPE_EXPECT_NCCL
  // The build found CUDA + NCCL: the NCCL communicator must be in (compile-only check in CI).
  CHECK(dist::nccl_compiled() == (HSIPIPE_EXPECT_NCCL != 0));
#endif
}

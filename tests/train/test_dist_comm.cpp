// dist::Communicator (MPI implementation) under real mpiexec with 1, 2 and 3 ranks, and the --backend
// rule. The NCCL implementation is compiled in this build when CUDA + NCCL were found (no GPU here).
#include <catch2/catch.hpp>

#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "dist/collective.hpp"
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

TEST_CASE("collective_step: a rank's failure fails every rank, named by the step", "[dist][mpi]") {
  const dist::Comm world(MPI_COMM_WORLD);
  const int R = world.size(), r = world.rank(), bad = R - 1;
  // what each rank sees when rank `bad` throws `e`: that rank its own error (prefixed with the step where it is
  // not one of ours), the others a PeerError naming rank `bad` with its exit code
  const auto run = [&](const char* step, auto thrower) -> std::pair<std::string, int> {
    try {
      dist::collective_step(world, step, [&] {
        if (r == bad) thrower();
      });
    } catch (const dist::PeerError& e) {
      CHECK(r != bad);
      return {std::string("peer: ") + e.what(), e.exit_code()};
    } catch (const Error& e) {
      CHECK(r == bad);
      return {e.what(), e.exit_code()};
    }
    FAIL("no error on rank " << r);
    return {};
  };
  const auto [oom, oom_code] = run("decoding the blocks", [] { throw std::bad_alloc(); });
  const auto [lib, lib_code] = run("the statistics pass", [] { throw std::out_of_range("vector::_M_range_check"); });
  const auto [own, own_code] = run("writing x.npy", [] { throw IoError("/c/x.npy", "write", ENOSPC); });
  if (r == bad) {
    CHECK(oom.rfind("decoding the blocks: out of memory: a buffer could not be allocated (", 0) == 0);
    CHECK(oom.find("ulimit -v") != std::string::npos);
    CHECK(oom_code == 1);
    CHECK(lib == "the statistics pass: vector::_M_range_check");
    CHECK(own.rfind("/c/x.npy", 0) == 0);  // our own errors name their file first, unprefixed
    CHECK(own_code == 4);
  } else {
    CHECK(oom == "peer: decoding the blocks failed on rank " + std::to_string(bad) + " (see its message)");
    CHECK(lib == "peer: the statistics pass failed on rank " + std::to_string(bad) + " (see its message)");
    CHECK(own_code == 4);  // the failing rank's exit code on every rank
  }
  dist::collective_step(world, "nothing fails", [] {});  // and no error when none fails
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

TEST_CASE("dist::Environment: Nagle is off on the TCP connections to the local launcher", "[dist][mpi]") {
  // mpi_main.cpp made the Environment. Under Open MPI's mpiexec the PMIx client holds a loopback TCP
  // connection to it; without TCP_NODELAY each MPI_Finalize waited 40 ms for a delayed ACK.
  int loopback = 0, nodelay = 0;
  DIR* d = ::opendir("/proc/self/fd");
  REQUIRE(d != nullptr);
  while (const dirent* e = ::readdir(d)) {
    const int fd = std::atoi(e->d_name);
    int type = 0;
    socklen_t tl = sizeof type;
    if (fd <= 2 || ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_STREAM) continue;
    sockaddr_storage peer{};
    socklen_t pl = sizeof peer;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0 || peer.ss_family != AF_INET) continue;
    if ((ntohl(reinterpret_cast<const sockaddr_in*>(&peer)->sin_addr.s_addr) >> 24) != 127) continue;
    ++loopback;
    int on = 0;
    socklen_t ol = sizeof on;
    if (::getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, &ol) == 0 && on) ++nodelay;
  }
  ::closedir(d);
  if (std::getenv("OMPI_COMM_WORLD_SIZE")) CHECK(loopback >= 1);  // Open MPI 4.1 + PMIx: one at least
  CHECK(nodelay == loopback);
}

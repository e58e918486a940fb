#include "dist/mpi.hpp"

#include "core/fs.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <thread>
#include <utility>

namespace hsipipe::dist {

void check_mpi(int rc, const char* call, const std::source_location& loc) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  int rank = -1, init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (init && !fin) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  throw MpiError(std::string(call) + " failed at " + loc.file_name() + ":" + std::to_string(loc.line()) +
                 " on rank " + std::to_string(rank) + ": " + std::string(msg, static_cast<std::size_t>(len)));
}

namespace {

/// Turns Nagle's algorithm off on this process's TCP connections to the local launcher. Open MPI 4.1's
/// PMIx client (PMIx 4.2, Debian 12) talks to mpiexec over loopback TCP without TCP_NODELAY: the small
/// messages of MPI_Finalize then wait for the server's delayed ACK, 40 ms per process per run (measured:
/// MPI_Finalize 44 ms -> 2 ms, `mpiexec -n 1` of an empty MPI program 0.10 s -> 0.05 s). Only loopback
/// peers are touched, only TCP_NODELAY is set (what MPI's own TCP transports set), and any failure is
/// ignored: at worst the process keeps the 40 ms. (HSIPIPE_KEEP_NAGLE=1, which left the sockets alone, was
/// retired in issue 34: nothing needs Nagle there; docs/KNOBS.md.)
void nodelay_launcher_sockets() noexcept {
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return;
  while (const dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == ::dirfd(d)) continue;
    int type = 0;
    socklen_t tl = sizeof type;
    if (::getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_STREAM) continue;
    sockaddr_storage peer{};
    socklen_t pl = sizeof peer;
    if (::getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &pl) != 0) continue;
    bool loopback = false;
    if (peer.ss_family == AF_INET) {
      loopback = (ntohl(reinterpret_cast<const sockaddr_in*>(&peer)->sin_addr.s_addr) >> 24) == 127;
    } else if (peer.ss_family == AF_INET6) {
      const auto& a = reinterpret_cast<const sockaddr_in6*>(&peer)->sin6_addr;
      loopback = IN6_IS_ADDR_LOOPBACK(&a) || (IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127);
    }
    if (!loopback) continue;
    const int one = 1;
    (void)::setsockopt(static_cast<int>(fd), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ::closedir(d);
}

}  // namespace

Environment::Environment(int* argc, char*** argv) {
  int init = 0, provided = MPI_THREAD_SINGLE;
  MPI_Initialized(&init);
  if (init) {
    MPI_Query_thread(&provided);
  } else {
    HSIPIPE_MPI(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided));
    owns_ = true;
    nodelay_launcher_sockets();
  }
  if (provided < MPI_THREAD_FUNNELED) {
    throw MpiError("MPI provides thread level " + std::to_string(provided) +
                   " but hsipipe needs MPI_THREAD_FUNNELED (loader threads run beside MPI)");
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

int thread_level() noexcept {
  int init = 0, level = MPI_THREAD_SINGLE;
  MPI_Initialized(&init);
  if (init) MPI_Query_thread(&level);
  return level;
}

Environment::~Environment() {
  int fin = 0;
  MPI_Finalized(&fin);
  if (owns_ && !fin) MPI_Finalize();
}

Comm::Comm(MPI_Comm parent) {
  HSIPIPE_MPI(MPI_Comm_dup(parent, &comm_));
  HSIPIPE_MPI(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  HSIPIPE_MPI(MPI_Comm_rank(comm_, &rank_));
  HSIPIPE_MPI(MPI_Comm_size(comm_, &size_));
}

Comm::~Comm() {
  int fin = 0;
  MPI_Finalized(&fin);
  if (comm_ != MPI_COMM_NULL && comm_ != MPI_COMM_WORLD && !fin) MPI_Comm_free(&comm_);
}

Comm::Comm(Comm&& o) noexcept
    : comm_(std::exchange(o.comm_, MPI_COMM_NULL)), rank_(o.rank_), size_(o.size_) {}

Comm& Comm::operator=(Comm&& o) noexcept {
  if (this != &o) {
    Comm tmp(std::move(*this));
    comm_ = std::exchange(o.comm_, MPI_COMM_NULL);
    rank_ = o.rank_;
    size_ = o.size_;
  }
  return *this;
}

Comm Comm::split_shared() const {
  MPI_Comm shared = MPI_COMM_NULL;
  HSIPIPE_MPI(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &shared));
  Comm out(shared);  // dup sets the error handler
  MPI_Comm_free(&shared);
  return out;
}

void Comm::barrier() const { HSIPIPE_MPI(MPI_Barrier(comm_)); }

void Comm::barrier_sleeping(std::chrono::microseconds poll) const {
  MPI_Request req = MPI_REQUEST_NULL;
  HSIPIPE_MPI(MPI_Ibarrier(comm_, &req));
  for (int done = 0;;) {
    HSIPIPE_MPI(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
    if (done) return;
    std::this_thread::sleep_for(poll);
  }
}

std::string Comm::bcast_string(const std::string& s, int root) const {
  std::uint64_t n = s.size();
  bcast(&n, 1, root);
  std::string out = rank_ == root ? s : std::string(n, '\0');
  if (n) HSIPIPE_MPI(MPI_Bcast(out.data(), static_cast<int>(n), MPI_CHAR, root, comm_));
  return out;
}

std::vector<std::vector<char>> Comm::alltoallv(const std::vector<std::vector<char>>& send) const {
  const auto R = static_cast<std::size_t>(size_);
  if (send.size() != R)
    throw std::invalid_argument("Comm::alltoallv: " + std::to_string(send.size()) + " buffers for " +
                                std::to_string(R) + " ranks");
  std::vector<int> scount(R), sdispl(R), rcount(R), rdispl(R);
  std::uint64_t stotal = 0;
  for (std::size_t q = 0; q < R; ++q) {
    if (send[q].size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw std::length_error("Comm::alltoallv: a buffer of " + std::to_string(send[q].size()) + " bytes (limit 2 GiB)");
    scount[q] = static_cast<int>(send[q].size());
    stotal += send[q].size();
  }
  HSIPIPE_MPI(MPI_Alltoall(scount.data(), 1, MPI_INT, rcount.data(), 1, MPI_INT, comm_));
  std::uint64_t rtotal = 0;
  for (std::size_t q = 0; q < R; ++q) rtotal += static_cast<std::uint64_t>(rcount[q]);
  if (stotal > static_cast<std::uint64_t>(std::numeric_limits<int>::max()) ||
      rtotal > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
    throw std::length_error("Comm::alltoallv: more than 2 GiB in one exchange");
  std::vector<char> sbuf(stotal), rbuf(rtotal);
  int so = 0, ro = 0;
  for (std::size_t q = 0; q < R; ++q) {
    sdispl[q] = so;
    std::copy(send[q].begin(), send[q].end(), sbuf.begin() + so);
    so += scount[q];
    rdispl[q] = ro;
    ro += rcount[q];
  }
  HSIPIPE_MPI(MPI_Alltoallv(sbuf.data(), scount.data(), sdispl.data(), MPI_BYTE, rbuf.data(), rcount.data(),
                            rdispl.data(), MPI_BYTE, comm_));
  std::vector<std::vector<char>> out(R);
  for (std::size_t q = 0; q < R; ++q)
    out[q].assign(rbuf.begin() + rdispl[q], rbuf.begin() + rdispl[q] + rcount[q]);
  return out;
}

void Comm::abort_job(int code) const noexcept {
  MPI_Abort(comm_, code);
  std::_Exit(code);  // MPI_Abort does not return; should it, this rank still ends
}

bool Comm::all_ok(bool ok) const {
  int v = ok ? 1 : 0;
  HSIPIPE_MPI(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MIN, comm_));
  return v == 1;
}

std::size_t compute_threads(const Comm& local) {
  return fs::threads_per_rank(local.allgatherv(fs::cpu_mask()), static_cast<std::size_t>(local.rank()));
}

}  // namespace hsipipe::dist

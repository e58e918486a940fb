#pragma once
// dist/mpi: RAII for MPI. `Environment` owns MPI_Init_thread/MPI_Finalize; `Comm` is a move-only
// duplicate of the caller's communicator with MPI_ERRORS_RETURN set, so every failure reaches
// check_mpi() and becomes an MpiError carrying the call, file:line, rank and MPI's own message.
//
// Contract: every member marked COLLECTIVE must be called by all ranks of the communicator, in
// the same order, with matching arguments (the same count for allreduce; any count for allgatherv).
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <source_location>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace hsipipe::dist {

/// Throws MpiError when rc != MPI_SUCCESS.
void check_mpi(int rc, const char* call, const std::source_location& loc = std::source_location::current());
#define HSIPIPE_MPI(call) ::hsipipe::dist::check_mpi((call), #call)

/// Owns MPI's lifetime. Asks for MPI_THREAD_SERIALIZED (one thread at a time calls MPI, not always the
/// main one: the decoder's writing thread) and requires at least MPI_THREAD_FUNNELED (loader threads
/// never call MPI); code that hands MPI to another thread checks dist::thread_level() first.
class Environment {
 public:
  Environment(int* argc, char*** argv);
  ~Environment();
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;

 private:
  bool owns_ = false;
};

/// The thread level MPI provides (MPI_Query_thread; MPI_THREAD_SINGLE before MPI_Init).
int thread_level() noexcept;

template <class T> MPI_Datatype mpi_type();
template <> inline MPI_Datatype mpi_type<double>() { return MPI_DOUBLE; }
template <> inline MPI_Datatype mpi_type<float>() { return MPI_FLOAT; }
template <> inline MPI_Datatype mpi_type<std::int32_t>() { return MPI_INT32_T; }
template <> inline MPI_Datatype mpi_type<std::int64_t>() { return MPI_INT64_T; }
template <> inline MPI_Datatype mpi_type<std::uint64_t>() { return MPI_UINT64_T; }
template <> inline MPI_Datatype mpi_type<std::uint8_t>() { return MPI_UINT8_T; }
template <> inline MPI_Datatype mpi_type<char>() { return MPI_CHAR; }

class Comm {
 public:
  /// Duplicates `parent` (COLLECTIVE over parent); never takes ownership of MPI_COMM_WORLD itself.
  explicit Comm(MPI_Comm parent = MPI_COMM_WORLD);
  ~Comm();
  Comm(Comm&& o) noexcept;
  Comm& operator=(Comm&& o) noexcept;
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  MPI_Comm get() const noexcept { return comm_; }
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }

  /// COLLECTIVE. Ranks on the same node (MPI_Comm_split_type SHARED).
  Comm split_shared() const;

  void barrier() const;                                     ///< COLLECTIVE
  /// COLLECTIVE. A barrier that sleeps `poll` between tests (MPI_Ibarrier + MPI_Test) instead of spinning in
  /// MPI's progress loop, so that a waiting thread leaves its core to the process's other threads.
  void barrier_sleeping(std::chrono::microseconds poll) const;
  template <class T> void allreduce_sum(T* data, int n) const {  ///< COLLECTIVE, in place
    HSIPIPE_MPI(MPI_Allreduce(MPI_IN_PLACE, data, n, mpi_type<T>(), MPI_SUM, comm_));
  }
  template <class T> T allreduce_sum(T v) const { allreduce_sum(&v, 1); return v; }  ///< COLLECTIVE
  template <class T> T allreduce_max(T v) const {  ///< COLLECTIVE
    HSIPIPE_MPI(MPI_Allreduce(MPI_IN_PLACE, &v, 1, mpi_type<T>(), MPI_MAX, comm_));
    return v;
  }
  template <class T> T allreduce_min(T v) const {  ///< COLLECTIVE
    HSIPIPE_MPI(MPI_Allreduce(MPI_IN_PLACE, &v, 1, mpi_type<T>(), MPI_MIN, comm_));
    return v;
  }
  template <class T> void bcast(T* data, int n, int root = 0) const {  ///< COLLECTIVE
    HSIPIPE_MPI(MPI_Bcast(data, n, mpi_type<T>(), root, comm_));
  }
  /// COLLECTIVE. Gathers every rank's vector (any length) into one, in rank order, on all ranks.
  template <class T> std::vector<T> allgatherv(const std::vector<T>& local) const {
    const int n = static_cast<int>(local.size());
    std::vector<int> counts(static_cast<std::size_t>(size_)), displs(static_cast<std::size_t>(size_));
    HSIPIPE_MPI(MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, comm_));
    int total = 0;
    for (int r = 0; r < size_; ++r) { displs[static_cast<std::size_t>(r)] = total; total += counts[static_cast<std::size_t>(r)]; }
    std::vector<T> out(static_cast<std::size_t>(total));
    HSIPIPE_MPI(MPI_Allgatherv(local.data(), n, mpi_type<T>(), out.data(), counts.data(), displs.data(),
                               mpi_type<T>(), comm_));
    return out;
  }
  /// COLLECTIVE. Personalised exchange: send[q] goes to rank q; returns what each rank sent to this one,
  /// indexed by source rank. send.size() must equal size(); each buffer below 2 GiB.
  std::vector<std::vector<char>> alltoallv(const std::vector<std::vector<char>>& send) const;
  /// COLLECTIVE. Broadcasts a string from root.
  std::string bcast_string(const std::string& s, int root = 0) const;
  /// COLLECTIVE. True on every rank iff `ok` is true on every rank. Use it to turn a rank-local
  /// failure into a clean collective abort path instead of a deadlock.
  bool all_ok(bool ok) const;
  /// Ends every rank of the job now (MPI_Abort with `code`): for a rank-local failure while the other
  /// ranks may be waiting in a collective it will never join (they would hang, and MPI_Finalize too).
  [[noreturn]] void abort_job(int code) const noexcept;

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
};

/// COLLECTIVE over `local` (a split_shared() communicator). Compute threads for this rank: the CPUs of its
/// affinity mask divided among the node's ranks whose masks overlap it (fs::threads_per_rank).
std::size_t compute_threads(const Comm& local);

}  // namespace hsipipe::dist

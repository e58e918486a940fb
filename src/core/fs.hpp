#pragma once
// core/fs: small filesystem helpers with errors that name the path.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace hsipipe::fs {

struct FileStat {
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;  ///< modification time, ns since the epoch
};
FileStat stat_file(const std::string& path);  ///< throws IoError

/// Largest JSON / text file read whole by default (folds files of ~100 M samples, manifests, records).
inline constexpr std::uint64_t kMaxTextBytes = std::uint64_t{1} << 30;
/// Largest header or config file (ENVI .hdr, INI --config).
inline constexpr std::uint64_t kMaxHeaderBytes = std::uint64_t{64} << 20;
/// Whole file as a string; throws IoError naming the path, also for a folder, a device, a FIFO or a socket
/// (never read whole) and for a file over max_bytes.
std::string read_text(const std::string& path, std::uint64_t max_bytes = kMaxTextBytes);
/// Writes via PATH.tmp-<pid> + fsync + rename: readers never see a partial file.
void write_text_atomic(const std::string& path, const std::string& text);

/// Name of the file-system type when PATH lies on a network/cluster file system (nfs, lustre,
/// gpfs, 9p, cifs, beegfs, ...), otherwise nullopt.
std::optional<std::string> network_fs_type(const std::string& path);
/// The same for a statfs(2) f_type: the name of a network/cluster file system's magic number, else nullopt.
std::optional<std::string> network_fs_name(unsigned long f_type);

/// flock(2) on the lock file PATH, which its holder removes when done (unlock_lock_file), so that no lock file
/// stays beside a user's files; only a killed holder leaves one, which the next taker reuses and removes.
/// `how`: LOCK_EX or LOCK_SH, | LOCK_NB to fail at once; `create`: O_CREAT, else -1 with ENOENT when there
/// is none. After locking it checks that PATH still names the file locked (the previous holder may have
/// removed it meanwhile) and otherwise tries again, so two takers never hold different files of one PATH.
/// Returns the locked descriptor, or -1 with errno (EWOULDBLOCK: held by another).
int lock_lock_file(const std::string& path, int how, bool create);
/// Removes PATH when `remove` and it still names fd's file, then unlocks and closes fd (never throws).
void unlock_lock_file(const std::string& path, int fd, bool remove) noexcept;
/// What the holder of the lock file PATH wrote into it (who holds it), trimmed; empty when it cannot be read.
std::string lock_holder(const std::string& path);

/// The folders a command made for its output (e.g. `decode --out new/sub/cache` makes new/ and new/sub/), removed
/// again when it ends, newest first, where still empty: a refused or failed command leaves no folder it made,
/// and a successful one keeps them (they hold its output, or keep() was called). Not copyable.
class MadeDirs {
 public:
  MadeDirs() = default;
  MadeDirs(const MadeDirs&) = delete;
  MadeDirs& operator=(const MadeDirs&) = delete;
  ~MadeDirs() { remove_empty(); }
  /// Makes DIR and its missing parents, remembering those made here; throws IoError naming the one that failed.
  void make(const std::string& dir);
  /// Forgets the folders made: they stay.
  void keep() noexcept { made_.clear(); }
  /// Removes the remembered folders that are empty, newest first (never throws).
  void remove_empty() noexcept;

 private:
  std::vector<std::string> made_;
};

/// Free bytes on the file system holding PATH (or its nearest existing parent).
std::uint64_t free_bytes(const std::string& path);

std::string hostname();
/// The name of this node for messages: $SLURMD_NODENAME in a Slurm job step (several slurmd on one host, or
/// host names that differ from the node names), else hostname().
std::string node_name();

/// CPUs this process may run on (its affinity mask: mpiexec/srun binding), at least 1.
std::size_t cpus_available();

/// Memory this process may still take, in bytes: /proc/meminfo's MemAvailable, lowered to the room left
/// under the tightest cgroup limit above this process (cgroup v2 memory.max - memory.current at each level of
/// its path, or v1 memory.limit_in_bytes - memory.usage_in_bytes: Slurm's --mem confines a job this way).
/// 0 when neither is readable.
std::uint64_t memory_available();

/// This process's affinity mask (a cpu_set_t) as bytes, to gather across a node's ranks for threads_per_rank.
std::vector<std::uint8_t> cpu_mask();

/// Compute threads for local rank `me` of a node whose ranks' cpu_mask() bytes are `masks`, concatenated in
/// local rank order: the CPUs of its mask divided among the ranks whose masks overlap it, at least 1. So a
/// rank bound to its own CPUs (mpiexec --bind-to core, --map-by slot:PE=N, srun --cpus-per-task) uses them
/// all; ranks sharing a mask (unbound, bound to a socket, one Slurm cpuset) share its CPUs. Two torch threads
/// on one bound core ran slower than one (1-rank hybridsn predict under `mpiexec -n 1`: 3.85 s at 99% CPU,
/// 3.67 s with one thread).
std::size_t threads_per_rank(const std::vector<std::uint8_t>& masks, std::size_t me);

}  // namespace hsipipe::fs

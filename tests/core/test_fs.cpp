#include <catch2/catch.hpp>

#include <sched.h>
#include <sys/file.h>
#include <linux/magic.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>
#include <sys/vfs.h>

#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "support/test_util.hpp"

// The network file systems decode and stage warn about (or refuse), by the statfs(2) magic numbers of
// linux/magic.h and of the cluster file systems' own headers (Lustre, GPFS, BeeGFS).
TEST_CASE("network file systems are named by their statfs magic") {
  using hsipipe::fs::network_fs_name;
  CHECK(network_fs_name(NFS_SUPER_MAGIC) == "nfs");
  CHECK(network_fs_name(0x0bd00bd0UL) == "lustre");
  CHECK(network_fs_name(0x47504653UL) == "gpfs");
  CHECK(network_fs_name(V9FS_MAGIC) == "9p");
  CHECK(network_fs_name(0xFF534D42UL) == "cifs");
  CHECK(network_fs_name(SMB_SUPER_MAGIC) == "smb");
  CHECK(network_fs_name(0x19830326UL) == "beegfs");
  CHECK(network_fs_name(CEPH_SUPER_MAGIC) == "ceph");
  // node-local ones are not
  CHECK_FALSE(network_fs_name(EXT4_SUPER_MAGIC));
  CHECK_FALSE(network_fs_name(XFS_SUPER_MAGIC));
  CHECK_FALSE(network_fs_name(TMPFS_MAGIC));
  CHECK_FALSE(network_fs_name(BTRFS_SUPER_MAGIC));
}

TEST_CASE("network_fs_type of a local directory and of a path not yet created") {
  const hsipipe::test::TempDir dir("fs");
  struct statfs s {};
  REQUIRE(::statfs(dir.path().c_str(), &s) == 0);
  const auto want = hsipipe::fs::network_fs_name(static_cast<unsigned long>(s.f_type));
  CHECK(hsipipe::fs::network_fs_type(dir.str("x")) == want);  // the nearest existing parent
  CHECK(hsipipe::fs::network_fs_type(dir.str("a/b/c")) == want);
}

// Compute threads per rank: the CPUs of a rank's affinity mask divided among the node's ranks whose masks
// overlap it (bound to a core each, unbound, bound to a socket, one Slurm cpuset for all).
namespace {
std::vector<std::uint8_t> masks_of(const std::vector<std::vector<int>>& ranks) {
  std::vector<std::uint8_t> out;
  for (const auto& cpus : ranks) {
    cpu_set_t s;
    CPU_ZERO(&s);
    for (int c : cpus) CPU_SET(c, &s);
    const auto* b = reinterpret_cast<const std::uint8_t*>(&s);
    out.insert(out.end(), b, b + sizeof s);
  }
  return out;
}
}  // namespace

TEST_CASE("threads_per_rank divides a rank's CPUs among the ranks that share them") {
  using hsipipe::fs::threads_per_rank;
  CHECK(threads_per_rank(masks_of({{0}, {1}}), 0) == 1);                 // mpiexec -n 2: a core each
  CHECK(threads_per_rank(masks_of({{0, 1, 2, 3}}), 0) == 4);             // one rank, --bind-to none
  CHECK(threads_per_rank(masks_of({{0, 1}, {0, 1}}), 1) == 1);           // two unbound ranks on 2 CPUs
  CHECK(threads_per_rank(masks_of({{0, 1, 2, 3}, {4, 5, 6, 7}}), 1) == 4);  // --map-by slot:PE=4
  const auto sockets = masks_of({{0, 1, 2, 3}, {0, 1, 2, 3}, {4, 5, 6, 7}, {4, 5, 6, 7}});
  for (std::size_t r = 0; r < 4; ++r) CHECK(threads_per_rank(sockets, r) == 2);  // 4 ranks bound to 2 sockets
  CHECK(threads_per_rank(masks_of({{0, 1, 2}, {0, 1, 2}, {0, 1, 2}, {0, 1, 2}}), 2) == 1);  // 4 ranks, 3 CPUs
  CHECK_THROWS_AS(threads_per_rank(masks_of({{0}}), 1), std::invalid_argument);
  CHECK_THROWS_AS(threads_per_rank(std::vector<std::uint8_t>(5), 0), std::invalid_argument);
  // this process's own mask, alone on its node: all of its CPUs
  cpu_set_t own;
  REQUIRE(::sched_getaffinity(0, sizeof own, &own) == 0);
  CHECK(threads_per_rank(hsipipe::fs::cpu_mask(), 0) == static_cast<std::size_t>(CPU_COUNT(&own)));
}

TEST_CASE("MadeDirs removes the folders it made when they stay empty, newest first, and keeps the others") {
  namespace sfs = std::filesystem;
  const hsipipe::test::TempDir dir("madedirs");
  const std::string base = dir.str("a");
  {
    hsipipe::fs::MadeDirs made;
    made.make(base + "/b/c");
    CHECK(sfs::is_directory(base + "/b/c"));
  }  // refused: nothing was put there
  CHECK_FALSE(sfs::exists(base));
  {
    sfs::create_directories(base);  // a folder that was there before is never removed
    hsipipe::fs::MadeDirs made;
    made.make(base + "/b/c");
    std::ofstream(base + "/b/kept.txt") << "x";  // something written beside: b/ stays, c/ goes
  }
  CHECK(sfs::exists(base + "/b/kept.txt"));
  CHECK_FALSE(sfs::exists(base + "/b/c"));
  {
    hsipipe::fs::MadeDirs made;
    made.make(base + "/d/e");
    made.keep();
  }
  CHECK(sfs::is_directory(base + "/d/e"));
  std::ofstream(base + "/file") << "x";
  hsipipe::fs::MadeDirs made;
  CHECK_THROWS_AS(made.make(base + "/file/sub"), hsipipe::IoError);
}

// A waiting taker whose lock folder was removed by the holder's MadeDirs (the holder's command was refused and
// the folder it made was empty again) makes the folder again and takes the lock there, instead of failing
// with "flock failed: No such file or directory" (the race of two stages of one DEST on a node).
TEST_CASE("lock_lock_file makes a lock folder that went away again") {
  const hsipipe::test::TempDir dir("lockgone");
  const std::string lock = dir.str("gone/sub/cache.lock");
  const int fd = hsipipe::fs::lock_lock_file(lock, LOCK_EX, true);
  REQUIRE(fd >= 0);
  CHECK(std::filesystem::exists(lock));
  hsipipe::fs::unlock_lock_file(lock, fd, true);
  CHECK_FALSE(std::filesystem::exists(lock));
  CHECK(hsipipe::fs::lock_lock_file(dir.str("gone/other.lock"), LOCK_SH, false) < 0);  // without create: absent
}

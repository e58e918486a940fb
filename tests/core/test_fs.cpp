#include <catch2/catch.hpp>

#include <sched.h>
#include <linux/magic.h>

#include <algorithm>
#include <thread>
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

// Compute threads per rank: a rank the launcher bound to CPUs uses those; an unbound rank (the mask is the
// whole node) gets the node's CPUs divided among the node's ranks. Checked by binding this thread itself.
TEST_CASE("threads_per_rank follows the launcher's binding") {
  using hsipipe::fs::threads_per_rank;
  cpu_set_t saved;
  REQUIRE(::sched_getaffinity(0, sizeof saved, &saved) == 0);
  const std::size_t node = std::max(1u, std::thread::hardware_concurrency());
  if (static_cast<std::size_t>(CPU_COUNT(&saved)) == node) {  // unbound (ctest runs it so here)
    CHECK(threads_per_rank(1) == node);
    CHECK(threads_per_rank(node) == 1);
    CHECK(threads_per_rank(4 * node) == 1);
  }
  if (node >= 2) {
    cpu_set_t one;
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &saved)) { CPU_SET(c, &one); break; }
    REQUIRE(::sched_setaffinity(0, sizeof one, &one) == 0);
    const std::size_t bound1 = threads_per_rank(1), bound2 = threads_per_rank(2);
    REQUIRE(::sched_setaffinity(0, sizeof saved, &saved) == 0);
    CHECK(bound1 == 1);  // one core: one thread, not the node's count
    CHECK(bound2 == 1);
  }
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

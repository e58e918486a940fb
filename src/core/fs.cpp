#include "core/fs.hpp"

#include <fcntl.h>
#include <sched.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "core/error.hpp"

namespace hsipipe::fs {

FileStat stat_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw IoError(path, "stat", errno);
  return {static_cast<std::uint64_t>(st.st_size),
          static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec};
}

std::string read_text(const std::string& path, std::uint64_t max_bytes) {
  // a device (/dev/zero), FIFO or folder is never a file hsipipe reads whole: /dev/zero as --folds once read
  // until the OOM killer came, and a folder gave "unexpected end of input"
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw IoError(path, "open", errno);
  if (S_ISDIR(st.st_mode)) throw IoError(path, "is a folder, not a file");
  if (!S_ISREG(st.st_mode)) throw IoError(path, "is not a regular file (a device, FIFO or socket)");
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes)
    throw IoError(path, "is " + std::to_string(st.st_size) + " bytes, more than the " + std::to_string(max_bytes) +
                            " such a file may have (not the file meant?)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path, "open", errno ? errno : ENOENT);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw IoError(path, "read", errno);
  return ss.str();
}

void write_text_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError(tmp, "open", errno);
  std::size_t off = 0;
  while (off < text.size()) {
    const ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      // named by the file asked for: the temporary one is gone (a full disk: "PATH: write failed: No space left")
      throw IoError(path, "write", e);
    }
    off += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw IoError(path, "fsync/close", e);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw IoError(path, "rename", e);
  }
}

namespace {
std::string existing_parent(std::string p) {
  std::filesystem::path path = std::filesystem::absolute(p);
  while (!path.empty() && !std::filesystem::exists(path) && path != path.root_path()) path = path.parent_path();
  return path.string();
}
}  // namespace

namespace {
bool names_file(const std::string& path, int fd) {
  struct stat a {}, b {};
  return ::fstat(fd, &a) == 0 && ::stat(path.c_str(), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}
}  // namespace

int lock_lock_file(const std::string& path, int how, bool create) {
  const bool exclusive = (how & LOCK_EX) != 0;
  for (int vanished = 0;;) {
    const int fd = ::open(path.c_str(), (exclusive ? O_RDWR : O_RDONLY) | (create ? O_CREAT : 0) | O_CLOEXEC, 0644);
    if (fd < 0 && create && errno == ENOENT && ++vanished < 100) {
      // The folder went while we waited: a holder that made it removed it again, empty, when its command was
      // refused (MadeDirs). Make it again and take the lock there.
      std::error_code ec;
      std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
      continue;
    }
    if (fd < 0) return -1;
    int rc;
    while ((rc = ::flock(fd, how)) != 0 && errno == EINTR) {
    }
    if (rc != 0) {
      const int e = errno;
      ::close(fd);
      errno = e;
      return -1;
    }
    if (names_file(path, fd)) return fd;
    ::close(fd);  // removed (or replaced) by the holder before us: lock the file PATH names now
    if (!create && ::access(path.c_str(), F_OK) != 0) {
      errno = ENOENT;
      return -1;
    }
  }
}

std::string lock_holder(const std::string& path) {
  std::string holder;
  try {
    holder = read_text(path);
  } catch (const Error&) {
  }
  while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
  return holder;
}

void unlock_lock_file(const std::string& path, int fd, bool remove) noexcept {
  if (fd < 0) return;
  if (remove && names_file(path, fd)) ::unlink(path.c_str());  // still holding it: no taker has it
  ::flock(fd, LOCK_UN);
  ::close(fd);
}

void MadeDirs::make(const std::string& dir) {
  std::vector<std::filesystem::path> missing;  // DIR and the parents that do not exist, innermost first
  for (auto p = std::filesystem::absolute(dir).lexically_normal(); !p.empty() && p != p.root_path(); p = p.parent_path()) {
    if (!p.has_filename()) continue;  // "a/b/" normalised: its last component is empty
    std::error_code ec;
    if (std::filesystem::exists(p, ec)) break;
    missing.push_back(p);
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (::mkdir(it->c_str(), 0777) == 0) made_.push_back(it->string());
    else if (errno != EEXIST) throw IoError(it->string(), "mkdir", errno);  // (EEXIST: another process just made it)
  }
  if (!std::filesystem::is_directory(dir)) throw IoError(dir, "mkdir", ENOTDIR);
}

void MadeDirs::remove_empty() noexcept {
  for (auto it = made_.rbegin(); it != made_.rend(); ++it) ::rmdir(it->c_str());  // fails, harmlessly, when not empty
  made_.clear();
}

std::optional<std::string> network_fs_type(const std::string& path) {
  struct statfs s {};
  if (::statfs(existing_parent(path).c_str(), &s) != 0) return std::nullopt;
  return network_fs_name(static_cast<unsigned long>(s.f_type));
}

std::optional<std::string> network_fs_name(unsigned long f_type) {
  switch (f_type) {
    case NFS_SUPER_MAGIC: return "nfs";
    case 0x0bd00bd0UL: return "lustre";
    case 0x47504653UL: return "gpfs";
    case V9FS_MAGIC: return "9p";
    case 0xFF534D42UL: return "cifs";
    case SMB_SUPER_MAGIC: return "smb";
    case 0x19830326UL: return "beegfs";
    case 0x65735546UL: return "fuse";
    case CEPH_SUPER_MAGIC: return "ceph";
    default: return std::nullopt;
  }
}

std::uint64_t free_bytes(const std::string& path) {
  struct statfs s {};
  const std::string p = existing_parent(path);
  if (::statfs(p.c_str(), &s) != 0) throw IoError(p, "statfs", errno);
  return static_cast<std::uint64_t>(s.f_bavail) * static_cast<std::uint64_t>(s.f_bsize);
}

std::size_t cpus_available() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

namespace {
/// A whole-number file (cgroup's memory.max, memory.current): its value, or nullopt for "max" or no file.
std::optional<std::uint64_t> read_count(const std::string& path) {
  std::ifstream in(path);
  std::string v;
  if (!(in >> v) || v == "max") return std::nullopt;
  try {
    return std::stoull(v);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}
}  // namespace

std::uint64_t memory_available() {
  std::uint64_t avail = 0;
  {
    std::ifstream in("/proc/meminfo");
    std::string key, unit;
    std::uint64_t kb = 0;
    while (in >> key >> kb) {
      std::getline(in, unit);
      if (key == "MemAvailable:") {
        avail = kb * 1024;
        break;
      }
    }
  }
  const auto lower = [&](std::optional<std::uint64_t> limit, std::optional<std::uint64_t> used) {
    if (!limit) return;
    const std::uint64_t room = used && *used < *limit ? *limit - *used : (used ? 0 : *limit);
    avail = avail == 0 ? room : std::min(avail, room);
  };
  std::ifstream cg("/proc/self/cgroup");
  for (std::string line; std::getline(cg, line);) {
    const auto c1 = line.find(':'), c2 = line.find(':', c1 + 1);
    if (c1 == std::string::npos || c2 == std::string::npos) continue;
    const std::string controllers = line.substr(c1 + 1, c2 - c1 - 1);
    std::string path = line.substr(c2 + 1);
    if (controllers.empty()) {  // v2: every level from the process's group up to the root
      for (;;) {
        const std::string dir = "/sys/fs/cgroup" + (path == "/" ? std::string() : path);
        lower(read_count(dir + "/memory.max"), read_count(dir + "/memory.current"));
        if (path.empty() || path == "/") break;
        path = path.substr(0, path.rfind('/'));
      }
    } else if ((',' + controllers + ',').find(",memory,") != std::string::npos) {
      std::string dir = "/sys/fs/cgroup/memory" + (path == "/" ? std::string() : path);
      if (!read_count(dir + "/memory.limit_in_bytes")) dir = "/sys/fs/cgroup/memory";  // a container sees its own group at the root
      const auto limit = read_count(dir + "/memory.limit_in_bytes");
      if (limit && *limit < (1ull << 60)) lower(limit, read_count(dir + "/memory.usage_in_bytes"));  // "unlimited" is ~2^63
    }
  }
  return avail;
}

std::vector<std::uint8_t> cpu_mask() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0)  // unknown: every CPU the node has
    for (unsigned c = 0; c < std::max(1u, std::thread::hardware_concurrency()) && c < CPU_SETSIZE; ++c) CPU_SET(c, &set);
  std::vector<std::uint8_t> bytes(sizeof set);
  std::memcpy(bytes.data(), &set, sizeof set);
  return bytes;
}

std::size_t threads_per_rank(const std::vector<std::uint8_t>& masks, std::size_t me) {
  constexpr std::size_t N = sizeof(cpu_set_t);
  if (masks.size() % N != 0 || (me + 1) * N > masks.size())
    throw std::invalid_argument("threads_per_rank: " + std::to_string(masks.size()) + " mask bytes for local rank " + std::to_string(me));
  const auto at = [&](std::size_t r) {
    cpu_set_t s;
    std::memcpy(&s, masks.data() + r * N, N);
    return s;
  };
  cpu_set_t mine = at(me);
  std::size_t sharing = 0;
  for (std::size_t r = 0; r < masks.size() / N; ++r) {
    cpu_set_t other = at(r), both;
    CPU_AND(&both, &mine, &other);
    if (CPU_COUNT(&both) > 0) ++sharing;
  }
  return std::max<std::size_t>(1, static_cast<std::size_t>(CPU_COUNT(&mine)) / std::max<std::size_t>(1, sharing));
}

std::string hostname() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

std::string node_name() {
  const char* n = std::getenv("SLURMD_NODENAME");
  return n && *n ? std::string(n) : hostname();
}

}  // namespace hsipipe::fs

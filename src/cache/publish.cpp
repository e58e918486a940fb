#include "cache/publish.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <system_error>

#include "cache/stage.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/test_hook.hpp"

namespace hsipipe::cache {

namespace stdfs = std::filesystem;

std::string job_copy_name(const std::string& out, const char* kind) {
  const char* j = std::getenv("SLURM_JOB_ID");
  const std::string id = j && *j ? std::string(j) : fs::hostname();
  return out + "." + kind + "-" + id + "-" + std::to_string(::getpid());
}

namespace {

/// "ID-PID" with ID not empty and PID one or more digits
bool id_pid(const std::string& s) {
  const auto dash = s.rfind('-');
  if (dash == std::string::npos || dash == 0 || dash + 1 == s.size()) return false;
  return std::all_of(s.begin() + static_cast<std::ptrdiff_t>(dash) + 1, s.end(),
                     [](unsigned char c) { return std::isdigit(c) != 0; });
}

}  // namespace

bool is_job_copy(const std::string& path, const std::string& base) {
  std::string name = stdfs::path(path).filename().string();
  if (name.empty()) name = stdfs::path(path).parent_path().filename().string();  // a trailing '/'
  for (const char* kind : {".tmp-", ".old-"}) {
    const std::string k = kind;
    if (!base.empty()) {
      if (name.rfind(base + k, 0) == 0 && id_pid(name.substr(base.size() + k.size()))) return true;
      continue;
    }
    const auto at = name.rfind(k);
    if (at != std::string::npos && at > 0 && id_pid(name.substr(at + k.size()))) return true;
  }
  return false;
}

void remove_job_copies(const std::string& out, const std::function<void(const std::string&)>& log) {
  const stdfs::path o(out);
  const std::string base = o.filename().string();
  std::error_code ec;
  for (const auto& e : stdfs::directory_iterator(o.parent_path(), ec)) {
    if (!is_job_copy(e.path().string(), base)) continue;
    log(e.path().string());
    std::error_code rm;
    stdfs::remove_all(e.path(), rm);
  }
}

std::string why_not_replaceable(const std::string& path) {
  std::error_code ec;
  const auto st = stdfs::symlink_status(path, ec);
  if (ec || st.type() == stdfs::file_type::not_found) return {};
  if (st.type() != stdfs::file_type::directory)
    return st.type() == stdfs::file_type::regular ? "is a regular file, not a cache directory" : "is not a directory";
  const stdfs::path p(path);
  if (stdfs::exists(p / "manifest.json") || stdfs::exists(p / kStageRecord) || stdfs::is_empty(p, ec)) return {};
  return "holds no manifest.json";
}

namespace {

/// A file of a cache (cache.hpp) or of a staged copy (stage.hpp)
bool cache_file_name(const std::string& name) {
  static const char* const kFixed[] = {"manifest.json", kStageRecord, "cache.h5", "samples.npy", "labels.npy",
                                       "coords.npy", "band_mean.npy", "band_std.npy", "wavelengths.npy",
                                       "pca_components.npy"};
  for (const char* f : kFixed) {
    const std::string n = f;
    // a killed fs::write_text_atomic leaves NAME.tmp-PID
    if (name == n || (name.rfind(n + ".tmp-", 0) == 0 && name.size() > n.size() + 5 &&
                      std::all_of(name.begin() + static_cast<std::ptrdiff_t>(n.size()) + 5, name.end(),
                                  [](unsigned char c) { return std::isdigit(c) != 0; })))
      return true;
  }
  // cube_<s>.npy, s the scene index
  if (name.size() > 9 && name.rfind("cube_", 0) == 0 && name.substr(name.size() - 4) == ".npy")
    return std::all_of(name.begin() + 5, name.end() - 4, [](unsigned char c) { return std::isdigit(c) != 0; });
  return false;
}

}  // namespace

std::vector<std::string> foreign_entries(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : stdfs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    std::error_code te;
    const bool is_dir = e.symlink_status(te).type() == stdfs::file_type::directory;
    if (is_dir || !cache_file_name(name)) out.push_back(name + (is_dir ? "/" : ""));
  }
  std::sort(out.begin(), out.end());
  return out;
}

void refuse_foreign_entries(const std::string& dir, const std::string& what) {
  const auto foreign = foreign_entries(dir);
  if (foreign.empty()) return;
  constexpr std::size_t kShown = 10;
  std::string list;
  for (std::size_t i = 0; i < foreign.size() && i < kShown; ++i) list += (i ? ", " : "") + foreign[i];
  if (foreign.size() > kShown) list += " and " + std::to_string(foreign.size() - kShown) + " more";
  throw ConfigError(dir + ": holds " + std::to_string(foreign.size()) + " file" + (foreign.size() > 1 ? "s" : "") +
                    " that a cache does not (" + list + "); " + what +
                    " would delete them: move them out of the cache folder first (nothing was changed)");
}

std::string destination_path(const std::string& out, bool* followed_link) {
  stdfs::path p = stdfs::absolute(out).lexically_normal();
  if (p.filename().empty() && p.has_parent_path()) p = p.parent_path();  // "c/" -> "c"
  if (followed_link) *followed_link = stdfs::is_symlink(p);
  for (int hops = 0; hops < 40 && stdfs::is_symlink(p); ++hops) {
    const stdfs::path t = stdfs::read_symlink(p);
    p = (t.is_absolute() ? t : p.parent_path() / t).lexically_normal();
    if (p.filename().empty() && p.has_parent_path()) p = p.parent_path();
  }
  if (stdfs::is_symlink(p)) throw IoError(out, "resolving the symbolic link (too many levels)", ELOOP);
  return p.string();
}

std::string iso_time_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string parent_dir(const std::string& path) {
  auto p = std::filesystem::absolute(path).parent_path();
  return p.string();
}

void fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

LockFile::LockFile(const std::string& path, Mode mode, const std::string& busy) : path_(path), shared_(mode == Mode::read_only) {
  fd_ = fs::lock_lock_file(path, (shared_ ? LOCK_SH : LOCK_EX) | LOCK_NB, !shared_);
  if (fd_ < 0 && shared_ && errno == ENOENT) return;
  if (fd_ < 0) {
    const int e = errno;
    if (e != EWOULDBLOCK) throw IoError(path, "open lock file", e);
    const std::string holder = fs::lock_holder(path);
    throw Error(path + ": " + busy + " (lock held by " +
                (holder.empty() ? std::string("an unknown process") : holder) +
                "); wait for it or remove nothing and retry later");
  }
  if (shared_) return;
  const std::string me = "pid " + std::to_string(::getpid()) + " on host " + fs::node_name() + " since " + iso_time_now() + "\n";
  if (::ftruncate(fd_, 0) == 0) {
    if (::pwrite(fd_, me.data(), me.size(), 0) < 0) { /* informational only */ }
  }
}

LockFile::~LockFile() { fs::unlock_lock_file(path_, fd_, !shared_); }

void publish_dir(const std::string& tmp, const std::string& out) {
  const auto remove_old = [](const std::string& dir) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    if (ec) std::cerr << "decode: warning: the replaced cache " << dir << " could not be removed: " << ec.message() << "\n";
  };
  if (!std::filesystem::exists(out)) {
    std::filesystem::rename(tmp, out);
    fsync_dir(parent_dir(out));
    return;
  }
  // HSIPIPE_TEST_NO_EXCHANGE=1: the two renames, as on a file system without the exchange (tests)
  const bool exchange = test_value("HSIPIPE_TEST_NO_EXCHANGE", 0) == 0;
  if (exchange) {
    const int rc = ::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, out.c_str(), RENAME_EXCHANGE);
    const int e = errno;
    if (rc == 0) {
      fsync_dir(parent_dir(out));
      remove_old(tmp);
      return;
    }
    if (e != EINVAL && e != ENOSYS && e != ENOTSUP) throw IoError(out, "renameat2 (exchange with " + tmp + ")", e);
  }
  const std::string old = job_copy_name(out, "old");
  std::filesystem::rename(out, old);
  try {
    std::filesystem::rename(tmp, out);
  } catch (...) {
    std::error_code ec;
    std::filesystem::rename(old, out, ec);
    throw;
  }
  fsync_dir(parent_dir(out));
  remove_old(old);
}

}  // namespace hsipipe::cache

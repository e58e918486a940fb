// cache/stage: once-per-node copy of a cache to node-local storage, under a lock, verified.
#include "cache/stage.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/cache.hpp"
#include "cache/publish.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/hash.hpp"

namespace hsipipe::cache {

namespace stdfs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

/// Owned file descriptor.
class Fd {
 public:
  Fd(const std::string& path, int flags, mode_t mode = 0644) : path_(path), fd_(::open(path.c_str(), flags | O_CLOEXEC, mode)) {
    if (fd_ < 0) throw IoError(path, "open", errno);
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const noexcept { return fd_; }
  const std::string& path() const noexcept { return path_; }
  /// Closes now, reporting errors (a failed close can mean lost writes).
  void close() {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) throw IoError(path_, "close", errno);
  }

 private:
  std::string path_;
  int fd_;
};

/// flock(LOCK_EX) on PATH for the object's lifetime; PATH is removed when it ends (fs::lock_lock_file), so no
/// lock file stays beside DEST.
class FileLock {
 public:
  explicit FileLock(const std::string& path, const StageOptions& opt, double& waited)
      : path_(path), fd_(fs::lock_lock_file(path, LOCK_EX | LOCK_NB, true)) {
    if (fd_ < 0) {
      if (errno != EWOULDBLOCK) throw IoError(path, "flock", errno);
      const std::string holder = fs::lock_holder(path);
      if (opt.log) opt.log("waiting for " + path + (holder.empty() ? "" : " (held by " + holder + ")"));
      const auto t0 = Clock::now();
      fd_ = fs::lock_lock_file(path, LOCK_EX, true);
      if (fd_ < 0) throw IoError(path, "flock", errno);
      waited = since(t0);
    }
    // Who holds it, for the next waiter's message. Best effort: the lock, not this text, is the contract.
    const std::string me = fs::node_name() + " pid " + std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd_, 0) == 0) {
      [[maybe_unused]] const ssize_t n = ::pwrite(fd_, me.data(), me.size(), 0);
    }
  }
  ~FileLock() { fs::unlock_lock_file(path_, fd_, true); }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  std::string path_;
  int fd_;
};

/// A directory removed on destruction unless released.
class TempDir {
 public:
  explicit TempDir(std::string path) : path_(std::move(path)) {
    std::error_code ec;
    stdfs::remove_all(path_, ec);
    if (!stdfs::create_directory(path_, ec) || ec) throw IoError(path_, "mkdir", ec ? ec.value() : EEXIST);
  }
  ~TempDir() {
    if (!path_.empty()) {
      std::error_code ec;
      stdfs::remove_all(path_, ec);
    }
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const noexcept { return path_; }
  void release() noexcept { path_.clear(); }

 private:
  std::string path_;
};

struct FileEntry {
  std::string rel;
  std::uint64_t size = 0;
  std::uint64_t xxh3 = 0;
};

/// Regular files under dir (recursively), relative paths sorted; the stage record itself excluded.
std::vector<FileEntry> list_files(const std::string& dir) {
  std::vector<FileEntry> out;
  std::error_code ec;
  for (auto it = stdfs::recursive_directory_iterator(dir, ec); !ec && it != stdfs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file()) continue;  // follows symlinks; directories are recreated by their files
    FileEntry e;
    e.rel = stdfs::relative(it->path(), dir).string();
    if (e.rel == kStageRecord) continue;
    e.size = it->file_size();
    out.push_back(std::move(e));
  }
  if (ec) throw IoError(dir, "list directory", ec.value());
  std::sort(out.begin(), out.end(), [](const FileEntry& a, const FileEntry& b) { return a.rel < b.rel; });
  return out;
}

void fsync_path(const std::string& path) {
  Fd fd(path, O_RDONLY | O_DIRECTORY);
  if (::fsync(fd.get()) != 0) throw IoError(path, "fsync", errno);
}

/// Copies src to dst (created, must not exist), hashing the bytes read; fsyncs dst. Returns the hash.
std::uint64_t copy_file_hashed(const std::string& src, const std::string& dst, std::uint64_t expect_size) {
  Fd in(src, O_RDONLY);
  Fd out(dst, O_WRONLY | O_CREAT | O_EXCL);
  Xxh3Stream h;
  std::vector<char> buf(std::size_t{8} << 20);
  std::uint64_t total = 0;
  for (;;) {
    const ssize_t n = ::read(in.get(), buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw IoError(src, "read", errno);
    }
    if (n == 0) break;
    h.update(buf.data(), static_cast<std::size_t>(n));
    std::size_t off = 0;
    while (off < static_cast<std::size_t>(n)) {
      const ssize_t w = ::write(out.get(), buf.data() + off, static_cast<std::size_t>(n) - off);
      if (w < 0) {
        if (errno == EINTR) continue;
        throw IoError(dst, "write", errno);
      }
      off += static_cast<std::size_t>(w);
    }
    total += static_cast<std::uint64_t>(n);
  }
  if (total != expect_size) {
    throw IoError(src, "changed size while being copied (" + std::to_string(expect_size) + " -> " +
                           std::to_string(total) + " bytes)");
  }
  if (::fsync(out.get()) != 0) throw IoError(dst, "fsync", errno);
  out.close();
  return h.digest();
}

std::string now_iso() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string mb(std::uint64_t bytes) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(1);
  s << static_cast<double>(bytes) / 1e6 << " MB";
  return s.str();
}

/// Recomputes the data checksum of the cache at dir; empty when it matches the manifest, else why not.
/// `own_copy`: dir is this job's unpublished copy (CacheReader::open_own_copy).
std::string data_checksum_problem(const std::string& dir, bool own_copy = false) {
  try {
    const CacheReader r = own_copy ? CacheReader::open_own_copy(dir) : CacheReader::open(dir);
    const std::string got = compute_data_checksum(r), want = r.data_checksum();
    if (got != want) return "data checksum " + got + " differs from the manifest's data_checksum " + want;
    return {};
  } catch (const Error& e) {
    return e.what();
  }
}

bool is_within(const stdfs::path& inner, const stdfs::path& outer) {
  auto i = inner.begin();
  for (auto o = outer.begin(); o != outer.end(); ++o, ++i) {
    if (o->empty()) continue;  // trailing separator
    if (i == inner.end() || *i != *o) return false;
  }
  return true;
}

}  // namespace

std::string staged_copy_problem(const std::string& src_manifest, const std::string& dest) {
  const std::string mpath = dest + "/manifest.json", rpath = dest + "/" + kStageRecord;
  if (!stdfs::exists(mpath)) return mpath + ": missing";
  if (fs::read_text(mpath) != src_manifest) return mpath + ": differs from the source's manifest (another or a rebuilt cache)";
  if (!stdfs::exists(rpath)) return rpath + ": missing (not a complete copy made by hsipipe stage)";
  nlohmann::json rec;
  try {
    rec = nlohmann::json::parse(fs::read_text(rpath));
  } catch (const nlohmann::json::exception& e) {
    return rpath + ": not valid JSON (" + e.what() + ")";
  }
  std::map<std::string, std::pair<std::uint64_t, std::string>> want;
  try {
    for (const auto& f : rec.at("files")) {
      want[f.at("path").get<std::string>()] = {f.at("size").get<std::uint64_t>(), f.at("xxh3").get<std::string>()};
    }
  } catch (const nlohmann::json::exception& e) {
    return rpath + ": field files: " + e.what();
  }
  const auto have = list_files(dest);
  for (const auto& f : have) {
    if (!want.count(f.rel)) return dest + "/" + f.rel + ": not in the stage record";
  }
  if (have.size() != want.size()) {
    for (const auto& [rel, v] : want) {
      if (std::none_of(have.begin(), have.end(), [&](const FileEntry& f) { return f.rel == rel; })) {
        return dest + "/" + rel + ": missing";
      }
    }
  }
  for (const auto& f : have) {
    const auto& [size, hash] = want.at(f.rel);
    if (f.size != size) {
      return dest + "/" + f.rel + ": " + std::to_string(f.size) + " bytes, staged " + std::to_string(size);
    }
    const std::string got = hex64(xxh3_file(dest + "/" + f.rel));
    if (got != hash) return dest + "/" + f.rel + ": content changed since it was staged (xxh3 " + got + ", staged " + hash + ")";
  }
  if (auto p = data_checksum_problem(dest); !p.empty()) return dest + ": " + p;
  return {};
}

namespace {

struct StagePaths {
  stdfs::path src, dest, parent;
};

/// CACHE and DEST made absolute and checked: a cache folder, not overlapping, DEST on local storage.
StagePaths checked_paths(const std::string& src_in, const std::string& dest_in, const StageOptions& opt) {
  if (src_in.empty() || dest_in.empty()) throw ConfigError("hsipipe stage: CACHE and DEST must not be empty");
  StagePaths p;
  p.src = stdfs::weakly_canonical(stdfs::absolute(src_in));
  p.dest = stdfs::weakly_canonical(stdfs::absolute(dest_in));
  if (!stdfs::is_directory(p.src)) throw ConfigError(p.src.string() + ": not a cache directory (CACHE)");
  if (is_within(p.dest, p.src) || is_within(p.src, p.dest)) {
    throw ConfigError("DEST " + p.dest.string() + " and CACHE " + p.src.string() + " overlap: stage copies to another place");
  }
  p.parent = p.dest.parent_path();
  if (auto net = fs::network_fs_type(p.parent.string()); net && !opt.allow_network_dest) {
    throw ConfigError("DEST " + p.dest.string() + " is on a network file system (" + *net +
                      "): stage to node-local storage (e.g. $SLURM_TMPDIR); caches are not memory-mapped over " + *net);
  }
  return p;
}

/// With a lock held on DEST: true when the copy already at DEST is valid (res.action = reused); otherwise moves
/// an invalid copy or cache aside and removes it (res.action = replaced). Refuses a DEST holding a user's files.
bool reuse_or_clear(const std::string& dest, const std::string& src_manifest, StageResult& res,
                    const std::function<void(const std::string&)>& log) {
  if (!stdfs::exists(dest)) return false;
  // Only a copy (its stage record) or a cache (its manifest) is ever replaced; an empty folder too. Any
  // other file or folder there is the user's: refused, never removed.
  if (const std::string why_not = why_not_replaceable(dest); !why_not.empty()) {
    throw ConfigError("DEST " + dest + " exists and " + why_not + " (nor " + kStageRecord +
                      "): it is not a cache or a staged copy, the only things stage replaces; remove it or choose another DEST");
  }
  const auto t0 = Clock::now();
  const std::string problem = staged_copy_problem(src_manifest, dest);
  res.seconds_verifying = since(t0);
  if (problem.empty()) {
    res.action = StageAction::reused;
    return true;
  }
  refuse_foreign_entries(dest, "replacing the copy (" + problem + ")");
  res.action = StageAction::replaced;
  res.replaced_reason = problem;
  log("existing copy is not valid: " + problem + "; replacing it");
  const std::string old = job_copy_name(dest, "old");
  if (::rename(dest.c_str(), old.c_str()) != 0) throw IoError(dest, "rename to " + old, errno);
  std::error_code ec;
  stdfs::remove_all(old, ec);  // readers that still map files of the old copy keep their inodes
  return false;
}

/// Copies the files into `tmp`, hashing the bytes read (FileEntry::xxh3).
std::vector<FileEntry> copy_files(const std::string& src, const std::vector<FileEntry>& files, const std::string& tmp) {
  std::vector<FileEntry> copied = files;
  std::error_code ec;
  for (auto& f : copied) {
    const stdfs::path to = stdfs::path(tmp) / f.rel;
    stdfs::create_directories(to.parent_path(), ec);
    if (ec) throw IoError(to.parent_path().string(), "mkdir", ec.value());
    f.xxh3 = copy_file_hashed(src + "/" + f.rel, to.string(), f.size);
  }
  return copied;
}

/// The copy's stage record: where it came from, when, and each file's size and hash.
void write_stage_record(const std::string& tmp, const std::string& src, const std::string& data_checksum,
                        const std::vector<FileEntry>& copied) {
  nlohmann::json rec;
  rec["format"] = 1;
  rec["source"] = src;
  rec["host"] = fs::hostname();
  rec["staged_at"] = now_iso();
  rec["data_checksum"] = data_checksum;
  rec["files"] = nlohmann::json::array();
  for (const auto& f : copied) rec["files"].push_back({{"path", f.rel}, {"size", f.size}, {"xxh3", hex64(f.xxh3)}});
  fs::write_text_atomic(tmp + "/" + kStageRecord, rec.dump(2) + "\n");
}

/// Verifies what landed on the local disk: every file against the bytes read from the source, then the data
/// checksum against the manifest (a corrupt source is caught here, before anyone trains on it).
void verify_copy(const std::string& tmp, const std::string& src, const std::vector<FileEntry>& copied) {
  for (const auto& f : copied) {
    const std::string got = hex64(xxh3_file(tmp + "/" + f.rel));
    if (got != hex64(f.xxh3)) {
      throw IoError(tmp + "/" + f.rel, "copy differs from the bytes read from the source (xxh3 " + got + ", read " +
                                           hex64(f.xxh3) + ")");
    }
  }
  if (auto p = data_checksum_problem(tmp, true); !p.empty()) {
    throw StaleError(src + ": the copy fails its data checksum (" + p +
                     "): the source cache is corrupt; check it with `hsipipe verify " + src + "`");
  }
}

}  // namespace

StageResult stage(const std::string& src_in, const std::string& dest_in, const StageOptions& opt) {
  const std::function<void(const std::string&)> log = [&](const std::string& s) {
    if (opt.log) opt.log(s);
  };
  const StagePaths p = checked_paths(src_in, dest_in, opt);
  const std::string src = p.src.string(), dest = p.dest.string();
  // The source must be a complete cache (this also refuses a half-written one) and stay one while we read.
  const CacheReader src_cache = CacheReader::open(src);
  const std::string src_manifest = fs::read_text(src + "/manifest.json");

  // made for DEST's parent: removed again, once the lock file is, when stage is refused or fails
  fs::MadeDirs made;
  made.make(p.parent.string());

  StageResult res;
  res.dest = dest;
  FileLock lock(dest + ".lock", opt, res.seconds_waiting);

  // Leftovers of callers that died while holding the lock.
  remove_job_copies(dest, [&](const std::string& f) { log("removing leftover " + f); });

  const auto files = list_files(src);
  std::uint64_t total = 0;
  for (const auto& f : files) total += f.size;
  res.files = files.size();
  res.bytes = total;
  if (reuse_or_clear(dest, src_manifest, res, log)) {
    res.data_checksum = src_cache.data_checksum();
    return res;
  }
  const std::uint64_t free = fs::free_bytes(p.parent.string());
  if (free < total) {
    throw IoError(p.parent.string(), "not enough space to stage " + src + ": needs " + mb(total) + ", " + mb(free) + " free");
  }

  TempDir tmp(job_copy_name(dest, "tmp"));
  const auto t_copy = Clock::now();
  const std::vector<FileEntry> copied = copy_files(src, files, tmp.path());
  res.seconds_copying = since(t_copy);
  // The source must not have been republished under us: same manifest as when we opened it.
  if (fs::read_text(src + "/manifest.json") != src_manifest) {
    throw StaleError(src + "/manifest.json changed while the cache was being staged; run stage again");
  }
  write_stage_record(tmp.path(), src, src_cache.data_checksum(), copied);
  const auto t_verify = Clock::now();
  verify_copy(tmp.path(), src, copied);
  res.seconds_verifying += since(t_verify);
  res.data_checksum = src_cache.data_checksum();

  fsync_path(tmp.path());
  if (::rename(tmp.path().c_str(), dest.c_str()) != 0) throw IoError(dest, "rename from " + tmp.path(), errno);
  tmp.release();
  fsync_path(p.parent.string());
  return res;
}

}  // namespace hsipipe::cache

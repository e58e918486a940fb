#pragma once
// publish: the names and rules shared by the two commands that publish a directory by rename (decode a
// cache, stage a copy of one): a job's temporary and replaced copies, what may be replaced, and where a
// destination really is; decode's lock file (LockFile) and its publishing rename (publish_dir). Rank-local:
// decode calls the lock and publish_dir on rank 0 only.
#include <functional>
#include <string>
#include <vector>

namespace hsipipe::cache {

/// OUT.KIND-ID-PID, next to OUT: a job's temporary ("tmp") or replaced ("old") copy of OUT. ID is the
/// Slurm job id where there is one, else the host name; PID the process id.
std::string job_copy_name(const std::string& out, const char* kind);

/// Whether the last component of `path` is such a name (of any OUT, or of OUT = `base` when given):
/// BASE.tmp-ID-PID or BASE.old-ID-PID with ID not empty and PID digits. A user's `cache.old-v1` or
/// `cache.tmp-keep` is not one.
bool is_job_copy(const std::string& path, const std::string& base = {});

/// Removes the job copies of `out` (see is_job_copy) left beside it by jobs that died; `log` is told of
/// each. Only for a caller that holds OUT's lock: no live job has a copy of OUT then.
void remove_job_copies(const std::string& out, const std::function<void(const std::string&)>& log);

/// Empty when `path` may be replaced by a new cache or copy: a directory holding a manifest.json (a
/// cache, even a damaged one) or a stage record (a staged copy), or an empty directory. Otherwise why
/// not ("is a regular file", "holds no manifest.json ..."): anything else is the user's, never removed,
/// --force or not.
std::string why_not_replaceable(const std::string& path);

/// The entries of directory `dir` that are not a cache's or a staged copy's files (manifest.json, stage.json,
/// cache.h5, the .npy arrays of cache.hpp, a killed atomic write's NAME.tmp-PID of those): what a user put
/// there, which replacing `dir` would delete. Sorted; a folder is named with a trailing '/'.
std::vector<std::string> foreign_entries(const std::string& dir);
/// Throws ConfigError when `dir` holds foreign_entries(): "`what` would delete them"; nothing is changed.
void refuse_foreign_entries(const std::string& dir, const std::string& what);

/// `--out` as decode uses it (stage resolves DEST with weakly_canonical): absolute, normalised, without
/// a trailing '/', and, when its last component is a symbolic link, the link's target (replacing a cache
/// then replaces the target, and its lock is the target's lock, whichever name the job was given).
/// `followed_link`, when given, is told whether a link was followed.
std::string destination_path(const std::string& out, bool* followed_link = nullptr);

/// The current UTC time as 2026-12-05T10:00:00Z (lock files, manifests).
std::string iso_time_now();

/// The absolute path of `path`'s parent directory.
std::string parent_dir(const std::string& path);

/// fsync of directory `dir` (its entries durable); errors are ignored (best effort after a rename).
void fsync_dir(const std::string& dir);

/// flock()-based lock file PATH.lock, held by rank 0 for the whole decode and removed when it ends
/// (fs::lock_lock_file: a refused or finished decode leaves none beside the cache). The kernel releases it
/// when the process dies (kill -9 included); that file stays until the next decode of PATH.
class LockFile {
 public:
  enum class Mode { build, read_only };
  /// build: an exclusive lock, the file holding who holds it. Throws IoError when the file cannot be
  /// opened, Error naming the holder when another decode holds it.
  /// read_only: for checking a cache where the lock file cannot be created. A shared lock on the lock file
  /// when it exists (read-only descriptor), so that a decode building there now (exclusive) is seen, and
  /// holds off while the cache is compared; none when there is no lock file (no decode ever built there).
  /// `busy`: what the holder is doing, for the message when another process holds the lock.
  explicit LockFile(const std::string& path, Mode mode = Mode::build,
                    const std::string& busy = "another decode is building this cache now");
  ~LockFile();
  LockFile(const LockFile&) = delete;
  LockFile& operator=(const LockFile&) = delete;

 private:
  std::string path_;
  bool shared_ = false;
  int fd_ = -1;
};

/// Publishes directory `tmp` as `out` (same parent). When `out` exists (--force), the two are swapped in one
/// step (renameat2 RENAME_EXCHANGE: at every moment `out` is a whole cache, the old one or the new one) and
/// the old one, now at `tmp`, is removed; a crash before that leaves it as a `.tmp-*` directory, which the
/// next decode removes. File systems without the exchange (NFS: EINVAL) get two renames, and the old cache
/// is put back when the second fails. Once the new cache is in place, failing to remove the old one is a
/// warning: the job's work is done.
void publish_dir(const std::string& tmp, const std::string& out);

}  // namespace hsipipe::cache

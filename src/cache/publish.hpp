#pragma once
// publish: the names and rules shared by the two commands that publish a directory by rename (decode a
// cache, stage a copy of one): a job's temporary and replaced copies, what may be replaced, and where a
// destination really is. Rank-local.
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

}  // namespace hsipipe::cache

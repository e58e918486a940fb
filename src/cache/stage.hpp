#pragma once
// cache/stage: copy a finished cache to node-local storage once per node, so that training never
// memory-maps a cache over a network file system.
//
// Contract (rank-local; any number of processes on one node may call stage() for the same DEST at once):
//  - DEST.lock (a file beside DEST, removed when done) is held with flock(LOCK_EX) for the whole check-and-copy, so one
//    caller copies and the others wait, then find the valid copy and reuse it.
//  - A copy is valid when its manifest.json equals the source's byte for byte, its stage record
//    (DEST/stage.json, written at copy time from the bytes read from the source) lists exactly the files
//    present with their sizes and XXH3-64, every file still hashes to its recorded value, and the data
//    checksum recomputed from the copy (cache::compute_data_checksum) equals the manifest's
//    data_checksum. A valid copy is reused untouched; anything else is removed and copied again, unless it
//    holds files a cache does not (a user's): then ConfigError naming them (publish.hpp: foreign_entries).
//  - A new copy is written to DEST.tmp-HOST-PID, fsynced, verified (per-file hashes and data checksum)
//    and published by one rename: DEST is either absent, the old copy, or a complete verified copy.
//  - DEST on a network file system (nfs, lustre, gpfs, ...) is refused (ConfigError) unless
//    `allow_network_dest` (publishing a node-local decode to shared storage).
#include <cstdint>
#include <functional>
#include <string>

namespace hsipipe::cache {

struct StageOptions {
  /// Allow DEST on a network/cluster file system (publishing to shared storage, never for training).
  bool allow_network_dest = false;
  /// Progress and decisions, one line each (default: none).
  std::function<void(const std::string&)> log;
};

enum class StageAction {
  reused,    ///< a valid copy was already at DEST
  copied,    ///< DEST did not exist
  replaced,  ///< DEST existed but was invalid (reason in StageResult::replaced_reason)
};

struct StageResult {
  StageAction action = StageAction::copied;
  std::string dest;             ///< absolute path of the valid copy
  std::string data_checksum;    ///< verified on the copy
  std::uint64_t bytes = 0;      ///< bytes of the cache (copied, or verified when reused)
  std::size_t files = 0;
  double seconds_waiting = 0;   ///< time spent waiting for another process's lock
  double seconds_copying = 0;
  double seconds_verifying = 0;
  std::string replaced_reason;  ///< why an existing copy was not reused
};

/// Stages the cache directory `src` at `dest` (see the contract above). Throws StaleError when src is
/// not a complete cache or its bytes do not match its own data checksum, ConfigError for a bad DEST
/// (network file system, inside the source, ...), IoError for OS failures and lack of space; on any
/// error nothing is left at DEST that a later call would accept.
StageResult stage(const std::string& src, const std::string& dest, const StageOptions& options = {});

/// Why the copy at `dest` is not a valid copy of the cache whose manifest text is `src_manifest`, or
/// an empty string when it is valid. Reads every byte of the copy. Rank-local, takes no lock.
std::string staged_copy_problem(const std::string& src_manifest, const std::string& dest);

inline constexpr const char* kStageRecord = "stage.json";

}  // namespace hsipipe::cache

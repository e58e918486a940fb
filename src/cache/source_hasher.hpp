#pragma once
// cache/source_hasher: the sources a cache is built from, as its manifest lists them (describe_sources),
// and their content hashes: on rank 0 alone before a cache is compared (hash_sources), or by every rank
// beside the decode (SourceHasher). The hashes are core/hash.hpp's chunked XXH3-64 and do not depend on who
// hashed what. Internal to cache.
#include <cstdint>
#include <future>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/decode_plan.hpp"
#include "dist/mpi.hpp"

namespace hsipipe::cache {

/// Rank-local. Sources as the manifest records them, in scene order (each scene's files, then its label
/// raster's; a file once); local files get "xxh3": "" until hashed, remote objects come with theirs.
nlohmann::json describe_sources(const std::vector<SceneState>& scenes);

/// Rank-local. Fills in the "xxh3" of the local files describe_sources() lists, on this thread (rank 0,
/// to compare with an existing cache).
void hash_sources(nlohmann::json& sources);

/// The same, by every rank at once, beside the decode: the chunks of the files to hash (core/hash.hpp)
/// are numbered across the files in manifest order and split into contiguous ranges of about the same
/// bytes per rank; each rank hashes its range on a thread, and rank 0 combines them.
class SourceHasher {
 public:
  /// Rank-local. `sources`: describe_sources() on every rank (paths and sizes). Starts this rank's thread.
  SourceHasher(const nlohmann::json& sources, int R, int rank);
  /// COLLECTIVE. Joins the thread (a failure on any rank fails every rank), gathers the chunk hashes and,
  /// on rank 0, sets the "xxh3" of every file it hashed in `sources`.
  void finish(const dist::Comm& comm, nlohmann::json& sources);

 private:
  struct File {
    std::string path;
    std::uint64_t size = 0, chunks = 0;
    bool todo = false;
  };
  Range my_chunks(int R, int rank) const;
  void hash_range(Range mine);

  std::vector<File> files_;
  std::vector<std::uint64_t> mine_;
  std::future<void> job_;  // its destructor waits for the thread
};

}  // namespace hsipipe::cache

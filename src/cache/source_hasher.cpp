// cache/source_hasher: the sources of a cache and their hashes (see source_hasher.hpp).
#include "cache/source_hasher.hpp"

#include <algorithm>
#include <filesystem>
#include <set>

#include "cache/preprocess.hpp"
#include "core/fs.hpp"
#include "core/hash.hpp"
#include "dist/collective.hpp"

namespace hsipipe::cache {

namespace {
bool needs_hash(const nlohmann::json& src) { return !src.value("remote", false) && src.value("xxh3", "").empty(); }
}  // namespace

nlohmann::json describe_sources(const std::vector<SceneState>& scenes) {
  nlohmann::json out = nlohmann::json::array();
  std::set<std::string> seen;
  auto add_local = [&](const std::string& f) {
    std::string abs = std::filesystem::absolute(f).lexically_normal().string();
    if (!seen.insert(abs).second) return;
    const auto st = fs::stat_file(abs);
    out.push_back({{"path", abs}, {"size", st.size}, {"mtime_ns", st.mtime_ns}, {"xxh3", ""}});
  };
  auto add_scene = [&](const io::Scene& s) {
    if (auto id = s.source_identity()) {
      if (!seen.insert(id->url).second) return;
      out.push_back({{"path", id->url}, {"remote", true}, {"size", id->size}, {"etag", id->etag},
                     {"last_modified", id->last_modified}, {"xxh3", id->content_hash}, {"hashed_bytes", id->hashed_bytes}});
      return;
    }
    for (const auto& f : s.source_files()) add_local(f);
  };
  for (const auto& st : scenes) {
    add_scene(*st.scene);
    if (st.input.labels) {
      io::SceneSpec labels = *st.input.labels;
      labels.role = io::SceneSpec::Role::labels;
      add_scene(*io::open_scene(labels));
    }
  }
  return out;
}

void hash_sources(nlohmann::json& sources) {
  for (auto& src : sources)
    if (needs_hash(src)) src["xxh3"] = hex64(xxh3_chunked_file(src.at("path").get<std::string>()));
}

SourceHasher::SourceHasher(const nlohmann::json& sources, int R, int rank) {
  for (const auto& src : sources) {
    const bool todo = needs_hash(src);
    files_.push_back({todo ? src.at("path").get<std::string>() : std::string(), src.value("size", std::uint64_t{0}),
                      todo ? hash_chunk_count(src.value("size", std::uint64_t{0})) : 0, todo});
  }
  const Range mine = my_chunks(R, rank);
  // async | deferred: where no thread can be started (EAGAIN: a process or memory limit), libstdc++ runs
  // the hashing in finish() instead, inside its collective step, rather than failing this rank alone here
  if (mine.size() > 0) job_ = std::async(std::launch::async | std::launch::deferred, [this, mine] { hash_range(mine); });
}

/// Contiguous chunk ranges of about the same bytes per rank (a file's last chunk is short; counting chunks
/// gave the first ranks up to a chunk more each: 256 against 193 MiB on 2 ranks for the benchmark's scene):
/// a chunk goes to the rank whose share of the bytes its first byte falls in.
Range SourceHasher::my_chunks(int R, int rank) const {
  std::uint64_t total = 0, bytes = 0;
  for (const auto& f : files_) total += f.chunks, bytes += f.todo ? f.size : 0;
  const auto owner = [&](std::uint64_t at) {  // rank of byte `at` of the concatenated files
    return static_cast<int>(static_cast<u128>(at) * static_cast<unsigned>(R) / std::max<std::uint64_t>(1, bytes));
  };
  Range mine{total, total};
  std::uint64_t c = 0, at = 0;
  for (const auto& f : files_)
    for (std::uint64_t k = 0; k < f.chunks; ++k, ++c) {
      if (owner(at) == rank) mine = {std::min(mine.begin, c), c + 1};
      at += std::min(kHashChunkBytes, f.size - k * kHashChunkBytes);
    }
  if (mine.begin == total) mine = {0, 0};
  return mine;
}

/// On the hashing thread: the hashes of chunks [mine.begin, mine.end) of the files, in order.
void SourceHasher::hash_range(Range mine) {
  std::uint64_t first = 0;  // global number of the file's first chunk
  for (const auto& f : files_) {
    const std::uint64_t c0 = std::max(mine.begin, first), c1 = std::min(mine.end, first + f.chunks);
    if (c0 < c1) {
      const auto h = xxh3_file_chunks(f.path, f.size, c0 - first, c1 - first);
      mine_.insert(mine_.end(), h.begin(), h.end());
    }
    first += f.chunks;
  }
}

void SourceHasher::finish(const dist::Comm& comm, nlohmann::json& sources) {
  dist::collective_step(comm, "hashing the sources", [&] {
    if (job_.valid()) job_.get();
  });
  const auto all = comm.allgatherv(mine_);  // rank order = chunk order
  if (comm.rank() != 0) return;
  std::size_t at = 0;
  for (std::size_t i = 0; i < files_.size(); ++i) {
    if (!files_[i].todo) continue;  // hashed before, or remote: keeps its value (an empty file: of no chunk)
    const std::vector<std::uint64_t> h(all.begin() + static_cast<std::ptrdiff_t>(at),
                                       all.begin() + static_cast<std::ptrdiff_t>(at + files_[i].chunks));
    sources[i]["xxh3"] = hex64(combine_chunk_hashes(h));
    at += files_[i].chunks;
  }
}

}  // namespace hsipipe::cache

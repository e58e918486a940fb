#pragma once
// cache/shard_impl: what a Shard holds. shard.cpp loads it (in memory, or streamed: mapped from the cache
// file), shard_gather.cpp turns it into training inputs. Private to cache/.
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "cache/cache.hpp"

namespace hsipipe::cache {

/// Items [first, first + count) of one stored array (samples, or one scene's cube rows), as stored: read
/// into `owned`, or mapped (streamed: `mapped.file` set).
struct StoredItems {
  std::vector<char> owned;
  MappedItems mapped;
  std::uint64_t first = 0, count = 0, item_bytes = 0;

  bool streamed() const noexcept { return mapped.file != nullptr; }
  std::uint64_t bytes() const noexcept { return count * item_bytes; }
  /// Item g's bytes (first <= g < first + count).
  const char* item(std::uint64_t g) const {
    return streamed() ? mapped.file->data() + mapped.offset(g) : owned.data() + (g - first) * item_bytes;
  }
  /// The items as one run of bytes: held, or mapped from consecutive places of the file; nullptr otherwise.
  const char* run() const {
    if (!streamed()) return owned.data();
    if (count == 0) return mapped.file->data();
    for (std::size_t c = 1; c < mapped.chunk_offset.size(); ++c)
      if (mapped.chunk_offset[c] != mapped.chunk_offset[c - 1] + mapped.chunk_items * item_bytes) return nullptr;
    return item(first);
  }
};

/// madvise over the pages covering [p, p + n) of a mapping; advisory, errors ignored.
inline void advise_pages(const char* p, std::size_t n, int advice) noexcept {
  static const std::uintptr_t page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(p) / page * page, e = reinterpret_cast<std::uintptr_t>(p) + n;
  if (n) (void)::madvise(reinterpret_cast<void*>(a), e - a, advice);
}

struct Shard::Impl {
  Range range;
  Layout layout = Layout::pixel;
  bool f16 = false;
  std::size_t elem = 4;
  int bands = 0;
  int stored_patch = 1;  ///< p of the stored samples (patch layout) or of decode (cube)
  int patch = 1;         ///< p of gather()'s output
  bool zero_border = false;
  bool streamed = false;
  std::uint64_t bytes_read = 0;
  std::vector<std::uint64_t> item_hashes;  ///< pixel / patch: its samples'; cube: the rows it owns (hash_cube_rows)
  double hash_seconds = 0;
  mutable std::atomic<std::uint64_t> streamed_bytes{0};  ///< streamed: stored bytes gather() read

  StoredItems samples;  ///< pixel / patch: [range.size(), B, sp, sp] as stored

  struct SceneRows {
    std::uint32_t rows = 0, cols = 0;   ///< scene size
    std::uint32_t row0 = 0, nrows = 0;  ///< rows held (or mapped)
    StoredItems data;                   ///< rows [row0, row0 + nrows) of [rows, cols, B]
  };
  std::vector<SceneRows> scenes;                    ///< cube
  std::vector<std::int32_t> s_scene, s_row, s_col;  ///< cube: per local sample

  void gather_stored(const std::uint64_t* ids, std::size_t n, float* out) const;
  void gather_cube(const std::uint64_t* ids, std::size_t n, float* out) const;
  /// Streamed: asks the kernel for the pages of a batch before they are copied (MADV_WILLNEED), so that a
  /// batch's reads go to the disk together (when `advise`: see Shard::gather); counts the stored bytes in
  /// streamed_bytes either way.
  void prefetch(const std::uint64_t* ids, std::size_t n, bool advise) const;
};

}  // namespace hsipipe::cache

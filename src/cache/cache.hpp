#pragma once
// cache: the on-disk contract between phase one (decode) and everything after it (folds, train,
// verify, stage). A cache is a DIRECTORY, published by one atomic rename when complete:
//
//   PATH/manifest.json   always; written last before the rename. Keys other tools rely on:
//                        format_version, n_samples, n_bands, layout, dtype, data_checksum, sources,
//                        backend, patch, border, scenes [{name, rows, cols}], label_values, and
//                        manifest_xxh3: the seal of the file's own text (core/seal.hpp), which open() checks
//                        (an edited field is a FormatError naming manifest_xxh3; none in older caches).
//                        Also: params (every preprocessing parameter, compared for reuse; scenes[] with the
//                        variable read and a MATLAB matrix's image_size), statistics {over (what was used:
//                        "all-pixels" for a cache without labels), count, mean, std, min, max, shift, scale},
//                        pca, shape, libraries,
//                        hsipipe_version, hsipipe_commit, created, host, ranks, bytes,
//                        source_bytes_read (all ranks' readers; the same for any rank count).
//                        sources [{path, size, mtime_ns, xxh3}]: xxh3 of a local file is the chunked
//                        XXH3-64 of core/hash.hpp (16 MiB chunks, hashed by all ranks at once), named in
//                        source_hash_method; format 1 used one XXH3-64 of the whole file.
//   backend "npy":       samples.npy   layout pixel: [N, B]; patch: [N, B, p, p]
//                        cube_<s>.npy  layout cube: one [H_s, W_s, B] per scene s (no samples.npy)
//                        labels.npy    int32 [N]           (-1 for unlabeled prediction samples)
//                        coords.npy    int32 [N, 3]        (scene, row, col)
//                        band_mean.npy, band_std.npy float64 [B_after_drop] (normalisation stats),
//                        wavelengths.npy float64 (kept bands), pca_components.npy float64 [K, B] if PCA
//   backend "h5":        cache.h5 with the same arrays as datasets: /samples or /cube/<s>, /labels,
//                        /coords, /band_mean, /band_std, /wavelengths, /pca_components; the manifest
//                        JSON also as the string attribute "manifest" on the root group.
//   Sample order: scenes in the order given, then row-major over labeled pixels. Element types:
//   dtype "float32" or "float16" (IEEE half, little-endian). <s> is the scene index 0, 1, ...
//
// Stored values: x' = (x - shift[b]) / scale[b] per kept band b, in float64, (zscore: shift = mean,
// scale = population std; minmax: shift = min, scale = max - min; none: 0 and 1; a zero scale is
// replaced by 1), then with PCA y_k = sum_b components[k][b] * (x'_b - pca_mean[b]), then rounded to
// dtype. Patch layout: [i, b, dy, dx] is the value of pixel (row + dy - p/2, col + dx - p/2); outside
// the scene `border` decides: "reflect" mirrors without repeating the edge (numpy.pad 'reflect'),
// "zero" stores 0. Invalid (nodata / NaN / +-Inf in a kept band, params.validity_bands: "kept") pixels are
// never samples; where one is stored (in the cube, or inside a patch) its values are 0 (manifest
// params.invalid_pixels: "zero").
//
// data_checksum (independent of the rank count and of the backend): 16 hex digits of XXH3-64 over a
// little-endian uint64 array holding, in order, XXH3-64 of the stored bytes of every item (pixel and
// patch layouts: one item per sample, B or B*p*p elements; cube: one item per cube row, W_s*B
// elements, scenes in order, rows top-down), then XXH3-64 of the labels bytes (int32 [N]) and of the
// coords bytes (int32 [N, 3]).
//
// Readers (everything here) are rank-local unless marked COLLECTIVE.
#include <cstdint>
#include <iosfwd>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.hpp"
#include "core/mapped.hpp"
#include "core/range.hpp"

namespace hsipipe::cache {

inline constexpr int kFormatVersion = 2;  // 2: chunked source hashes

enum class Layout { pixel, patch, cube };
std::string layout_name(Layout l);
Layout layout_from_name(const std::string& s);  ///< throws ConfigError naming the value

struct SceneDims {
  std::string name;
  std::uint32_t rows = 0, cols = 0;
};

/// The sample table: for sample i, its label and where it came from. Small (16 bytes a sample).
struct SampleTable {
  std::vector<std::int32_t> label, scene, row, col;
  std::vector<SceneDims> scenes;
  std::size_t size() const noexcept { return label.size(); }
};

/// An opened, complete cache. open() refuses (StaleError) a directory without a manifest, with a
/// manifest of another format_version, or with missing/short array files.
class CacheReader {
 public:
  static CacheReader open(const std::string& dir);
  /// open() of a job's own unpublished copy (publish.hpp's OUT.tmp-ID-PID, which open() refuses), for
  /// the publisher that checks it before the rename (stage).
  static CacheReader open_own_copy(const std::string& dir);

  const std::string& dir() const noexcept { return dir_; }
  const nlohmann::json& manifest() const noexcept { return manifest_; }
  /// The manifest's seal ("manifest_xxh3", core/seal.hpp), checked by open(); "" for a cache decoded before seals.
  const std::string& manifest_seal() const noexcept { return manifest_seal_; }
  std::uint64_t n_samples() const;
  int n_bands() const;
  Layout layout() const;
  DType dtype() const;
  int patch() const;  ///< patch side p for layout patch/cube (cube: the patch size decode was told, 1 if none)
  std::string data_checksum() const;

  SampleTable read_sample_table() const;
  /// Wavelengths of the kept bands (wavelengths.npy or /wavelengths); empty when the scenes gave none.
  std::vector<double> wavelengths() const;

  std::string backend() const;  ///< "npy" or "h5"
  /// Scene dims in cache order (from the manifest).
  std::vector<SceneDims> scenes() const;
  /// Path of the h5 file (backend h5) or of the directory (npy).
  std::string h5_path() const { return dir_ + "/cache.h5"; }

 private:
  std::string dir_;
  nlohmann::json manifest_;
  std::string manifest_seal_;
};

/// A local source a manifest records, as it is now (remote sources are not looked at here: verify asks
/// their server).
struct SourceNow {
  enum class State { current, touched, missing, changed };
  std::string path;
  State state = State::current;
  std::string what;  ///< changed: what differs ("size 10, manifest says 12"); touched: what is the same
};
/// Each local source of `sources` (a manifest's list) against the file now: size and mtime. A file whose
/// mtime changed but not its size is hashed as decode hashed it (core/hash.hpp): the same content is
/// `touched` (e.g. copied with a new time), not `changed`. `deep`: every file is hashed. Rank-local.
std::vector<SourceNow> local_sources_now(const nlohmann::json& sources, bool deep);

/// For the commands that use a cache (folds, train): throws StaleError, naming the cache, the
/// source and what differs, when a local source changed since the decode (a stale cache is not used by
/// mistake; hsipipe decode rebuilds it). A missing source (a copy used where its scenes are not) and a
/// touched one are noted in `notes` when given. Rank-local: one rank of a collective step calls it (a
/// touched source is hashed by whoever calls it).
void require_current_sources(const CacheReader& cache, std::ostream* notes);

/// Recomputes data_checksum from the stored bytes (reads every array once, streaming). Rank-local;
/// used by `hsipipe verify` and `hsipipe stage`. Compare with CacheReader::data_checksum().
std::string compute_data_checksum(const CacheReader& cache);

/// data_checksum (see above) from the per-item XXH3-64 values, in item order, and the sample table whose
/// labels and coords the cache stores; the one definition decode and compute_data_checksum share.
std::string data_checksum_of(std::vector<std::uint64_t> item_hashes, const SampleTable& table);

/// Reads the stored elements of items [begin, end) (samples for pixel/patch; for cube, rows of scene
/// `scene`) as raw bytes in the cache dtype. Rank-local; used by verify and by Shard::load if it wants.
std::vector<char> read_items_raw(const CacheReader& cache, std::uint64_t begin, std::uint64_t end, int scene = -1);

/// Items [begin, end) as read_items_raw gives them, mapped from the cache file instead of read (core/mapped):
/// the bytes of item g are at file->data() + offset(g). npy files and contiguous HDF5 datasets are one run;
/// a chunked HDF5 dataset is one run per chunk (chunk_items items each, chunk c of the dataset at
/// chunk_offset[c - first_chunk]). Only unfiltered little-endian datasets can be mapped: anything else is a
/// ConfigError saying why. Rank-local.
struct MappedItems {
  std::shared_ptr<const MappedFile> file;
  std::uint64_t begin = 0, end = 0, item_bytes = 0;
  std::uint64_t chunk_items = 0;  ///< 0: one run, item `begin` at chunk_offset[0]
  std::uint64_t first_chunk = 0;
  std::vector<std::uint64_t> chunk_offset;
  std::uint64_t offset(std::uint64_t g) const {
    if (chunk_items == 0) return chunk_offset[0] + (g - begin) * item_bytes;
    return chunk_offset[g / chunk_items - first_chunk] + (g % chunk_items) * item_bytes;
  }
};
MappedItems map_items(const CacheReader& cache, std::uint64_t begin, std::uint64_t end, int scene = -1);

/// Decoded samples of ONE contiguous range of the cache, held in memory (or mapped), and the hot
/// path that turns them into float32 training inputs. For layout cube, holds only the cube rows its
/// samples need plus the patch halo.
/// numpy.pad's 'reflect' index (mirrors without repeating the edge: -1 -> 1, n -> n - 2), the rule of the
/// manifest's `border: "reflect"`.
int reflect_index(long i, long n);

class Shard {
 public:
  /// Reads samples [range.begin, range.end): pixel/patch rows of samples.npy (or /samples), or for
  /// cube the rows of each scene covering those samples +- p/2. Rank-local. A shard whose bytes exceed
  /// `memory_limit` is streamed instead: its arrays are mapped from the cache file (map_items), read once
  /// through the mapping for the checksum, and gather() then reads the pages its batches need (the
  /// loader's producer threads, ahead of the training loop, asking the kernel for a batch's pages first
  /// while they come from the disk: see gather() in shard_gather.cpp).
  /// The bytes gather() sees are the file's either way: the same batches, bit for bit.
  static Shard load(const CacheReader& cache, Range range, int patch_override = 0,
                    std::uint64_t memory_limit = std::numeric_limits<std::uint64_t>::max());

  Range range() const noexcept;
  /// Floats per sample produced by gather(): B (pixel), B*p*p (patch, cube).
  std::size_t sample_floats() const noexcept;
  int patch() const noexcept;  ///< 1 for pixel
  int bands() const noexcept;
  std::uint64_t bytes_read() const noexcept;
  bool streamed() const noexcept;
  /// The bytes of the shard's arrays (held in memory, or mapped when streamed).
  std::uint64_t shard_bytes() const noexcept;
  /// Streamed: the stored bytes gather() has read from the mapping so far (0 when held in memory).
  std::uint64_t streamed_bytes() const noexcept;
  /// XXH3-64 of the items of data_checksum this shard owns, computed by load() while they are in cache: pixel
  /// and patch layouts, each sample's stored bytes, in sample order; cube, the cube rows from its first
  /// sample's row to the next range's first sample's row (from the first row for range.begin 0, to the last
  /// for range.end N; rows without a sample near them, which the shard does not hold, are read for this).
  /// The ranks' lists concatenated in rank order are the whole cache's (split_range), so data_checksum_of()
  /// over them must give the manifest's.
  const std::vector<std::uint64_t>& item_hashes() const noexcept;
  double hash_seconds() const noexcept;  ///< what computing them took (part of load())

  /// Writes float32 samples for the given GLOBAL ids (each inside range()) to out, contiguous:
  /// [ids.size(), B] or [ids.size(), B, p, p]. Thread-safe (const). Augmentation is applied by the caller.
  void gather(const std::uint64_t* ids, std::size_t n, float* out) const;

  /// The bytes the shard holds, as stored (float16 or float32, little-endian), for a consumer that moves
  /// them elsewhere and cuts the same samples there (train's device-resident batches, which must give
  /// gather()'s values exactly). Pointers stay valid while the shard lives. A streamed shard whose arrays
  /// are not one run in the file (a chunked HDF5 cache) has no Raw: a ConfigError.
  struct Raw {
    Layout layout = Layout::pixel;
    bool f16 = false;
    int bands = 0;
    int stored_patch = 1;  ///< p of the stored samples (patch layout), 1 for pixel and cube
    int patch = 1;         ///< p of gather()'s output
    bool zero_border = false;
    const char* samples = nullptr;  ///< pixel/patch: [range.size(), B, sp, sp]
    struct SceneRows {
      std::uint32_t rows = 0, cols = 0;   ///< the scene's size
      std::uint32_t row0 = 0, nrows = 0;  ///< rows held (nrows 0: no sample of the shard in it)
      const char* data = nullptr;         ///< [nrows, cols, B]
    };
    std::vector<SceneRows> scenes;                           ///< cube
    const std::int32_t *scene = nullptr, *row = nullptr, *col = nullptr;  ///< cube: per local sample
  };
  Raw raw() const;

  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace hsipipe::cache

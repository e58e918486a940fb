#pragma once
// cache: the on-disk contract between phase one (decode) and everything after it (folds, train,
// verify, stage). A cache is a DIRECTORY, published by one atomic rename when complete:
//
//   PATH/manifest.json   always; written last before the rename. Keys other tools rely on:
//                        format_version, n_samples, n_bands, layout, dtype, data_checksum, sources,
//                        backend, patch, border, scenes [{name, rows, cols}], label_values.
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
//   dtype "float32" or "float16" (IEEE half, little-endian).
//
// Readers (everything here) are rank-local unless marked COLLECTIVE.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.hpp"
#include "core/range.hpp"

namespace hsipipe::cache {

inline constexpr int kFormatVersion = 1;

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

  const std::string& dir() const noexcept { return dir_; }
  const nlohmann::json& manifest() const noexcept { return manifest_; }
  std::uint64_t n_samples() const;
  int n_bands() const;
  Layout layout() const;
  DType dtype() const;
  int patch() const;  ///< patch side p for layout patch/cube (cube: the patch size decode was told, 1 if none)
  std::string data_checksum() const;

  SampleTable read_sample_table() const;

 private:
  std::string dir_;
  nlohmann::json manifest_;
};

/// Decoded samples of ONE contiguous range of the cache, held in memory (or mapped), and the hot
/// path that turns them into float32 training inputs. For layout cube, holds only the cube rows its
/// samples need plus the patch halo.
class Shard {
 public:
  /// Reads samples [range.begin, range.end): pixel/patch rows of samples.npy (or /samples), or for
  /// cube the rows of each scene covering those samples +- p/2. Rank-local.
  static Shard load(const CacheReader& cache, Range range, int patch_override = 0);

  Range range() const noexcept;
  /// Floats per sample produced by gather(): B (pixel), B*p*p (patch, cube).
  std::size_t sample_floats() const noexcept;
  int patch() const noexcept;  ///< 1 for pixel
  int bands() const noexcept;
  std::uint64_t bytes_read() const noexcept;

  /// Writes float32 samples for the given GLOBAL ids (each inside range()) to out, contiguous:
  /// [ids.size(), B] or [ids.size(), B, p, p]. Thread-safe (const). Augmentation is applied by the caller.
  void gather(const std::uint64_t* ids, std::size_t n, float* out) const;

  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace hsipipe::cache

#pragma once
// cache/preprocess: the per-pixel arithmetic of decode, shared by `decode` and `verify` so a
// re-decoded sample is bit-identical to the stored one. Everything here is rank-local and pure;
// the MPI merging lives in decode_passes.cpp and uses these pieces.
//
// Determinism across rank counts: statistics are accumulated per scene ROW (a row's partial is
// computed by exactly one rank, pixels left to right, Welford in float64) and the row partials are
// merged in global row order with Chan et al.'s pairwise formula on every rank. The PCA covariance is
// accumulated per row in float64, each row's matrix rounded once to 2^-40 fixed point in __int128 and
// summed exactly, so its value (and thus the eigenvectors) cannot depend on the rank count.
#include <cstdint>
#include <string>
#include <vector>

#include "core/big_alloc.hpp"
#include "core/dtype.hpp"

namespace hsipipe::cache {

__extension__ typedef __int128 i128;            // GCC/Clang extension, exact covariance sums
__extension__ typedef unsigned __int128 u128;

enum class Normalize { zscore, minmax, none };
enum class StatsOver { labeled, all_pixels };
enum class Border { reflect, zero };
std::string normalize_name(Normalize n);
Normalize normalize_from_name(const std::string& s);  ///< throws ConfigError naming --normalize
std::string stats_over_name(StatsOver s);
StatsOver stats_over_from_name(const std::string& s);  ///< throws ConfigError naming --stats-over
std::string border_name(Border b);
Border border_from_name(const std::string& s);  ///< throws ConfigError naming --border

/// "108-112,154-167,224" (1-based, inclusive) -> sorted 0-based band indices to DROP. Throws
/// ConfigError naming --drop-bands for syntax errors, reversed ranges and bands outside [1, nbands].
std::vector<int> parse_band_list(const std::string& text, int nbands);
/// The same list in one spelling: sorted, overlapping and adjacent ranges merged, "A-B" or "A" items
/// ("224,1-2,3" -> "1-3,224"; "" -> ""). What the manifest records, so that two spellings of one band set
/// are the same parameter. Syntax errors throw as parse_band_list does (bands are not checked against a
/// scene here).
std::string canonical_band_list(const std::string& text);
/// Kept 0-based band indices: all of [0, nbands) minus `drop`; ConfigError when nothing is left.
std::vector<int> kept_bands(const std::vector<int>& drop, int nbands);
/// `nbands` flags, 1 for the kept bands: what io::Scene::set_validity_bands takes, so that a pixel's validity
/// is decided by the bands the cache keeps (a dropped band of nodata or NaN costs no pixel).
std::vector<std::uint8_t> band_flags(const std::vector<int>& kept, std::size_t nbands);

/// Per-band running statistics in float64 (count is shared by all bands: a pixel contributes to all).
struct BandStats {
  std::uint64_t n = 0;
  std::vector<double> mean, m2, min, max;
  explicit BandStats(int bands = 0);
  int bands() const noexcept { return static_cast<int>(mean.size()); }
  /// Welford update with one pixel's kept-band values.
  void add(const float* v);
  /// Chan et al. pairwise merge: *this <- *this (+) o. Merging is exact in n and min/max; mean/M2 are
  /// numerically stable. Order matters for the last bits, so callers merge in a fixed order.
  void merge(const BandStats& o);
  std::vector<double> variance() const;  ///< population variance M2 / n (0 when n == 0)
  /// Flat form for MPI: [n, mean..., m2..., min..., max...].
  void pack(std::vector<double>& out) const;
  static BandStats unpack(const double* in, int bands);
};

/// Exact (order-independent) accumulator of a symmetric B x B matrix: each added matrix is rounded
/// once to multiples of 2^-40 and summed in __int128.
class FixedSym {
 public:
  explicit FixedSym(int b = 0);
  int size() const noexcept { return b_; }
  void add(const double* upper_rowmajor_full);  ///< full B x B row-major (only i <= j read)
  void add(const FixedSym& o);
  std::vector<std::uint64_t> pack() const;  ///< 2 words per upper entry, little-endian halves
  static FixedSym unpack(const std::uint64_t* in, int b);
  std::vector<double> to_double(double divide_by) const;  ///< full B x B row-major

 private:
  int b_ = 0;
  std::vector<i128> v_;  // upper triangle, row-major
};

/// The transform decode applies to a pixel: band selection, normalisation, PCA, in float64, result
/// rounded to float32. Built once from the merged statistics (or from a manifest by verify).
struct Preprocessor {
  std::vector<int> kept;             ///< source band indices kept, in order
  std::vector<double> shift, scale;  ///< per kept band: x' = (x - shift) / scale
  int pca_k = 0;                     ///< 0: no PCA
  std::vector<double> pca_mean;      ///< per kept band, subtracted from x' before projection
  std::vector<double> components;    ///< pca_k x kept.size(), row-major
  int out_bands() const noexcept { return pca_k > 0 ? pca_k : static_cast<int>(kept.size()); }
  /// `in`: the kept bands of one pixel (kept.size() floats, see select_bands); `out`: out_bands()
  /// floats. NaN in -> NaN out.
  void apply(const float* in, float* out) const;
};

/// Copies the kept bands of `n` pixels (src_bands each) to `out` (kept.size() each).
void select_bands(const float* in, std::size_t n, int src_bands, const std::vector<int>& kept, float* out);

/// Transformed rows of one scene held in memory: rows [row0, row0 + nrows), cols x bands floats.
struct RowWindow {
  std::size_t row0 = 0, nrows = 0, cols = 0, scene_rows = 0;
  int bands = 0;
  BigFloats data;  ///< large: mmap-backed, no zero fill (core/big_alloc.hpp)
  const float* pixel(std::size_t r, std::size_t c) const { return data.data() + ((r - row0) * cols + c) * bands; }
};

/// Cuts the p x p patch around (row, col) from `w` into out[b * p * p + dy * p + dx] (layout [B, p, p]).
/// Outside the scene: Border::reflect mirrors (numpy 'reflect'), Border::zero writes 0. The window must
/// hold every in-scene row of [row - p/2, row + p/2].
void cut_patch(const RowWindow& w, std::size_t row, std::size_t col, int p, Border border, float* out);

/// Converts n float32 values to the cache dtype (f32: copy; f16: IEEE half, round to nearest even).
void store_values(const float* in, std::size_t n, DType dt, void* out);

}  // namespace hsipipe::cache

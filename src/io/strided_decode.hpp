#pragma once
// io/strided_decode: the last step shared by the MATLAB and HDF5 readers (internal to io). A block of
// rows arrives in the reader's own storage type and axis order (column-major MATLAB, hwb/bhw/whb HDF5);
// this turns it into float32 BIP and applies the Scene contract for invalid pixels: a pixel whose value
// in ANY band equals the ignore value (compared in double, before the float32 rounding) or is NaN is
// written as NaN in ALL its bands; with `counts` (Scene::set_validity_bands), only the bands flagged non-zero
// decide. An integer source without an ignore value is never masked.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

namespace hsipipe::io::detail {

/// Element strides (not bytes) of the row, column and band axes in the source block.
struct Strides {
  std::ptrdiff_t row = 0, col = 0, band = 0;
};

/// Writes rows x cols x bands floats to `out` in BIP order from `src` laid out with strides `s`.
/// The loops run in the source's storage order (smallest source stride innermost) so the source is read
/// sequentially. Returns the number of pixels masked to NaN.
template <class T>
std::size_t gather_to_bip(const T* src, Strides s, std::size_t rows, std::size_t cols, std::size_t bands,
                          const std::optional<double>& ignore, const std::uint8_t* counts, float* out) {
  constexpr bool is_float = std::is_floating_point_v<T>;
  const bool masking = is_float || ignore.has_value();
  const std::size_t npix = rows * cols;
  std::vector<std::uint8_t> bad(masking ? npix : 0, 0);
  const double ig = ignore.value_or(0.0);

  // Axes: 0 = row, 1 = col, 2 = band. Order them by source stride, largest first.
  const std::array<std::size_t, 3> count{rows, cols, bands};
  const std::array<std::ptrdiff_t, 3> sstr{s.row, s.col, s.band};
  const std::array<std::ptrdiff_t, 3> dstr{static_cast<std::ptrdiff_t>(cols * bands),
                                           static_cast<std::ptrdiff_t>(bands), 1};
  std::array<int, 3> ax{0, 1, 2};
  std::sort(ax.begin(), ax.end(), [&](int a, int b) { return sstr[a] > sstr[b]; });
  const int a0 = ax[0], a1 = ax[1], a2 = ax[2];

  for (std::size_t i = 0; i < count[a0]; ++i) {
    for (std::size_t j = 0; j < count[a1]; ++j) {
      const T* sp = src + static_cast<std::ptrdiff_t>(i) * sstr[a0] + static_cast<std::ptrdiff_t>(j) * sstr[a1];
      float* dp = out + static_cast<std::ptrdiff_t>(i) * dstr[a0] + static_cast<std::ptrdiff_t>(j) * dstr[a1];
      const std::ptrdiff_t ss = sstr[a2], ds = dstr[a2];
      if (!masking) {
        for (std::size_t k = 0; k < count[a2]; ++k) dp[static_cast<std::ptrdiff_t>(k) * ds] = static_cast<float>(sp[static_cast<std::ptrdiff_t>(k) * ss]);
        continue;
      }
      for (std::size_t k = 0; k < count[a2]; ++k) {
        const T v = sp[static_cast<std::ptrdiff_t>(k) * ss];
        float* d = dp + static_cast<std::ptrdiff_t>(k) * ds;
        *d = static_cast<float>(v);
        bool invalid = false;
        if constexpr (is_float) invalid = !std::isfinite(*d);  // NaN or +-Inf (in float32)
        if (ignore && static_cast<double>(v) == ig) invalid = true;
        const auto at = static_cast<std::size_t>(d - out);
        if (invalid && (!counts || counts[at % bands])) bad[at / bands] = 1;
      }
    }
  }
  std::size_t nbad = 0;
  if (masking) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (std::size_t p = 0; p < npix; ++p) {
      if (!bad[p]) continue;
      std::fill(out + p * bands, out + (p + 1) * bands, nan);
      ++nbad;
    }
  }
  return nbad;
}

}  // namespace hsipipe::io::detail

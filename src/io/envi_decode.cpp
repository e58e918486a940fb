#include "io/envi_decode.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/error.hpp"
#include "core/simd.hpp"
#include "core/test_hook.hpp"

namespace hsipipe::io {

namespace {

template <class T>
struct Bits;
template <> struct Bits<std::uint8_t> { using U = std::uint8_t; };
template <> struct Bits<std::int16_t> { using U = std::uint16_t; };
template <> struct Bits<std::uint16_t> { using U = std::uint16_t; };
template <> struct Bits<std::int32_t> { using U = std::uint32_t; };
template <> struct Bits<std::uint32_t> { using U = std::uint32_t; };
template <> struct Bits<std::int64_t> { using U = std::uint64_t; };
template <> struct Bits<std::uint64_t> { using U = std::uint64_t; };
template <> struct Bits<float> { using U = std::uint32_t; };
template <> struct Bits<double> { using U = std::uint64_t; };

template <class U>
inline U bswap(U u) noexcept {
  if constexpr (sizeof(U) == 1) return u;
  else if constexpr (sizeof(U) == 2) return __builtin_bswap16(u);
  else if constexpr (sizeof(U) == 4) return __builtin_bswap32(u);
  else return __builtin_bswap64(u);
}

template <class T, bool Swap>
inline T load(const unsigned char* p) noexcept {
  using U = typename Bits<T>::U;
  U u;
  std::memcpy(&u, p, sizeof u);
  if constexpr (Swap) u = bswap(u);
  return std::bit_cast<T>(u);
}

template <class T, bool Swap>
inline void store(unsigned char* p, T v) noexcept {
  using U = typename Bits<T>::U;
  U u = std::bit_cast<U>(v);
  if constexpr (Swap) u = bswap(u);
  std::memcpy(p, &u, sizeof u);
}

/// Contiguous run of n samples -> n floats.
template <class T, bool Swap>
void convert_run(const unsigned char* __restrict src, std::size_t n, float* __restrict out) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(load<T, Swap>(src + i * sizeof(T)));
}

/// One row whose bands are runs along the columns (BIL, BSQ): transposes B x C -> C x B in tiles
/// small enough that both the source lines and the output lines of a tile stay in L1.
template <class T, bool Swap>
void transpose_row(const unsigned char* __restrict src, std::size_t band_stride, std::size_t C, std::size_t B,
                   float* __restrict out) noexcept {
  constexpr std::size_t TC = 16, TB = 16;
  alignas(64) float tile[TB][TC];
  for (std::size_t c0 = 0; c0 < C; c0 += TC) {
    const std::size_t nc = std::min(TC, C - c0);
    for (std::size_t b0 = 0; b0 < B; b0 += TB) {
      const std::size_t nb = std::min(TB, B - b0);
      if (nc == TC) {
        for (std::size_t b = 0; b < nb; ++b) {
          const unsigned char* p = src + (b0 + b) * band_stride + c0 * sizeof(T);
          for (std::size_t c = 0; c < TC; ++c) tile[b][c] = static_cast<float>(load<T, Swap>(p + c * sizeof(T)));
        }
      } else {
        for (std::size_t b = 0; b < nb; ++b) {
          const unsigned char* p = src + (b0 + b) * band_stride + c0 * sizeof(T);
          for (std::size_t c = 0; c < nc; ++c) tile[b][c] = static_cast<float>(load<T, Swap>(p + c * sizeof(T)));
        }
      }
      if (nb == TB) {
        for (std::size_t c = 0; c < nc; ++c) {
          float* o = out + (c0 + c) * B + b0;
          for (std::size_t b = 0; b < TB; ++b) o[b] = tile[b][c];
        }
      } else {
        for (std::size_t c = 0; c < nc; ++c) {
          float* o = out + (c0 + c) * B + b0;
          for (std::size_t b = 0; b < nb; ++b) o[b] = tile[b][c];
        }
      }
    }
  }
}

#if HSIPIPE_X86
// AVX2 kernels, chosen at run time (Decoder's constructor) on CPUs that have AVX2; the build stays portable.
// They give the same floats as the scalar code: integer -> float conversions round to nearest (the default
// MXCSR mode, as static_cast does), and float32 is moved bit for bit.
template <class T>
constexpr bool kSimd = std::is_same_v<T, std::int16_t> || std::is_same_v<T, std::uint16_t> ||
                       std::is_same_v<T, std::uint8_t> || std::is_same_v<T, std::int32_t> || std::is_same_v<T, float>;

/// 8 consecutive samples of type T at p (byte-swapped when Swap) as 8 floats.
template <class T, bool Swap>
__attribute__((target("avx2"), always_inline)) inline __m256 load8(const unsigned char* p) noexcept {
  if constexpr (sizeof(T) == 2) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if constexpr (Swap) v = _mm_shuffle_epi8(v, _mm_setr_epi8(1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14));
    const __m256i w = std::is_signed_v<T> ? _mm256_cvtepi16_epi32(v) : _mm256_cvtepu16_epi32(v);
    return _mm256_cvtepi32_ps(w);
  } else if constexpr (sizeof(T) == 1) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  } else {
    __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    if constexpr (Swap)
      v = _mm256_shuffle_epi8(v, _mm256_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12, 3, 2, 1, 0, 7, 6,
                                                  5, 4, 11, 10, 9, 8, 15, 14, 13, 12));
    if constexpr (std::is_same_v<T, float>) return _mm256_castsi256_ps(v);
    else return _mm256_cvtepi32_ps(v);
  }
}

/// transpose_row for AVX2: 8 columns x 16 (then 8) bands per step, converted and transposed in registers.
/// The band blocks are the outer loop: each step reads 16 band lines front to back (a few streams, so
/// power-of-two line lengths cause no L1 set conflicts) and writes whole 64-byte lines of 8 output pixels.
/// Tails: the last block of each axis is shifted back to end at C (or B), overlapping the one before and
/// writing the same values twice; scenes narrower than 8 columns or bands take the scalar kernel.
template <class T, bool Swap>
__attribute__((target("avx2"))) void transpose_row_avx2(const unsigned char* __restrict src, std::size_t band_stride,
                                                        std::size_t C, std::size_t B, float* __restrict out) noexcept {
  if (C < 8 || B < 8) return transpose_row<T, Swap>(src, band_stride, C, B, out);
  std::size_t b0 = 0;
  for (; b0 + 16 <= B; b0 += 16) {
    const unsigned char* p = src + b0 * band_stride;
    for (std::size_t cb = 0; cb < C; cb += 8) {
      const std::size_t c0 = std::min(cb, C - 8);
      __m256 lo[8], hi[8];
      for (std::size_t k = 0; k < 8; ++k) lo[k] = load8<T, Swap>(p + k * band_stride + c0 * sizeof(T));
      for (std::size_t k = 0; k < 8; ++k) hi[k] = load8<T, Swap>(p + (8 + k) * band_stride + c0 * sizeof(T));
      simd::transpose8(lo);
      simd::transpose8(hi);
      for (std::size_t k = 0; k < 8; ++k) {
        float* o = out + (c0 + k) * B + b0;
        _mm256_storeu_ps(o, lo[k]);
        _mm256_storeu_ps(o + 8, hi[k]);
      }
    }
  }
  for (std::size_t bb = b0; bb < B; bb += 8) {
    const std::size_t b = std::min(bb, B - 8);
    const unsigned char* p = src + b * band_stride;
    for (std::size_t cb = 0; cb < C; cb += 8) {
      const std::size_t c0 = std::min(cb, C - 8);
      __m256 r[8];
      for (std::size_t k = 0; k < 8; ++k) r[k] = load8<T, Swap>(p + k * band_stride + c0 * sizeof(T));
      simd::transpose8(r);
      for (std::size_t k = 0; k < 8; ++k) _mm256_storeu_ps(out + (c0 + k) * B + b, r[k]);
    }
  }
}

template <class T, bool Swap>
__attribute__((target("avx2"))) void convert_run_avx2(const unsigned char* __restrict src, std::size_t n,
                                                      float* __restrict out) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, load8<T, Swap>(src + i * sizeof(T)));
  for (; i < n; ++i) out[i] = static_cast<float>(load<T, Swap>(src + i * sizeof(T)));
}

#else
template <class T>
constexpr bool kSimd = false;
#endif

template <class T, bool Swap, bool Simd>
void decode(const unsigned char* src, const Strides& s, std::size_t nrows, std::size_t C, std::size_t B, float* out,
            const void* ignore, const std::uint8_t* counts) {
  constexpr std::size_t es = sizeof(T);
  const bool bip = s.band == es && s.col == B * es;
  const bool runs = s.col == es;  // BIL/BSQ
  std::vector<unsigned char> bad;
  if (ignore) bad.resize(C);
  for (std::size_t r = 0; r < nrows; ++r) {
    const unsigned char* row = src + r * s.row;
    float* o = out + r * C * B;
    if (bip) {
#if HSIPIPE_X86
      if constexpr (Simd) convert_run_avx2<T, Swap>(row, C * B, o);
      else
#endif
        convert_run<T, Swap>(row, C * B, o);
    } else if (runs) {
#if HSIPIPE_X86
      if constexpr (Simd) transpose_row_avx2<T, Swap>(row, s.band, C, B, o);
      else
#endif
        transpose_row<T, Swap>(row, s.band, C, B, o);
    } else {
      for (std::size_t c = 0; c < C; ++c)
        for (std::size_t b = 0; b < B; ++b) o[c * B + b] = static_cast<float>(load<T, Swap>(row + c * s.col + b * s.band));
    }
    if (ignore) {
      T ig;
      std::memcpy(&ig, ignore, sizeof ig);
      std::fill(bad.begin(), bad.end(), 0);
      if (runs) {
        for (std::size_t b = 0; b < B; ++b) {
          if (counts && !counts[b]) continue;  // a band that does not decide validity (Scene::set_validity_bands)
          const unsigned char* p = row + b * s.band;
          for (std::size_t c = 0; c < C; ++c) bad[c] |= load<T, Swap>(p + c * es) == ig;
        }
      } else {
        for (std::size_t c = 0; c < C; ++c) {
          unsigned char any = 0;
          for (std::size_t b = 0; b < B; ++b)
            any |= (!counts || counts[b]) && load<T, Swap>(row + c * s.col + b * s.band) == ig;
          bad[c] = any;
        }
      }
      for (std::size_t c = 0; c < C; ++c)
        if (bad[c]) std::fill(o + c * B, o + (c + 1) * B, std::numeric_limits<float>::quiet_NaN());
    }
    if constexpr (std::is_floating_point_v<T>) {
      for (std::size_t c = 0; c < C; ++c) {
        float* px = o + c * B;
        bool nan = false;
        if (!counts)
          for (std::size_t b = 0; b < B; ++b) nan |= !std::isfinite(px[b]);  // NaN, or +-Inf (also a float64 value beyond float32)
        else
          for (std::size_t b = 0; b < B; ++b) nan |= counts[b] && !std::isfinite(px[b]);
        if (nan) std::fill(px, px + B, std::numeric_limits<float>::quiet_NaN());
      }
    }
  }
}

/// The ignore value as T when T holds it exactly (float: rounded to float, as the file would store it).
template <class T>
bool exact_ignore(double v, unsigned char* out) {
  T t;
  if constexpr (std::is_floating_point_v<T>) {
    t = static_cast<T>(v);
  } else {
    if (!std::isfinite(v) || v != std::floor(v)) return false;
    // [min, max] of T as doubles; max + 1 is a power of two, so compare against it exclusively.
    const double lo = static_cast<double>(std::numeric_limits<T>::min());
    const double hi_excl = std::ldexp(1.0, std::numeric_limits<T>::digits);
    if (v < lo || v >= hi_excl) return false;
    t = static_cast<T>(v);
  }
  std::memcpy(out, &t, sizeof t);
  return true;
}

template <class T>
Decoder::Fn pick(std::endian order) {
#if HSIPIPE_X86
  if constexpr (kSimd<T>) {
    // Tests force the scalar kernels with HSIPIPE_TEST_NO_SIMD=1 (and compare both against SPy).
    if (simd::have_avx2() && !test_switch("HSIPIPE_TEST_NO_SIMD").value_or(false))
      return order == std::endian::native ? &decode<T, false, true> : &decode<T, true, true>;
  }
#endif
  return order == std::endian::native ? &decode<T, false, false> : &decode<T, true, false>;
}

template <class T, bool Swap>
void encode(const float* in, std::size_t n, unsigned char* out) {
  for (std::size_t i = 0; i < n; ++i) {
    T v;
    if constexpr (std::is_floating_point_v<T>) {
      v = static_cast<T>(in[i]);
    } else {
      const double x = std::nearbyint(static_cast<double>(in[i]));
      const double lo = static_cast<double>(std::numeric_limits<T>::min());
      const double hi_excl = std::ldexp(1.0, std::numeric_limits<T>::digits);
      if (std::isnan(x)) v = 0;
      else if (x <= lo) v = std::numeric_limits<T>::min();
      else if (x >= hi_excl) v = std::numeric_limits<T>::max();
      else v = static_cast<T>(x);
    }
    store<T, Swap>(out + i * sizeof(T), v);
  }
}

template <class T>
void encode_as(const float* in, std::size_t n, std::endian order, unsigned char* out) {
  if (order == std::endian::native) encode<T, false>(in, n, out);
  else encode<T, true>(in, n, out);
}

}  // namespace

Decoder::Decoder(DType type, std::endian order, std::optional<double> ignore) {
  switch (type) {
    case DType::u8: fn_ = pick<std::uint8_t>(order); if (ignore) has_ignore_ = exact_ignore<std::uint8_t>(*ignore, ignore_); break;
    case DType::i16: fn_ = pick<std::int16_t>(order); if (ignore) has_ignore_ = exact_ignore<std::int16_t>(*ignore, ignore_); break;
    case DType::u16: fn_ = pick<std::uint16_t>(order); if (ignore) has_ignore_ = exact_ignore<std::uint16_t>(*ignore, ignore_); break;
    case DType::i32: fn_ = pick<std::int32_t>(order); if (ignore) has_ignore_ = exact_ignore<std::int32_t>(*ignore, ignore_); break;
    case DType::u32: fn_ = pick<std::uint32_t>(order); if (ignore) has_ignore_ = exact_ignore<std::uint32_t>(*ignore, ignore_); break;
    case DType::i64: fn_ = pick<std::int64_t>(order); if (ignore) has_ignore_ = exact_ignore<std::int64_t>(*ignore, ignore_); break;
    case DType::u64: fn_ = pick<std::uint64_t>(order); if (ignore) has_ignore_ = exact_ignore<std::uint64_t>(*ignore, ignore_); break;
    case DType::f32: fn_ = pick<float>(order); if (ignore) has_ignore_ = exact_ignore<float>(*ignore, ignore_); break;
    case DType::f64: fn_ = pick<double>(order); if (ignore) has_ignore_ = exact_ignore<double>(*ignore, ignore_); break;
    case DType::f16: throw Error("ENVI has no float16 data type");
  }
}

void Decoder::operator()(const unsigned char* src, const Strides& s, std::size_t nrows, std::size_t C, std::size_t B,
                         float* out, const std::uint8_t* counts) const {
  fn_(src, s, nrows, C, B, out, has_ignore_ ? ignore_ : nullptr, counts);
}

void encode_samples(const float* in, std::size_t n, DType t, std::endian order, unsigned char* out) {
  switch (t) {
    case DType::u8: encode_as<std::uint8_t>(in, n, order, out); break;
    case DType::i16: encode_as<std::int16_t>(in, n, order, out); break;
    case DType::u16: encode_as<std::uint16_t>(in, n, order, out); break;
    case DType::i32: encode_as<std::int32_t>(in, n, order, out); break;
    case DType::u32: encode_as<std::uint32_t>(in, n, order, out); break;
    case DType::i64: encode_as<std::int64_t>(in, n, order, out); break;
    case DType::u64: encode_as<std::uint64_t>(in, n, order, out); break;
    case DType::f32: encode_as<float>(in, n, order, out); break;
    case DType::f64: encode_as<double>(in, n, order, out); break;
    case DType::f16: throw Error("ENVI has no float16 data type");
  }
}

}  // namespace hsipipe::io

#include "core/half.hpp"

#include "core/simd.hpp"

namespace hsipipe {

namespace {

bool floats_to_halves_scalar(const float* in, std::uint16_t* out, std::size_t n) noexcept {
  bool finite = true;
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = float_to_half(in[i]);
    finite &= (out[i] & 0x7c00u) != 0x7c00u;
  }
  return finite;
}

void halves_to_floats_scalar(const std::uint16_t* in, float* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = half_to_float(in[i]);
}

#if HSIPIPE_X86
// F16C (vcvtps2ph with round-to-nearest-even, vcvtph2ps) gives the same bits as the scalar code above for
// every input the scalar code is specified for: finite values, subnormal results, overflow to Inf, and NaN
// (both keep the sign and the top 10 payload bits and set the quiet bit). The one difference: a signalling
// half NaN widens to a quiet float NaN here and stays signalling in the scalar code; caches never hold one.
__attribute__((target("avx,f16c"))) bool floats_to_halves_f16c(const float* in, std::uint16_t* out,
                                                              std::size_t n) noexcept {
  std::size_t i = 0;
  // lanes that met |v| >= 65520 (round to nearest even gives Inf from there) or a NaN: "not less than,
  // unordered" is true for both
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), limit = _mm256_set1_ps(65520.0f);
  __m256 bad = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(in + i);
    bad = _mm256_or_ps(bad, _mm256_cmp_ps(_mm256_and_ps(v, abs_mask), limit, _CMP_NLT_UQ));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  bool finite = _mm256_movemask_ps(bad) == 0;
  for (; i < n; ++i) {
    out[i] = float_to_half(in[i]);
    finite &= (out[i] & 0x7c00u) != 0x7c00u;
  }
  return finite;
}

__attribute__((target("avx,f16c"))) void halves_to_floats_f16c(const std::uint16_t* in, float* out,
                                                              std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) out[i] = half_to_float(in[i]);
}

#endif

}  // namespace

bool floats_to_halves(const float* in, std::uint16_t* out, std::size_t n) noexcept {
#if HSIPIPE_X86
  if (simd::have_f16c()) return floats_to_halves_f16c(in, out, n);
#endif
  return floats_to_halves_scalar(in, out, n);
}

void halves_to_floats(const std::uint16_t* in, float* out, std::size_t n) noexcept {
#if HSIPIPE_X86
  if (simd::have_f16c()) return halves_to_floats_f16c(in, out, n);
#endif
  halves_to_floats_scalar(in, out, n);
}

}  // namespace hsipipe

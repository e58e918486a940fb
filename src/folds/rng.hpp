#pragma once
// folds/rng: the portable generator folds are built from, specified to the bit in docs/FOLDS.md.
// SplitMix64 (Steele, Lea, Flood 2014) and Lemire's unbiased bounded integers with rejection.
// Never std:: distributions or std::shuffle: their output differs between standard libraries.
// Plain unsigned 64-bit arithmetic (wrapping mod 2^64); the 64x64->128 product is computed from
// 32-bit halves where the compiler has no 128-bit integer, with identical results.
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

namespace hsipipe::folds {

/// Full 128-bit product of two 64-bit values from 32-bit halves: {high 64 bits, low 64 bits}.
constexpr std::pair<std::uint64_t, std::uint64_t> mul_64x64_portable(std::uint64_t a, std::uint64_t b) noexcept {
  const std::uint64_t a_lo = a & 0xffffffffULL, a_hi = a >> 32, b_lo = b & 0xffffffffULL, b_hi = b >> 32;
  const std::uint64_t ll = a_lo * b_lo, lh = a_lo * b_hi, hl = a_hi * b_lo, hh = a_hi * b_hi;
  const std::uint64_t mid = (ll >> 32) + (lh & 0xffffffffULL) + (hl & 0xffffffffULL);
  return {hh + (lh >> 32) + (hl >> 32) + (mid >> 32), (mid << 32) | (ll & 0xffffffffULL)};
}

/// Full 128-bit product: the compiler's 128-bit integer where it has one, else mul_64x64_portable.
inline std::pair<std::uint64_t, std::uint64_t> mul_64x64(std::uint64_t a, std::uint64_t b) noexcept {
#if defined(__SIZEOF_INT128__)
  __extension__ typedef unsigned __int128 u128;
  const u128 m = static_cast<u128>(a) * b;
  return {static_cast<std::uint64_t>(m >> 64), static_cast<std::uint64_t>(m)};
#else
  return mul_64x64_portable(a, b);
#endif
}

class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) noexcept : state_(seed) {}
  std::uint64_t next() noexcept {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  /// Uniform integer in [0, bound), bound >= 1, without modulo bias (Lemire 2019, 64x64->128 multiply):
  /// m = x * bound; if low64(m) < (2^64 - bound) mod bound, draw again; result high64(m).
  std::uint64_t bounded(std::uint64_t bound) noexcept {
    auto [hi, lo] = mul_64x64(next(), bound);
    if (lo < bound) {
      const std::uint64_t threshold = (0 - bound) % bound;
      while (lo < threshold) {
        std::tie(hi, lo) = mul_64x64(next(), bound);
      }
    }
    return hi;
  }

 private:
  std::uint64_t state_;
};

/// Fisher-Yates, from the last element down: for i = n-1 .. 1, j = bounded(i + 1), swap(v[i], v[j]).
template <class T>
void shuffle(std::vector<T>& v, SplitMix64& rng) noexcept {
  for (std::size_t i = v.size(); i > 1; --i) {
    const std::size_t j = static_cast<std::size_t>(rng.bounded(i));
    std::swap(v[i - 1], v[j]);
  }
}

/// Derives an independent stream seed from (seed, a, b): the first output of
/// SplitMix64(seed ^ (a * 0xd1b54a32d192ed03) ^ (b * 0x8cb92ba72f3d8dd7)), products mod 2^64.
inline std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t a, std::uint64_t b = 0) noexcept {
  SplitMix64 g(seed ^ (a * 0xd1b54a32d192ed03ULL) ^ (b * 0x8cb92ba72f3d8dd7ULL));
  return g.next();
}

}  // namespace hsipipe::folds

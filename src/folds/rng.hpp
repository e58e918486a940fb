#pragma once
// folds/rng: the portable generator folds are built from, specified to the bit in docs/FOLDS.md.
// SplitMix64 (Steele, Lea, Flood 2014) and Lemire's unbiased bounded integers with rejection.
// Never std:: distributions or std::shuffle: their output differs between standard libraries.
#include <cstdint>
#include <vector>

namespace hsipipe::folds {

__extension__ typedef unsigned __int128 uint128_t;

class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) noexcept : state_(seed) {}
  std::uint64_t next() noexcept {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  /// Uniform integer in [0, bound), bound >= 1, without modulo bias (Lemire 2019, 64x64->128 multiply).
  std::uint64_t bounded(std::uint64_t bound) noexcept {
    uint128_t m = static_cast<uint128_t>(next()) * bound;
    auto low = static_cast<std::uint64_t>(m);
    if (low < bound) {
      const std::uint64_t threshold = (0 - bound) % bound;
      while (low < threshold) {
        m = static_cast<uint128_t>(next()) * bound;
        low = static_cast<std::uint64_t>(m);
      }
    }
    return static_cast<std::uint64_t>(m >> 64);
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

/// Derives an independent stream seed from (seed, tag...) by chaining SplitMix64 steps.
inline std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t a, std::uint64_t b = 0) noexcept {
  SplitMix64 g(seed ^ (a * 0xd1b54a32d192ed03ULL) ^ (b * 0x8cb92ba72f3d8dd7ULL));
  return g.next();
}

}  // namespace hsipipe::folds

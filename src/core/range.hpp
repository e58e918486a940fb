#pragma once
// core/range: the one rule that splits N samples over R ranks. Contiguous, sizes differ by at most
// one, the first (N mod R) ranks get the extra sample. Phase one and phase two both use it, so a
// rank's decode range and its training shard are the same samples.
#include <cstdint>
#include <stdexcept>

namespace hsipipe {

struct Range {
  std::uint64_t begin = 0, end = 0;
  std::uint64_t size() const noexcept { return end - begin; }
  bool contains(std::uint64_t i) const noexcept { return i >= begin && i < end; }
  friend bool operator==(const Range&, const Range&) = default;
};

inline Range split_range(std::uint64_t n, int nranks, int rank) {
  if (nranks <= 0 || rank < 0 || rank >= nranks) throw std::invalid_argument("split_range: bad rank/nranks");
  const std::uint64_t r = static_cast<std::uint64_t>(nranks), k = static_cast<std::uint64_t>(rank);
  const std::uint64_t base = n / r, extra = n % r;
  const std::uint64_t begin = k * base + (k < extra ? k : extra);
  return {begin, begin + base + (k < extra ? 1 : 0)};
}

}  // namespace hsipipe

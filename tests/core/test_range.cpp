#include <catch2/catch.hpp>

#include "core/range.hpp"

using hsipipe::split_range;

TEST_CASE("split_range covers [0, N) contiguously with sizes differing by at most one") {
  for (std::uint64_t n : {0ull, 1ull, 2ull, 7ull, 10ull, 1001ull}) {
    for (int r = 1; r <= 7; ++r) {
      std::uint64_t expect_begin = 0, mn = ~0ull, mx = 0;
      for (int k = 0; k < r; ++k) {
        const auto rg = split_range(n, r, k);
        REQUIRE(rg.begin == expect_begin);
        expect_begin = rg.end;
        mn = std::min(mn, rg.size());
        mx = std::max(mx, rg.size());
      }
      REQUIRE(expect_begin == n);
      REQUIRE(mx - mn <= 1);
    }
  }
  REQUIRE_THROWS(split_range(10, 0, 0));
  REQUIRE_THROWS(split_range(10, 2, 2));
}

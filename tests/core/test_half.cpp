#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "core/half.hpp"

using hsipipe::float_to_half;
using hsipipe::half_to_float;

TEST_CASE("half round trip is exact for every finite half value") {
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const auto hh = static_cast<std::uint16_t>(h);
    const float f = half_to_float(hh);
    if (std::isnan(f)) {
      REQUIRE(std::isnan(half_to_float(float_to_half(f))));
      continue;
    }
    REQUIRE(float_to_half(f) == hh);
  }
}

TEST_CASE("float to half rounds to nearest even and saturates to infinity") {
  REQUIRE(float_to_half(1.0f) == 0x3c00);
  REQUIRE(float_to_half(-2.0f) == 0xc000);
  REQUIRE(float_to_half(65504.0f) == 0x7bff);
  REQUIRE(float_to_half(65520.0f) == 0x7c00);           // halfway to 2^16: rounds to even = inf
  REQUIRE(float_to_half(1.0f + 1.0f / 2048) == 0x3c00);  // tie, even mantissa stays
  REQUIRE(float_to_half(1.0f + 3.0f / 2048) == 0x3c02);  // tie, odd mantissa rounds up
  REQUIRE(float_to_half(std::ldexp(1.0f, -24)) == 0x0001);
  REQUIRE(float_to_half(std::ldexp(1.0f, -25)) == 0x0000);
  REQUIRE(float_to_half(std::numeric_limits<float>::infinity()) == 0x7c00);
  REQUIRE(std::isnan(half_to_float(float_to_half(std::numeric_limits<float>::quiet_NaN()))));
}

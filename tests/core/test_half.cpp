#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

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

TEST_CASE("batch conversions (F16C where the CPU has it) equal the scalar reference bit for bit") {
  // Every 4093rd float bit pattern (a prime step near 2^12; about a million values: both signs, every exponent, zeros, subnormals,
  // rounding ties, overflow, Inf, NaN payloads), with a length that exercises the 8-wide loop and its tail.
  std::vector<float> in;
  for (std::uint64_t x = 0; x <= 0xffffffffull; x += 4093) in.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(x)));
  for (std::uint32_t x : {0x477ff000u, 0x477fefffu, 0x33000000u, 0x33000001u, 0x38800000u, 0x387fffffu, 0x7f800000u,
                          0xff800000u, 0x7fc00001u, 0x7f800001u, 0x80000000u})
    in.push_back(std::bit_cast<float>(x));
  std::vector<std::uint16_t> h(in.size());
  CHECK(!hsipipe::floats_to_halves(in.data(), h.data(), in.size()));  // the set holds Inf and NaN
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < in.size(); ++i) mismatches += h[i] != float_to_half(in[i]);
  REQUIRE(mismatches == 0);
  // false exactly when a result is Inf or NaN: 65519.99 rounds to 65504, 65520 to Inf; in the 8-wide loop
  // and in its tail
  for (const std::size_t n : {std::size_t{3}, std::size_t{17}}) {
    for (const std::size_t at : {std::size_t{0}, n - 1}) {
      std::vector<float> v(n, 1.0f);
      std::vector<std::uint16_t> o(n);
      v[at] = -65519.99f;
      CHECK(hsipipe::floats_to_halves(v.data(), o.data(), n));
      v[at] = 65520.0f;
      CHECK(!hsipipe::floats_to_halves(v.data(), o.data(), n));
      v[at] = std::numeric_limits<float>::quiet_NaN();
      CHECK(!hsipipe::floats_to_halves(v.data(), o.data(), n));
    }
  }

  // Every half value except signalling NaNs (exponent 31, mantissa non-zero, quiet bit 0x200 clear).
  std::vector<std::uint16_t> all;
  for (std::uint32_t v = 0; v < 0x10000u; ++v) {
    const bool snan = (v & 0x7c00u) == 0x7c00u && (v & 0x3ffu) != 0 && (v & 0x200u) == 0;
    if (!snan) all.push_back(static_cast<std::uint16_t>(v));
  }
  all.push_back(0x3c00);  // odd length: the tail loop
  std::vector<float> f(all.size());
  hsipipe::halves_to_floats(all.data(), f.data(), all.size());
  mismatches = 0;
  for (std::size_t i = 0; i < all.size(); ++i)
    mismatches += std::bit_cast<std::uint32_t>(f[i]) != std::bit_cast<std::uint32_t>(half_to_float(all[i]));
  REQUIRE(mismatches == 0);
}

#pragma once
// core/half: IEEE 754 binary16 <-> binary32, round-to-nearest-even, bit exact with numpy's float16.
// Plain bit manipulation so results do not depend on the CPU (F16C) or the compiler (_Float16).
#include <bit>
#include <cstddef>
#include <cstdint>

namespace hsipipe {

inline std::uint16_t float_to_half(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) {  // Inf or NaN: keep NaN quiet and non-zero
    return static_cast<std::uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x0200u | ((absx >> 13) & 0x3ffu) : 0u));
  }
  if (absx >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: Inf
  if (absx < 0x38800000u) {  // result is subnormal (or zero) in half
    if (absx < 0x33000000u) return static_cast<std::uint16_t>(sign);  // < 2^-25 rounds to 0
    const std::uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(absx >> 23);  // 14 + (113 - exp) ... in [14, 24]
    const std::uint32_t shifted = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1u);
    const std::uint32_t halfway = 1u << (shift - 1);
    std::uint32_t h = shifted;
    if (rem > halfway || (rem == halfway && (h & 1u))) ++h;
    return static_cast<std::uint16_t>(sign | h);
  }
  // normal: rebias exponent 127 -> 15, round mantissa 23 -> 10 bits to nearest even
  std::uint32_t h = ((absx - 0x38000000u) >> 13);
  const std::uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<std::uint16_t>(sign | h);
}

inline float half_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  const std::uint32_t mant = h & 0x3ffu;
  std::uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {  // subnormal: normalise
      int e = -1;
      std::uint32_t m = mant;
      do { m <<= 1; ++e; } while ((m & 0x400u) == 0);
      x = sign | (static_cast<std::uint32_t>(127 - 15 - e) << 23) | ((m & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(x);
}

/// Converts n floats; false when a result is Inf or NaN (a value from 65520 on in magnitude, Inf, NaN).
bool floats_to_halves(const float* in, std::uint16_t* out, std::size_t n) noexcept;
void halves_to_floats(const std::uint16_t* in, float* out, std::size_t n) noexcept;

}  // namespace hsipipe

#include "core/half.hpp"

namespace hsipipe {

void floats_to_halves(const float* in, std::uint16_t* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = float_to_half(in[i]);
}

void halves_to_floats(const std::uint16_t* in, float* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = half_to_float(in[i]);
}

}  // namespace hsipipe

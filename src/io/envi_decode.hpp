#pragma once
// io/envi_decode: the hot loop of every ENVI read. Converts raw samples of any ENVI element type and
// byte order, laid out with arbitrary (row, column, band) byte strides, into float32 BIP, and applies
// the invalid-pixel rule of Scene::ignore_value(). Internal to io (the ENVI reader and writer).
#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "core/dtype.hpp"

namespace hsipipe::io {

/// Byte distance between neighbouring rows, columns and bands of the source. BIP: {C*B*s, B*s, s};
/// BIL: {B*C*s, s, C*s}; BSQ: {C*s, s, L*C*s}.
struct Strides {
  std::size_t row = 0, col = 0, band = 0;
};

/// Decodes `nrows` rows starting at `src` (the first byte of (row 0, col 0, band 0)) into
/// out[(r * C + c) * B + b]. A pixel with any band equal to the ignore value (compared exactly in
/// the source type; a value the type cannot hold never matches) or, for float sources, any NaN band,
/// gets NaN in all its bands; with `counts` (B flags, Scene::set_validity_bands), only the bands flagged
/// non-zero decide. Stateless and thread-safe.
class Decoder {
 public:
  Decoder() = default;
  Decoder(DType type, std::endian order, std::optional<double> ignore);
  void operator()(const unsigned char* src, const Strides& s, std::size_t nrows, std::size_t C, std::size_t B,
                  float* out, const std::uint8_t* counts = nullptr) const;

  using Fn = void (*)(const unsigned char*, const Strides&, std::size_t, std::size_t, std::size_t, float*, const void*,
                      const std::uint8_t*);

 private:
  Fn fn_ = nullptr;
  bool has_ignore_ = false;
  alignas(8) unsigned char ignore_[8] = {};  ///< the ignore value as the source type (host order)
};

/// Converts n floats to element type `t` in byte order `order` (integers: nearest, ties to even,
/// clamped to the type's range, NaN -> 0). The inverse of decoding for values the type holds.
void encode_samples(const float* in, std::size_t n, DType t, std::endian order, unsigned char* out);

}  // namespace hsipipe::io

#pragma once
// io/sample_kind: the element types source rasters store (GDAL and HDF5 inputs): a superset of DType,
// since GeoTIFF and HDF5 also store int8 (and HDF5 float16). Readers map their library's type to a
// SampleKind once, then decode through with_sample_type().
#include <cstdint>

#include "core/dtype.hpp"

namespace hsipipe::io {

enum class SampleKind { i8, u8, i16, u16, i32, u32, i64, u64, f16, f32, f64 };

/// What Scene::source_type() reports: int8 as int16 (hsipipe has no int8 DType; int16 holds it exactly).
inline DType sample_kind_dtype(SampleKind k) {
  switch (k) {
    case SampleKind::i8: return DType::i16;
    case SampleKind::u8: return DType::u8;
    case SampleKind::i16: return DType::i16;
    case SampleKind::u16: return DType::u16;
    case SampleKind::i32: return DType::i32;
    case SampleKind::u32: return DType::u32;
    case SampleKind::i64: return DType::i64;
    case SampleKind::u64: return DType::u64;
    case SampleKind::f16: return DType::f16;
    case SampleKind::f32: return DType::f32;
    case SampleKind::f64: return DType::f64;
  }
  return DType::f64;
}

/// Calls f(T{}) with the in-memory type a kind is read as (float16 is read as float).
template <class F>
void with_sample_type(SampleKind k, F&& f) {
  switch (k) {
    case SampleKind::i8: return f(std::int8_t{});
    case SampleKind::u8: return f(std::uint8_t{});
    case SampleKind::i16: return f(std::int16_t{});
    case SampleKind::u16: return f(std::uint16_t{});
    case SampleKind::i32: return f(std::int32_t{});
    case SampleKind::u32: return f(std::uint32_t{});
    case SampleKind::i64: return f(std::int64_t{});
    case SampleKind::u64: return f(std::uint64_t{});
    case SampleKind::f16: case SampleKind::f32: return f(float{});
    case SampleKind::f64: return f(double{});
  }
}

}  // namespace hsipipe::io

#include "core/dtype.hpp"

namespace hsipipe {

std::size_t dtype_size(DType t) noexcept {
  switch (t) {
    case DType::u8: return 1;
    case DType::i16: case DType::u16: case DType::f16: return 2;
    case DType::i32: case DType::u32: case DType::f32: return 4;
    case DType::i64: case DType::u64: case DType::f64: return 8;
  }
  return 0;
}

std::string_view dtype_name(DType t) noexcept {
  switch (t) {
    case DType::u8: return "uint8";
    case DType::i16: return "int16";
    case DType::u16: return "uint16";
    case DType::i32: return "int32";
    case DType::u32: return "uint32";
    case DType::i64: return "int64";
    case DType::u64: return "uint64";
    case DType::f16: return "float16";
    case DType::f32: return "float32";
    case DType::f64: return "float64";
  }
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view n) {
  for (DType t : {DType::u8, DType::i16, DType::u16, DType::i32, DType::u32, DType::i64, DType::u64,
                  DType::f16, DType::f32, DType::f64})
    if (dtype_name(t) == n) return t;
  return std::nullopt;
}

std::optional<DType> dtype_from_envi(int code) noexcept {
  switch (code) {
    case 1: return DType::u8;
    case 2: return DType::i16;
    case 3: return DType::i32;
    case 4: return DType::f32;
    case 5: return DType::f64;
    case 12: return DType::u16;
    case 13: return DType::u32;
    case 14: return DType::i64;
    case 15: return DType::u64;
    default: return std::nullopt;
  }
}

int dtype_to_envi(DType t) noexcept {
  switch (t) {
    case DType::u8: return 1;
    case DType::i16: return 2;
    case DType::i32: return 3;
    case DType::f32: return 4;
    case DType::f64: return 5;
    case DType::u16: return 12;
    case DType::u32: return 13;
    case DType::i64: return 14;
    case DType::u64: return 15;
    case DType::f16: return 0;
  }
  return 0;
}

std::string dtype_numpy_descr(DType t) {
  switch (t) {
    case DType::u8: return "|u1";
    case DType::i16: return "<i2";
    case DType::u16: return "<u2";
    case DType::i32: return "<i4";
    case DType::u32: return "<u4";
    case DType::i64: return "<i8";
    case DType::u64: return "<u8";
    case DType::f16: return "<f2";
    case DType::f32: return "<f4";
    case DType::f64: return "<f8";
  }
  return "?";
}

}  // namespace hsipipe

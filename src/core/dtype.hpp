#pragma once
// core/dtype: the element types hsipipe reads and writes, with their ENVI codes and sizes.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace hsipipe {

enum class DType : std::uint8_t { u8, i16, u16, i32, u32, i64, u64, f16, f32, f64 };

std::size_t dtype_size(DType t) noexcept;
std::string_view dtype_name(DType t) noexcept;               ///< "uint8", "int16", ... "float32"
std::optional<DType> dtype_from_name(std::string_view name);  ///< inverse of dtype_name
/// ENVI `data type` code -> DType; complex (6, 9) and unknown codes return nullopt.
std::optional<DType> dtype_from_envi(int code) noexcept;
int dtype_to_envi(DType t) noexcept;  ///< 0 for types ENVI has no code for (f16)
/// NumPy dtype string for .npy headers, little-endian: "<f4", "<i2", "|u1", "<f2".
std::string dtype_numpy_descr(DType t);

/// True on little-endian hosts (all we build for; checked at compile time where it matters).
constexpr bool host_is_little_endian() noexcept {
  return std::endian::native == std::endian::little;
}

}  // namespace hsipipe

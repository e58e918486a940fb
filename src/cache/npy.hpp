#pragma once
// cache/npy: NumPy .npy format version 1.0 headers (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html).
// Headers are padded so the data starts at a multiple of 64 bytes; the data is C-order little-endian,
// so np.load(path, mmap_mode='r') maps it directly.
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.hpp"

namespace hsipipe::cache {

struct NpyHeader {
  DType dtype = DType::f32;
  std::vector<std::uint64_t> shape;
  std::uint64_t data_offset = 0;  ///< bytes before the first element
  std::uint64_t count() const;    ///< product of shape
  std::uint64_t data_bytes() const { return count() * dtype_size(dtype); }
};

/// The full header bytes (magic, version, length, dict, padding) for a C-order array.
std::string npy_header_bytes(DType dtype, const std::vector<std::uint64_t>& shape);
/// Parses the header of an existing .npy file; throws FormatError naming the file and field
/// (magic, version, descr, fortran_order, shape) and StaleError when the file is shorter than it claims.
NpyHeader read_npy_header(const std::string& path);

/// A whole small array's file bytes: header + data (C order).
std::string npy_file_bytes(DType dtype, const std::vector<std::uint64_t>& shape, const void* data);
/// Writes a whole small array (npy_file_bytes()) atomically (temp + rename). Rank-local.
void write_npy(const std::string& path, DType dtype, const std::vector<std::uint64_t>& shape, const void* data);
/// Reads a whole small array, checking its dtype; returns the raw bytes.
std::vector<char> read_npy(const std::string& path, DType expect, NpyHeader* header = nullptr);

}  // namespace hsipipe::cache

#include "cache/npy.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <regex>

#include "core/error.hpp"
#include "core/fs.hpp"

namespace hsipipe::cache {

std::uint64_t NpyHeader::count() const {
  std::uint64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::string npy_header_bytes(DType dtype, const std::vector<std::uint64_t>& shape) {
  std::string dict = "{'descr': '" + dtype_numpy_descr(dtype) + "', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    dict += std::to_string(shape[i]);
    if (shape.size() == 1 || i + 1 < shape.size()) dict += ",";
    if (i + 1 < shape.size()) dict += " ";
  }
  dict += "), }";
  const std::size_t pre = 10;  // magic(6) + version(2) + header_len(2)
  std::size_t total = pre + dict.size() + 1;
  total = (total + 63) / 64 * 64;
  dict.append(total - pre - dict.size() - 1, ' ');
  dict.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  const auto len = static_cast<std::uint16_t>(dict.size());
  out.push_back(static_cast<char>(len & 0xff));
  out.push_back(static_cast<char>(len >> 8));
  out += dict;
  return out;
}

NpyHeader read_npy_header(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path, "open", errno ? errno : ENOENT);
  char pre[10];
  if (!in.read(pre, 10) || std::memcmp(pre, "\x93NUMPY", 6) != 0) throw FormatError(path, "magic", "not a .npy file");
  const int major = static_cast<unsigned char>(pre[6]);
  std::uint64_t hlen = 0, hstart = 10;
  if (major == 1) {
    hlen = static_cast<unsigned char>(pre[8]) | (static_cast<unsigned>(static_cast<unsigned char>(pre[9])) << 8);
  } else if (major == 2 || major == 3) {
    char more[2];
    if (!in.read(more, 2)) throw FormatError(path, "header_len", "truncated");
    hlen = static_cast<unsigned char>(pre[8]) | (static_cast<std::uint64_t>(static_cast<unsigned char>(pre[9])) << 8) |
           (static_cast<std::uint64_t>(static_cast<unsigned char>(more[0])) << 16) |
           (static_cast<std::uint64_t>(static_cast<unsigned char>(more[1])) << 24);
    hstart = 12;
  } else {
    throw FormatError(path, "version", "unsupported .npy version " + std::to_string(major));
  }
  std::string dict(hlen, '\0');
  if (!in.read(dict.data(), static_cast<std::streamsize>(hlen))) throw FormatError(path, "header", "truncated header");
  NpyHeader h;
  h.data_offset = hstart + hlen;
  std::smatch m;
  if (!std::regex_search(dict, m, std::regex(R"('descr'\s*:\s*'([^']+)')"))) throw FormatError(path, "descr", "missing");
  std::string descr = m[1];
  if (descr == "<f4") h.dtype = DType::f32;
  else if (descr == "<f2") h.dtype = DType::f16;
  else if (descr == "<f8") h.dtype = DType::f64;
  else if (descr == "<i4") h.dtype = DType::i32;
  else if (descr == "<i2") h.dtype = DType::i16;
  else if (descr == "<u2") h.dtype = DType::u16;
  else if (descr == "<i8") h.dtype = DType::i64;
  else if (descr == "<u8") h.dtype = DType::u64;
  else if (descr == "<u4") h.dtype = DType::u32;
  else if (descr == "|u1" || descr == "<u1") h.dtype = DType::u8;
  else throw FormatError(path, "descr", "unsupported element type '" + descr + "'");
  if (std::regex_search(dict, m, std::regex(R"('fortran_order'\s*:\s*True)")))
    throw FormatError(path, "fortran_order", "Fortran-ordered arrays are not supported");
  if (!std::regex_search(dict, m, std::regex(R"('shape'\s*:\s*\(([^)]*)\))"))) throw FormatError(path, "shape", "missing");
  const std::string dims = m[1];
  std::regex num(R"(\d+)");
  for (auto it = std::sregex_iterator(dims.begin(), dims.end(), num); it != std::sregex_iterator(); ++it)
    h.shape.push_back(std::stoull(it->str()));
  const auto st = fs::stat_file(path);
  if (st.size != h.data_offset + h.data_bytes()) {
    throw StaleError(path + ": file is " + std::to_string(st.size) + " bytes but its header promises " +
                     std::to_string(h.data_offset + h.data_bytes()) +
                     (st.size < h.data_offset + h.data_bytes() ? " (truncated or still being written)" : " (bytes after the array)"));
  }
  return h;
}

std::string npy_file_bytes(DType dtype, const std::vector<std::uint64_t>& shape, const void* data) {
  std::string bytes = npy_header_bytes(dtype, shape);
  std::uint64_t n = dtype_size(dtype);
  for (auto d : shape) n *= d;
  bytes.append(static_cast<const char*>(data), n);
  return bytes;
}

void write_npy(const std::string& path, DType dtype, const std::vector<std::uint64_t>& shape, const void* data) {
  fs::write_text_atomic(path, npy_file_bytes(dtype, shape, data));
}

std::vector<char> read_npy(const std::string& path, DType expect, NpyHeader* header) {
  const NpyHeader h = read_npy_header(path);
  if (h.dtype != expect) {
    throw FormatError(path, "descr", "expected " + std::string(dtype_name(expect)) + ", found " +
                                         std::string(dtype_name(h.dtype)));
  }
  std::vector<char> out(h.data_bytes());
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError(path, "open", errno);
  std::uint64_t off = 0;
  while (off < out.size()) {
    const ssize_t r = ::pread(fd, out.data() + off, out.size() - off, static_cast<off_t>(h.data_offset + off));
    if (r <= 0) {
      const int e = r < 0 ? errno : EIO;
      ::close(fd);
      throw IoError(path, "read", e);
    }
    off += static_cast<std::uint64_t>(r);
  }
  ::close(fd);
  if (header) *header = h;
  return out;
}

}  // namespace hsipipe::cache

#pragma once
// io/envi: ENVI header parsing, file discovery, the ENVI Scene and a small writer.
//
// The header grammar (as ENVI and SPy read it): first line "ENVI"; then `key = value` lines, keys
// case-insensitive (stored lower-case, inner whitespace collapsed); a value starting with '{' runs to
// the matching '}' and may span lines; lines starting with ';' are comments. Every malformed or
// inconsistent header is a FormatError naming the file and the field.
//
// Decoding: read_rows(r0, r1) reads exactly the byte ranges holding rows [r0, r1) (BSQ: one run per band
// plane) with pread, in pieces that stay in L2, and converts, byte-swaps and de-interleaves them into
// float32 BIP. read_rows is const and thread-safe.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dtype.hpp"
#include "io/scene.hpp"

namespace hsipipe::io {

enum class Interleave : std::uint8_t { bsq, bil, bip };
std::string_view interleave_name(Interleave i) noexcept;  ///< "bsq", "bil", "bip"
std::optional<Interleave> interleave_from_name(std::string_view s);  ///< case-insensitive

struct EnviHeader {
  std::size_t samples = 0, lines = 0, bands = 0;  ///< cols, rows, bands
  int data_type = 0;                              ///< the ENVI code as written
  DType dtype = DType::u8;
  Interleave interleave = Interleave::bsq;
  int byte_order = 0;                 ///< 0 little-endian, 1 big-endian
  bool byte_order_given = false;      ///< false: the key was missing and 0 is assumed
  std::uint64_t header_offset = 0;    ///< bytes to skip at the start of the data file
  std::optional<double> ignore_value; ///< `data ignore value`
  std::optional<std::uint64_t> classes;  ///< `classes` (a classification image: ids 0 .. classes - 1)
  BandInfo band_info;
  /// Every key/value as read, keys lower-case with whitespace collapsed, values trimmed (lists keep
  /// their braces), in file order; a repeated key keeps its last value, except that a key deciding how the
  /// bytes are read (samples, lines, bands, data type, interleave, byte order, header offset, data ignore
  /// value, file type, classes) repeated with another value is a FormatError.
  std::vector<std::pair<std::string, std::string>> fields;

  const std::string* find(std::string_view key) const;
  /// Bytes of sample data the header promises: samples * lines * bands * size (overflow-checked).
  std::uint64_t data_bytes() const;
};

/// Parses header text. `name` (the header path) is used in error messages. Throws FormatError naming
/// the file and the field: missing `ENVI` magic, missing samples/lines/bands/data type/interleave,
/// non-numeric or out-of-range values, complex or unknown data types, unterminated or malformed `{}`
/// lists, lists whose length differs from `bands`. Never throws anything but hsipipe::Error (and
/// std::bad_alloc).
EnviHeader parse_envi_header(std::string_view text, const std::string& name);

/// Header text for `h` (the fields samples, lines, bands, data type, interleave, byte order, header
/// offset, band info, ignore value) followed by `extra` lines (`key = value`, written verbatim).
std::string format_envi_header(const EnviHeader& h, const std::vector<std::pair<std::string, std::string>>& extra = {});

struct EnviFiles {
  std::string header, data;
};
/// Finds the header and data file for a path naming either: X.hdr / X.img.hdr -> data X, X.img,
/// X.dat, X.bsq, X.bil, X.bip, X.raw (and upper-case variants); data X[.ext] -> X[.ext].hdr or X.hdr.
/// Throws IoError when the partner file is not found.
EnviFiles find_envi_files(const std::string& path);

/// Writes an ENVI scene a block of rows at a time from float32 BIP values, converting to the file's
/// element type (integers: rounded to nearest, clamped to the type's range), interleave and byte
/// order. Data goes to DATA.tmp-<pid>; commit() writes the header and renames, so a failed or
/// abandoned write leaves nothing behind (the destructor removes the temporary file).
class EnviWriter {
 public:
  EnviWriter(std::string header_path, std::string data_path, EnviHeader header,
             std::vector<std::pair<std::string, std::string>> extra_fields = {});
  ~EnviWriter();
  EnviWriter(const EnviWriter&) = delete;
  EnviWriter& operator=(const EnviWriter&) = delete;

  /// Rows [r0, r1) from `bip` ((r1 - r0) * samples * bands floats); any order, each row once.
  void write_rows(std::size_t r0, std::size_t r1, const float* bip);
  void commit();

 private:
  std::string header_path_, data_path_, tmp_path_;
  EnviHeader h_;
  std::vector<std::pair<std::string, std::string>> extra_;
  int fd_ = -1;
  bool committed_ = false;
  std::vector<unsigned char> buf_;
};

}  // namespace hsipipe::io

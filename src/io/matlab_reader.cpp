// io/matlab_reader: MATLAB .mat scenes (v4, v5 plain and zlib-compressed, v7.3) through libmatio.
//
// An H x W x B MATLAB array is column-major: element (r, c, b) sits at r + c*H + b*H*W. The scene
// keeps MATLAB's indexing, so pixel (r, c) here is A(r+1, c+1, :) in MATLAB.
// A 2-D B x P matrix with an image size H x W (H*W = P: SceneSpec::image_rows/cols, or the file's own
// nRow/nCol, lines/cols or nr/nc scalars) is the unmixing data sets' [bands x pixels] layout: pixel (r, c)
// is column r + c*H, Y(:, r+1 + c*H) in MATLAB (reshape(Y', H, W, B); numpy: Y.T.reshape(H, W, B, order='F')).
// Any other 2-D H x W array is a label raster (1 band), which a scene (SceneSpec::Role::scene) refuses.
//
// Reading a block of rows:
//  - v7.3 (HDF5 inside) and uncompressed v5: Mat_VarReadData with a hyperslab of rows [r0, r1) — only
//    those rows are read.
//  - compressed v5: zlib streams cannot be entered in the middle, so matio would inflate the variable
//    from its start for every block. The first read_rows() therefore decodes the whole variable once
//    and keeps it as float32 BIP inside the Scene (under the mutex below); later blocks are copies.
//    Above kMaxCacheBytes the scene falls back to per-block hyperslab reads (bounded memory, slow).
//
// Thread-safety: a mat_t holds a FILE* / HDF5 handle with a position and matio is not thread-safe, so
// every matio call on the open file (and the cache fill) happens under one mutex per Scene; concurrent
// read_rows() calls serialise on it (copies out of the cache run outside the lock).
#include <matio.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "io/array_choice.hpp"
#include "io/readers.hpp"
#include "io/strided_decode.hpp"

namespace hsipipe::io {

namespace {

constexpr std::uint64_t kMaxCacheBytes = std::uint64_t{2} << 30;  // float32 cache of a compressed v5 variable

// matio reports problems through a log callback; keep the last message of this thread for our errors
// instead of letting matio print to stderr.
thread_local std::string g_matio_last_message;
void matio_log(int level, char* message) {
  if (level & (MATIO_LOG_LEVEL_ERROR | MATIO_LOG_LEVEL_CRITICAL | MATIO_LOG_LEVEL_WARNING)) {
    g_matio_last_message = message ? message : "";
  }
}
void init_matio_logging() {
  static std::once_flag once;
  std::call_once(once, [] { Mat_LogInitFunc("hsipipe", matio_log); });
}
std::string matio_says() {
  std::string m = std::move(g_matio_last_message);
  g_matio_last_message.clear();
  return m.empty() ? "" : " (libmatio: " + m + ")";
}

struct MatCloser {
  void operator()(mat_t* m) const noexcept { Mat_Close(m); }
};
using MatFile = std::unique_ptr<mat_t, MatCloser>;
struct MatVarFreer {
  void operator()(matvar_t* v) const noexcept { Mat_VarFree(v); }
};
using MatVar = std::unique_ptr<matvar_t, MatVarFreer>;

const char* class_name(matio_classes c) {
  switch (c) {
    case MAT_C_EMPTY: return "empty";
    case MAT_C_CELL: return "cell";
    case MAT_C_STRUCT: return "struct";
    case MAT_C_OBJECT: return "object";
    case MAT_C_CHAR: return "char";
    case MAT_C_SPARSE: return "sparse";
    case MAT_C_DOUBLE: return "double";
    case MAT_C_SINGLE: return "single";
    case MAT_C_INT8: return "int8";
    case MAT_C_UINT8: return "uint8";
    case MAT_C_INT16: return "int16";
    case MAT_C_UINT16: return "uint16";
    case MAT_C_INT32: return "int32";
    case MAT_C_UINT32: return "uint32";
    case MAT_C_INT64: return "int64";
    case MAT_C_UINT64: return "uint64";
    case MAT_C_FUNCTION: return "function";
    case MAT_C_OPAQUE: return "opaque";
  }
  return "unknown";
}

bool numeric_class(matio_classes c) {
  switch (c) {
    case MAT_C_DOUBLE: case MAT_C_SINGLE: case MAT_C_INT8: case MAT_C_UINT8: case MAT_C_INT16:
    case MAT_C_UINT16: case MAT_C_INT32: case MAT_C_UINT32: case MAT_C_INT64: case MAT_C_UINT64:
      return true;
    default:
      return false;
  }
}

/// The MATLAB class as a DType. hsipipe has no int8 DType: int8 reports int16, which holds it exactly.
DType class_dtype(matio_classes c) {
  switch (c) {
    case MAT_C_DOUBLE: return DType::f64;
    case MAT_C_SINGLE: return DType::f32;
    case MAT_C_INT8: return DType::i16;
    case MAT_C_UINT8: return DType::u8;
    case MAT_C_INT16: return DType::i16;
    case MAT_C_UINT16: return DType::u16;
    case MAT_C_INT32: return DType::i32;
    case MAT_C_UINT32: return DType::u32;
    case MAT_C_INT64: return DType::i64;
    case MAT_C_UINT64: return DType::u64;
    default: throw std::logic_error("class_dtype: not a numeric MATLAB class");
  }
}

/// Calls f(T{}) with T the C++ type matio stores class `c` as in memory.
template <class F>
decltype(auto) with_class_type(matio_classes c, F&& f) {
  switch (c) {
    case MAT_C_DOUBLE: return f(double{});
    case MAT_C_SINGLE: return f(float{});
    case MAT_C_INT8: return f(std::int8_t{});
    case MAT_C_UINT8: return f(std::uint8_t{});
    case MAT_C_INT16: return f(std::int16_t{});
    case MAT_C_UINT16: return f(std::uint16_t{});
    case MAT_C_INT32: return f(std::int32_t{});
    case MAT_C_UINT32: return f(std::uint32_t{});
    case MAT_C_INT64: return f(std::int64_t{});
    case MAT_C_UINT64: return f(std::uint64_t{});
    default: throw std::logic_error("with_class_type: not a numeric MATLAB class");
  }
}

std::string version_name(mat_ft v) {
  switch (v) {
    case MAT_FT_MAT4: return "MATLAB v4";
    case MAT_FT_MAT5: return "MATLAB v5";
    case MAT_FT_MAT73: return "MATLAB v7.3";
    default: return "MATLAB";
  }
}

detail::ArrayEntry entry_of(const matvar_t& v) {
  detail::ArrayEntry e;
  e.name = v.name ? v.name : "";
  for (int i = 0; i < v.rank; ++i) e.dims.push_back(v.dims[i]);
  e.type = std::string(v.isComplex ? "complex " : "") + (v.isLogical ? "logical" : class_name(v.class_type));
  e.numeric = numeric_class(v.class_type) && !v.isComplex;
  return e;
}

/// The image size of a [bands x pixels] matrix, and where it came from (for messages and `info`).
struct ImageSize {
  std::size_t rows = 0, cols = 0;
  std::string from;
};

class MatlabScene final : public Scene {
 public:
  MatlabScene(std::string path, MatFile file, MatVar var, std::optional<ImageSize> matrix)
      : path_(std::move(path)), file_(std::move(file)), var_(std::move(var)), matrix_(std::move(matrix)) {
    rows_ = var_->dims[0];
    cols_ = var_->rank >= 2 ? var_->dims[1] : 1;
    bands_ = var_->rank >= 3 ? var_->dims[2] : 1;
    if (matrix_) {
      bands_ = var_->dims[0];
      rows_ = matrix_->rows;
      cols_ = matrix_->cols;
    }
    compressed_ = var_->compression == MAT_COMPRESSION_ZLIB;
    version_ = Mat_GetVersion(file_.get());
    const std::uint64_t cube = static_cast<std::uint64_t>(rows_) * cols_ * bands_ * sizeof(float);
    use_cache_ = compressed_ && version_ == MAT_FT_MAT5 && cube <= kMaxCacheBytes;
  }

  std::size_t rows() const override { return rows_; }
  std::size_t cols() const override { return cols_; }
  std::size_t bands() const override { return bands_; }
  DType source_type() const override { return class_dtype(var_->class_type); }
  const BandInfo& band_info() const override { return info_; }
  std::optional<double> ignore_value() const override { return std::nullopt; }
  void set_validity_bands(std::vector<std::uint8_t> counts) override {  // the kept cube was masked by the old flags
    Scene::set_validity_bands(std::move(counts));
    std::lock_guard lock(mu_);
    cache_ready_ = false;
    decltype(cache_)().swap(cache_);
  }
  std::string format() const override { return version_name(version_); }
  std::string variable() const override { return var_->name ? var_->name : ""; }
  std::string image_size() const override {
    return matrix_ ? std::to_string(rows_) + "x" + std::to_string(cols_) : std::string();
  }
  std::vector<std::string> source_files() const override { return {path_}; }
  std::uint64_t bytes_read() const override { return bytes_read_.load(); }

  std::vector<std::pair<std::string, std::string>> details() const override {
    std::string dims;
    for (int i = 0; i < var_->rank; ++i) dims += (i ? " x " : "") + std::to_string(var_->dims[i]);
    std::vector<std::pair<std::string, std::string>> d{
        {"variable", var_->name ? var_->name : ""},
        {"MATLAB class", var_->isLogical ? "logical" : class_name(var_->class_type)},
        {"MATLAB size", dims}};
    if (matrix_) {
      d.emplace_back("layout", "[bands x pixels], pixels column-major (pixel (r, c) = A(:, r+1 + c*" + std::to_string(rows_) + "))");
      d.emplace_back("image size", std::to_string(rows_) + " x " + std::to_string(cols_) + " (from " + matrix_->from + ")");
    } else {
      d.emplace_back("layout", var_->rank == 2 ? "column-major H x W raster (pixel (r, c) = A(r+1, c+1)); a [bands x pixels] "
                                                 "matrix needs --image-size ROWSxCOLS"
                                               : "column-major (pixel (r, c) = A(r+1, c+1, :))");
    }
    d.emplace_back("compression", compressed_ ? "zlib" : "none");
    if (compressed_) {
      d.emplace_back("block reads", use_cache_ ? "whole variable decoded once, kept in memory"
                                               : "hyperslab per block (re-inflates from the start)");
    }
    return d;
  }

  void read_rows(std::size_t r0, std::size_t r1, float* out) const override {
    if (r0 > r1 || r1 > rows_) {
      throw std::out_of_range(path_ + ": read_rows [" + std::to_string(r0) + ", " + std::to_string(r1) +
                              ") outside 0.." + std::to_string(rows_));
    }
    if (r0 == r1) return;
    const std::size_t plane = cols_ * bands_;
    if (use_cache_) {
      fill_cache();
      std::memcpy(out, cache_.data() + r0 * plane, (r1 - r0) * plane * sizeof(float));
      return;
    }
    read_slab(r0, r1, out);
  }

 private:
  // Rows [r0, r1) x all columns x all bands as stored (class type), then to BIP.
  void read_slab(std::size_t r0, std::size_t r1, float* out) const {
    const std::size_t n = r1 - r0;
    with_class_type(var_->class_type, [&](auto tag) {
      using T = decltype(tag);
      std::vector<T> buf(n * cols_ * bands_);
      detail::Strides st;
      {
        std::lock_guard lock(mu_);
        st = read_block_locked(r0, n, buf.data());
      }
      bytes_read_ += buf.size() * sizeof(T);
      detail::gather_to_bip(buf.data(), st, n, cols_, bands_, std::nullopt, validity_bands(), out);
    });
  }

  void fill_cache() const {
    std::lock_guard lock(mu_);
    if (cache_ready_) return;
    std::vector<float> cube(rows_ * cols_ * bands_);
    // the whole variable in one Mat_VarReadData call (one inflate pass)
    with_class_type(var_->class_type, [&](auto tag) {
      using T = decltype(tag);
      std::vector<T> buf(rows_ * cols_ * bands_);
      const detail::Strides st = read_block_locked(0, rows_, buf.data());
      bytes_read_ += buf.size() * sizeof(T);
      detail::gather_to_bip(buf.data(), st, rows_, cols_, bands_, std::nullopt, validity_bands(), cube.data());
    });
    cache_ = std::move(cube);
    cache_ready_ = true;
  }

  // Rows [r0, r0 + n) into buf in the stored element order; returns that block's strides. mu_ is held.
  template <class T>
  detail::Strides read_block_locked(std::size_t r0, std::size_t n, T* buf) const {
    const auto read = [&](int* start, int* edge, T* to, int* stride = nullptr) {
      int ones[3] = {1, 1, 1};
      if (!stride) stride = ones;
      if (Mat_VarReadData(file_.get(), var_.get(), to, start, stride, edge) != 0) {
        throw FormatError(path_, var_->name ? var_->name : "variable",
                          "cannot read rows " + std::to_string(r0) + ".." + std::to_string(r0 + n - 1) +
                              " (truncated or corrupt file)" + matio_says());
      }
    };
    const auto ni = static_cast<std::ptrdiff_t>(n), B = static_cast<std::ptrdiff_t>(bands_);
    if (!matrix_) {
      int start[3] = {static_cast<int>(r0), 0, 0};
      int edge[3] = {static_cast<int>(n), static_cast<int>(cols_), static_cast<int>(bands_)};
      read(start, edge, buf);
      return {1, ni, ni * static_cast<std::ptrdiff_t>(cols_)};
    }
    // [bands x pixels]: image row r is matrix columns r, r + H, r + 2H, ... (one strided slab per row); the
    // whole image is one slab (what a compressed variable is read as). libmatio 1.5.23 ignores start[1] of a
    // v5 2-D slab with stride 1 (it reads from column 0), so a part is never read as a stride-1 slab.
    if (n == rows_) {
      int start[2] = {0, 0};
      int edge[2] = {static_cast<int>(bands_), static_cast<int>(rows_ * cols_)};
      read(start, edge, buf);
      return {B, static_cast<std::ptrdiff_t>(rows_) * B, 1};
    }
    for (std::size_t i = 0; i < n; ++i) {
      int start[2] = {0, static_cast<int>(r0 + i)};
      int stride[2] = {1, static_cast<int>(rows_)};
      int edge[2] = {static_cast<int>(bands_), static_cast<int>(cols_)};
      read(start, edge, buf + i * cols_ * bands_, stride);
    }
    return {static_cast<std::ptrdiff_t>(cols_) * B, B, 1};
  }

  std::string path_;
  MatFile file_;
  MatVar var_;
  std::optional<ImageSize> matrix_;  ///< set: a [bands x pixels] matrix of this image size
  std::size_t rows_ = 0, cols_ = 0, bands_ = 0;
  bool compressed_ = false, use_cache_ = false;
  mat_ft version_ = MAT_FT_MAT5;
  BandInfo info_;
  mutable std::mutex mu_;                // guards file_/var_ (matio) and the cache fill
  mutable bool cache_ready_ = false;     // under mu_
  mutable std::vector<float> cache_;     // written once under mu_, then read-only
  mutable std::atomic<std::uint64_t> bytes_read_{0};
};

/// A v4/v5 file cut short: libmatio reads it without an error (a short read leaves zeros; a cut zlib
/// stream is a warning and a zeroed block), so the element headers are walked here. Every top-level v5
/// element is [u32 type][u32 bytes][payload] (a variable: 14 miMATRIX, 15 miCOMPRESSED), a v4 variable
/// [type, rows, cols, imag, name length][name][data]; a cut anywhere inside one leaves its declared end
/// past the end of the file. `listed` names the variables in file order (Mat_VarReadNextInfo). Returns a
/// message naming the cut variable, or nothing. (v7.3 is HDF5, which refuses a truncated file itself.)
std::optional<std::pair<std::string, std::string>> mat_truncation(const std::string& path, mat_ft version,
                                                                  const std::vector<detail::ArrayEntry>& listed) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f || (version != MAT_FT_MAT5 && version != MAT_FT_MAT4)) return std::nullopt;
  const auto size = static_cast<std::uint64_t>(f.tellg());
  auto read_at = [&](std::uint64_t off, unsigned char* buf, std::size_t n) {
    f.clear();
    f.seekg(static_cast<std::streamoff>(off));
    f.read(reinterpret_cast<char*>(buf), static_cast<std::streamsize>(n));
    return static_cast<std::size_t>(f.gcount());
  };
  auto u32 = [](const unsigned char* p, bool big) {
    return big ? (std::uint32_t{p[0]} << 24 | std::uint32_t{p[1]} << 16 | std::uint32_t{p[2]} << 8 | p[3])
               : (std::uint32_t{p[3]} << 24 | std::uint32_t{p[2]} << 16 | std::uint32_t{p[1]} << 8 | p[0]);
  };
  auto cut = [&](std::size_t var, std::uint64_t needed) {
    const std::string name = var < listed.size() ? listed[var].name : "variable #" + std::to_string(var + 1);
    return std::make_pair(name, "file is truncated: the variable needs " + std::to_string(needed) + " bytes of the file, which has " +
                                    std::to_string(size));
  };
  std::size_t var = 0;
  if (version == MAT_FT_MAT5) {
    unsigned char hdr[128];
    if (read_at(0, hdr, 128) != 128) return cut(0, 128);
    const bool big = hdr[126] == 'M' && hdr[127] == 'I';  // "IM": written little-endian
    for (std::uint64_t off = 128; off < size;) {
      unsigned char t[8] = {};
      const std::size_t got = read_at(off, t, 8);
      if (got < 8) {  // a cut tag, unless it is zero padding
        if (std::any_of(t, t + got, [](unsigned char b) { return b != 0; })) return cut(var, off + 8);
        break;
      }
      const std::uint32_t type = u32(t, big);
      if (type >> 16) {  // a small data element (4 bytes of payload in the tag)
        off += 8;
        continue;
      }
      const std::uint64_t end = off + 8 + u32(t + 4, big);
      if (end > size) return cut(var, end);
      if (type == 14 || type == 15) ++var;
      off = type == 14 ? off + 8 + (end - off - 8 + 7) / 8 * 8 : end;  // miMATRIX is padded to 8 bytes
    }
    return std::nullopt;
  }
  for (std::uint64_t off = 0; off < size; ++var) {  // v4
    unsigned char h[20];
    if (read_at(off, h, 20) < 20) return cut(var, off + 20);
    const bool big = u32(h, false) > 9999;  // MOPT's M digit: 0 little-endian, 1 big-endian (1000..1999)
    static constexpr std::uint64_t elem[6] = {8, 4, 4, 2, 2, 1};  // its P digit: double .. uint8
    const std::uint32_t P = (u32(h, big) / 10) % 10;
    if (P >= 6) return std::nullopt;  // not ours to judge: libmatio reports it
    const std::uint64_t end = off + 20 + u32(h + 16, big) + std::uint64_t{u32(h + 4, big)} * u32(h + 8, big) * elem[P] * (u32(h + 12, big) ? 2 : 1);
    if (end > size) return cut(var, end);
    off = end;
  }
  return std::nullopt;
}

/// The value of a real numeric 1 x 1 variable, or nothing.
std::optional<double> scalar_value(mat_t* file, const std::string& name) {
  MatVar v(Mat_VarRead(file, name.c_str()));
  if (!v || v->rank != 2 || v->dims[0] != 1 || v->dims[1] != 1 || v->isComplex || !numeric_class(v->class_type) || !v->data)
    return std::nullopt;
  return with_class_type(v->class_type, [&](auto tag) { return static_cast<double>(*static_cast<const decltype(tag)*>(v->data)); });
}

/// The image size a file names for its [bands x pixels] matrices: the scalars nRow/nCol, lines/cols or nr/nc
/// (the unmixing data sets' names). Several pairs must agree. Leaves the file rewound.
std::optional<ImageSize> image_size_in_file(mat_t* file, const std::string& path, const std::vector<detail::ArrayEntry>& entries) {
  static constexpr std::pair<const char*, const char*> kPairs[] = {{"nRow", "nCol"}, {"lines", "cols"}, {"nr", "nc"}};
  const auto has = [&](const char* n) {
    return std::any_of(entries.begin(), entries.end(), [&](const detail::ArrayEntry& e) { return e.name == n; });
  };
  std::optional<ImageSize> found;
  for (const auto& [r, c] : kPairs) {
    if (!has(r) || !has(c)) continue;
    ImageSize s{0, 0, std::string(r) + "/" + c + " in the file"};
    for (const auto& [name, to] : {std::pair{r, &s.rows}, std::pair{c, &s.cols}}) {
      const auto v = scalar_value(file, name);
      if (!v || !(*v >= 1 && *v <= 2147483647.0) || *v != std::floor(*v))
        throw FormatError(path, name, "expected a positive integer scalar (the image's " +
                                          std::string(to == &s.rows ? "rows" : "columns") + " for a [bands x pixels] matrix)");
      *to = static_cast<std::size_t>(*v);
    }
    if (found && (found->rows != s.rows || found->cols != s.cols))
      throw FormatError(path, s.from.substr(0, s.from.find(' ')),
                        std::to_string(s.rows) + " x " + std::to_string(s.cols) + " disagrees with " + found->from + ": " +
                            std::to_string(found->rows) + " x " + std::to_string(found->cols));
    if (!found) found = s;
  }
  Mat_Rewind(file);
  return found;
}

/// What a 2-D variable is read as: a [bands x pixels] matrix of image size `size` (returned), or a label
/// raster (nothing returned); a scene without a fitting size is refused, saying what to add.
std::optional<ImageSize> matrix_size(const detail::ArrayEntry& v, const SceneSpec& spec, const std::optional<ImageSize>& size) {
  const std::size_t bands = v.dims[0], pixels = v.dims[1];
  const std::string shape = std::to_string(bands) + " x " + std::to_string(pixels);
  if (size && size->rows * size->cols == pixels) return size;
  if (size && (spec.image_rows || spec.role == SceneSpec::Role::scene)) {
    const std::size_t n = size->rows * size->cols;
    throw FormatError(spec.path, v.name,
                      "variable is " + shape + " but the image size " + std::to_string(size->rows) + " x " +
                          std::to_string(size->cols) + " (" + size->from + ") has " + std::to_string(n) +
                          " pixels: a [bands x pixels] matrix needs " + std::to_string(n) + " columns" +
                          (bands == n ? " (this one looks like [pixels x bands]: store its transpose)" : ""));
  }
  if (spec.role == SceneSpec::Role::scene)
    throw FormatError(spec.path, v.name,
                      "a 2-D variable (" + shape + ") is not a scene without its image size: if it is [bands x pixels] (" +
                          std::to_string(bands) + " bands, " + std::to_string(pixels) +
                          " pixels in column-major order), give ROWSxCOLS with --image-size (INI: image_size = ROWSxCOLS) "
                          "or store the scalars nRow and nCol in the file; a label raster goes to --labels");
  return std::nullopt;
}

}  // namespace

std::unique_ptr<Scene> open_matlab(const SceneSpec& spec) {
  init_matio_logging();
  const std::string& path = spec.path;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw IoError(path, "no such file");
  MatFile file(Mat_Open(path.c_str(), MAT_ACC_RDONLY));
  if (!file) {
    throw FormatError(path, "header", "not a MATLAB .mat file libmatio can open (v4, v5 or v7.3)" + matio_says());
  }

  // List every variable (header information only, no data).
  std::vector<detail::ArrayEntry> entries;
  while (MatVar v{Mat_VarReadNextInfo(file.get())}) entries.push_back(entry_of(*v));
  Mat_Rewind(file.get());
  // before choosing: the last variable present is the cut one, and every one after it is lost
  if (const auto t = mat_truncation(path, Mat_GetVersion(file.get()), entries)) throw FormatError(path, t->first, t->second);
  if (entries.empty() && Mat_GetVersion(file.get()) == MAT_FT_MAT73)  // libmatio opens it, HDF5 did not
    throw FormatError(path, "header", "a v7.3 (HDF5) file with no variable libmatio can read: truncated or damaged?" + matio_says());

  // the image size of [bands x pixels] matrices: the option's, else the file's (never for a label raster)
  std::optional<ImageSize> size;
  if (spec.image_rows) size = ImageSize{spec.image_rows, spec.image_cols, "--image-size / image_size"};
  else if (spec.role != SceneSpec::Role::labels) size = image_size_in_file(file.get(), path, entries);
  const auto fits = [&](const detail::ArrayEntry& e) { return size && e.dims.size() == 2 && e.dims[1] == size->rows * size->cols; };
  const detail::ArrayEntry& chosen = spec.variable.empty()
                                         ? detail::choose_default_array(entries, path, "variable", fits)
                                         : detail::find_array(entries, spec.variable, path, "variable");
  if (!chosen.numeric) {
    throw FormatError(path, chosen.name,
                      "variable is " + chosen.type + ", not a real numeric array (int8..uint64, single, double)");
  }
  if (chosen.dims.size() < 2 || chosen.dims.size() > 3) {
    throw FormatError(path, chosen.name,
                      "variable has " + std::to_string(chosen.dims.size()) +
                          " dimensions; a scene is H x W x B (or H x W for one band)");
  }
  for (std::size_t d : chosen.dims) {
    if (d == 0) throw FormatError(path, chosen.name, "variable is empty");
    if (d > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
      throw FormatError(path, chosen.name, "a dimension exceeds what libmatio can address (2^31 - 1)");
    }
  }
  if (spec.image_rows && chosen.dims.size() != 2)
    throw FormatError(path, chosen.name, "--image-size / image_size reads a 2-D [bands x pixels] matrix, and the variable has " +
                                             std::to_string(chosen.dims.size()) + " dimensions");
  const std::optional<ImageSize> matrix = chosen.dims.size() == 2 ? matrix_size(chosen, spec, size) : std::nullopt;
  MatVar var(Mat_VarReadInfo(file.get(), chosen.name.c_str()));
  if (!var) throw FormatError(path, chosen.name, "cannot read the variable's header" + matio_says());
  return std::make_unique<MatlabScene>(path, std::move(file), std::move(var), matrix);
}

}  // namespace hsipipe::io

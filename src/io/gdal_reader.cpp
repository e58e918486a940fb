// io/gdal_reader: any raster GDAL opens (GeoTIFF striped or tiled, LZW/DEFLATE/ZSTD, pixel or band
// interleaved, COG, /vsicurl/ ...). Built only with HSIPIPE_WITH_GDAL (src/io/CMakeLists.txt drops
// gdal_*.cpp otherwise).
//
// Reading rows [r0, r1): the window is cut at the raster's block-row boundaries (multiples of the
// block height) and each piece is one GDALDatasetRasterIO call over all bands, with pixel/line/band
// spacing chosen so the samples land directly in band-interleaved-by-pixel order in the caller's
// buffer, in the stored type; they are then widened to float32 in place (8-byte types go through a
// small buffer). GDAL therefore decodes whole blocks (tiles or strips), never single pixels.
//
// Invalid pixels: each band's nodata value (GDALGetRasterNoDataValue), compared in the stored type
// before rounding to float32, and NaN in float rasters; a pixel invalid in any band becomes NaN in all
// bands (io::Scene contract). ignore_value() reports band 1's nodata.
//
// Thread-safety: a GDALDataset handle must not be used by two threads at once. The scene keeps a small
// pool of handles opened on the same file: read_rows() borrows one (opening another when all are busy)
// and gives it back, so concurrent read_rows() calls decode in parallel on separate handles.
#include <gdal.h>
#include <cpl_conv.h>
#include <cpl_error.h>
#include <cpl_string.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include "core/error.hpp"
#include "io/gdal_remote.hpp"
#include "io/readers.hpp"
#include "io/sample_kind.hpp"

namespace hsipipe::io {

namespace {

void register_gdal_once() {
  static std::once_flag once;
  std::call_once(once, [] { GDALAllRegister(); });
}

/// Silences GDAL's default stderr error printing on this thread for the scope; the last message stays
/// readable through CPLGetLastErrorMsg() for our exceptions.
class QuietGdalErrors {
 public:
  QuietGdalErrors() {
    CPLPushErrorHandler(&QuietGdalErrors::handler);
    CPLErrorReset();
  }
  ~QuietGdalErrors() { CPLPopErrorHandler(); }
  QuietGdalErrors(const QuietGdalErrors&) = delete;
  QuietGdalErrors& operator=(const QuietGdalErrors&) = delete;

 private:
  // Quiet, except that GDAL's retry warnings and network trace still reach remote-scene statistics.
  static void CPL_STDCALL handler(CPLErr cls, CPLErrorNum, const char* msg) {
    note_gdal_message(static_cast<int>(cls), msg);
  }
};

std::string gdal_says() {
  const char* m = CPLGetLastErrorMsg();
  return m && *m ? std::string(" (GDAL: ") + m + ")" : "";
}

struct DatasetCloser {
  void operator()(void* h) const noexcept { GDALClose(static_cast<GDALDatasetH>(h)); }
};
using Dataset = std::unique_ptr<void, DatasetCloser>;

Dataset open_dataset(const std::string& name) {
  return Dataset(GDALOpenEx(name.c_str(), GDAL_OF_RASTER | GDAL_OF_READONLY, nullptr, nullptr, nullptr));
}

// Sample types the reader decodes. SignedByte is GDAL < 3.7's int8: GDT_Byte with PIXELTYPE=SIGNEDBYTE.
using Kind = SampleKind;  // GDAL 3.6 has no float16

std::optional<Kind> kind_of(GDALDataType t, bool signed_byte) {
  switch (t) {
    case GDT_Byte: return signed_byte ? Kind::i8 : Kind::u8;
    case GDT_Int16: return Kind::i16;
    case GDT_UInt16: return Kind::u16;
    case GDT_Int32: return Kind::i32;
    case GDT_UInt32: return Kind::u32;
#if GDAL_VERSION_NUM >= 3050000
    case GDT_Int64: return Kind::i64;
    case GDT_UInt64: return Kind::u64;
#endif
#if GDAL_VERSION_NUM >= 3070000
    case GDT_Int8: return Kind::i8;
#endif
    case GDT_Float32: return Kind::f32;
    case GDT_Float64: return Kind::f64;
    default: return std::nullopt;
  }
}

GDALDataType gdal_type(Kind k) {
  switch (k) {
    case Kind::u8: case Kind::i8: return GDT_Byte;
    case Kind::i16: return GDT_Int16;
    case Kind::u16: return GDT_UInt16;
    case Kind::i32: return GDT_Int32;
    case Kind::u32: return GDT_UInt32;
#if GDAL_VERSION_NUM >= 3050000
    case Kind::i64: return GDT_Int64;
    case Kind::u64: return GDT_UInt64;
#else
    case Kind::i64: case Kind::u64: return GDT_Float64;
#endif
    case Kind::f16: case Kind::f32: return GDT_Float32;  // no float16 in GDAL 3.6: kind_of never gives f16
    case Kind::f64: return GDT_Float64;
  }
  return GDT_Float64;
}

/// Widens npix pixels x bands samples of type T (BIP) to float32 in `out`, masking invalid pixels
/// (nodata compared in double against the stored value, before any float rounding; NaN in float
/// sources; only the bands flagged in `counts`, when given). `src` may alias `out` when sizeof(T) <= 4: pixels are converted back to front and each
/// pixel's samples are copied out before its floats are written, so no unread sample is overwritten.
template <class T>
void widen_and_mask(const T* src, float* out, std::size_t npix, std::size_t bands,
                    const std::vector<std::optional<double>>& nodata, const std::uint8_t* counts) {
  bool any_nodata = false;
  for (const auto& nd : nodata) any_nodata = any_nodata || nd.has_value();
  const bool masking = std::is_floating_point_v<T> || any_nodata;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<T> px(bands);
  const auto* bytes = reinterpret_cast<const unsigned char*>(src);
  for (std::size_t p = npix; p-- > 0;) {
    std::memcpy(px.data(), bytes + p * bands * sizeof(T), bands * sizeof(T));
    float* o = out + p * bands;
    bool bad = false;
    if (masking) {
      for (std::size_t b = 0; b < bands && !bad; ++b) {
        if (counts && !counts[b]) continue;  // a band that does not decide validity (Scene::set_validity_bands)
        if constexpr (std::is_floating_point_v<T>) bad = !std::isfinite(static_cast<float>(px[b]));  // NaN or +-Inf in float32
        if (nodata[b] && static_cast<double>(px[b]) == *nodata[b]) bad = true;
      }
    }
    if (bad) {
      std::fill(o, o + bands, nan);
    } else {
      for (std::size_t b = 0; b < bands; ++b) o[b] = static_cast<float>(px[b]);
    }
  }
}

/// Band-level metadata item, else dataset-level.
std::string item(GDALRasterBandH band, const char* key, const char* domain = nullptr) {
  const char* v = GDALGetMetadataItem(band, key, domain);
  return v ? v : "";
}

std::vector<double> parse_envi_list(const std::string& s) {
  std::vector<double> out;
  std::string t = s;
  for (char& c : t)
    if (c == '{' || c == '}' || c == ',') c = ' ';
  std::istringstream in(t);
  double v;
  while (in >> v) out.push_back(v);
  return out;
}

std::optional<double> to_double(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = CPLStrtod(s.c_str(), &end);
  if (end == s.c_str()) return std::nullopt;
  return v;
}

class GdalScene final : public Scene {
 public:
  GdalScene(std::string user_name, std::string open_name, Dataset first)
      : user_name_(std::move(user_name)), open_name_(std::move(open_name)) {
    auto* ds = static_cast<GDALDatasetH>(first.get());
    rows_ = static_cast<std::size_t>(GDALGetRasterYSize(ds));
    cols_ = static_cast<std::size_t>(GDALGetRasterXSize(ds));
    bands_ = static_cast<std::size_t>(GDALGetRasterCount(ds));
    if (bands_ == 0) throw FormatError(user_name_, "bands", "the raster has no bands");
    if (rows_ == 0 || cols_ == 0) throw FormatError(user_name_, "size", "the raster is empty");

    GDALRasterBandH b1 = GDALGetRasterBand(ds, 1);
    GDALGetBlockSize(b1, &block_x_, &block_y_);
    if (block_y_ <= 0) block_y_ = 1;
    std::optional<Kind> common;
    bool mixed = false;
    for (std::size_t b = 1; b <= bands_; ++b) {
      GDALRasterBandH band = GDALGetRasterBand(ds, static_cast<int>(b));
      const GDALDataType t = GDALGetRasterDataType(band);
      const bool sbyte = item(band, "PIXELTYPE", "IMAGE_STRUCTURE") == "SIGNEDBYTE";
      auto k = kind_of(t, sbyte);
      if (!k) {
        throw FormatError(user_name_, "data type",
                          std::string("band ") + std::to_string(b) + " has type " + GDALGetDataTypeName(t) +
                              " (complex or unsupported); hsipipe reads real integer and float bands");
      }
      if (common && *common != *k) mixed = true;
      if (!common) common = k;
      int has = 0;
      const double nd = GDALGetRasterNoDataValue(band, &has);
      nodata_.push_back(has ? std::optional<double>(nd) : std::nullopt);
    }
    kind_ = mixed ? Kind::f64 : *common;
    source_kind_ = *common;
    mixed_types_ = mixed;
    load_band_info(ds);
    load_details(ds);

    char** files = GDALGetFileList(ds);
    for (char** f = files; f && *f; ++f) files_.emplace_back(*f);
    CSLDestroy(files);
    if (files_.empty()) files_.push_back(user_name_);
    pool_.push_back(std::move(first));
  }

  std::size_t rows() const override { return rows_; }
  std::size_t cols() const override { return cols_; }
  std::size_t bands() const override { return bands_; }
  DType source_type() const override { return sample_kind_dtype(mixed_types_ ? Kind::f64 : source_kind_); }
  const BandInfo& band_info() const override { return info_; }
  std::optional<double> ignore_value() const override { return nodata_.front(); }
  std::string format() const override { return driver_; }
  std::vector<std::pair<std::string, std::string>> details() const override { return details_; }
  std::vector<std::string> source_files() const override { return files_; }
  std::uint64_t bytes_read() const override { return bytes_read_.load(); }
  std::size_t block_rows() const override { return static_cast<std::size_t>(block_y_); }

  void read_rows(std::size_t r0, std::size_t r1, float* out) const override {
    if (r0 > r1 || r1 > rows_) {
      throw std::out_of_range(user_name_ + ": read_rows [" + std::to_string(r0) + ", " + std::to_string(r1) +
                              ") outside 0.." + std::to_string(rows_));
    }
    if (r0 == r1) return;
    Lease lease(*this);
    auto* ds = static_cast<GDALDatasetH>(lease.get());
    const std::size_t by = static_cast<std::size_t>(block_y_);
    for (std::size_t a = r0; a < r1;) {
      const std::size_t b = std::min(r1, (a / by + 1) * by);  // up to the next block-row boundary
      read_piece(ds, a, b, out + (a - r0) * cols_ * bands_);
      a = b;
    }
  }

 private:
  /// Borrows a dataset handle from the pool for one read_rows() call.
  class Lease {
   public:
    explicit Lease(const GdalScene& s) : s_(s) {
      {
        std::lock_guard lock(s_.pool_mu_);
        if (!s_.pool_.empty()) {
          ds_ = std::move(s_.pool_.back());
          s_.pool_.pop_back();
          return;
        }
      }
      QuietGdalErrors quiet;
      ds_ = open_dataset(s_.open_name_);
      if (!ds_) throw IoError(s_.user_name_, "cannot reopen for another reader thread" + gdal_says());
    }
    ~Lease() {
      std::lock_guard lock(s_.pool_mu_);
      s_.pool_.push_back(std::move(ds_));
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    void* get() const { return ds_.get(); }

   private:
    const GdalScene& s_;
    Dataset ds_;
  };

  // Rows [a, b) within one block row (or the tail of one), all bands, BIP, into out.
  void read_piece(GDALDatasetH ds, std::size_t a, std::size_t b, float* out) const {
    const std::size_t n = b - a, npix = n * cols_;
    with_sample_type(kind_, [&](auto tag) {
      using T = decltype(tag);
      std::vector<T> tmp;
      T* dst = reinterpret_cast<T*>(out);
      if constexpr (sizeof(T) > sizeof(float)) {
        tmp.resize(npix * bands_);
        dst = tmp.data();
      }
      const auto sz = static_cast<GSpacing>(sizeof(T));
      QuietGdalErrors quiet;
      const CPLErr err = GDALDatasetRasterIOEx(
          ds, GF_Read, 0, static_cast<int>(a), static_cast<int>(cols_), static_cast<int>(n), dst,
          static_cast<int>(cols_), static_cast<int>(n), gdal_type(kind_), static_cast<int>(bands_), nullptr,
          sz * static_cast<GSpacing>(bands_), sz * static_cast<GSpacing>(bands_ * cols_), sz, nullptr);
      if (err != CE_None) {
        throw FormatError(user_name_, "raster data",
                          "cannot decode rows " + std::to_string(a) + ".." + std::to_string(b - 1) +
                              " (corrupt or truncated block)" + gdal_says());
      }
      count_block_row(ds, a / static_cast<std::size_t>(block_y_), npix * bands_ * sizeof(T));
      widen_and_mask(dst, out, npix, bands_, nodata_, validity_bands());
    });
  }

  /// Adds the storage bytes of block row `yb` to bytes_read() the first time it is decoded (repeats are
  /// served by GDAL's block cache or cost no more storage reads than the first): the compressed sizes of
  /// its GeoTIFF blocks (TIFF metadata domain), or the decoded size for drivers that do not say.
  void count_block_row(GDALDatasetH ds, std::size_t yb, std::uint64_t decoded) const {
    {
      std::lock_guard lock(pool_mu_);
      if (counted_.empty()) counted_.assign((rows_ + static_cast<std::size_t>(block_y_) - 1) / static_cast<std::size_t>(block_y_), false);
      if (counted_[yb]) return;
      counted_[yb] = true;
    }
    if (driver_ != "GTiff" || block_x_ <= 0) {
      bytes_read_ += decoded;  // a partial block row counts the rows asked for
      return;
    }
    const std::size_t bx = static_cast<std::size_t>(block_x_);
    const std::size_t nbx = (cols_ + bx - 1) / bx;
    const std::size_t nbands = band_separate_ ? bands_ : 1;
    std::uint64_t total = 0;
    for (std::size_t band = 1; band <= nbands; ++band) {
      GDALRasterBandH h = GDALGetRasterBand(ds, static_cast<int>(band));
      for (std::size_t xb = 0; xb < nbx; ++xb) {
        const std::string key = "BLOCK_SIZE_" + std::to_string(xb) + "_" + std::to_string(yb);
        const char* v = GDALGetMetadataItem(h, key.c_str(), "TIFF");
        if (!v) {
          bytes_read_ += decoded;
          return;
        }
        total += std::strtoull(v, nullptr, 10);
      }
    }
    bytes_read_ += total;
  }

  void load_band_info(GDALDatasetH ds) {
    std::vector<double> wl, fw;
    std::string units;
    for (std::size_t b = 1; b <= bands_; ++b) {
      GDALRasterBandH band = GDALGetRasterBand(ds, static_cast<int>(b));
      auto w = to_double(item(band, "wavelength"));
      if (!w) w = to_double(item(band, "WAVELENGTH"));
      std::string u = item(band, "wavelength_units");
      if (!w) {
        w = to_double(item(band, "CENTRAL_WAVELENGTH_UM", "IMAGERY"));
        if (w) u = "Micrometers";
      }
      if (w) wl.push_back(*w);
      auto f = to_double(item(band, "fwhm"));
      if (!f) f = to_double(item(band, "FWHM"));
      if (!f) f = to_double(item(band, "FWHM_UM", "IMAGERY"));
      if (f) fw.push_back(*f);
      if (units.empty()) units = u;
    }
    // An ENVI header read by GDAL's ENVI driver keeps its raw lists in the "ENVI" domain.
    auto envi_list = [&](const char* key) {
      const char* v = GDALGetMetadataItem(ds, key, "ENVI");
      return v ? parse_envi_list(v) : std::vector<double>{};
    };
    if (wl.size() != bands_) wl = envi_list("wavelength");
    if (fw.size() != bands_) fw = envi_list("fwhm");
    if (units.empty()) {
      const char* v = GDALGetMetadataItem(ds, "wavelength_units", nullptr);
      if (v) units = v;
    }
    if (wl.size() == bands_) info_.wavelengths = wl;
    if (fw.size() == bands_) info_.fwhm = fw;
    info_.wavelength_units = units;
    const auto bbl = envi_list("bbl");
    if (bbl.size() == bands_)
      for (double v : bbl) info_.bbl.push_back(v != 0.0 ? 1 : 0);
    if (const char* v = GDALGetMetadataItem(ds, "reflectance_scale_factor", "ENVI")) {
      if (auto s = to_double(v)) info_.scale_factor = *s;
    }
  }

  void load_details(GDALDatasetH ds) {
    GDALDriverH drv = GDALGetDatasetDriver(ds);
    driver_ = drv ? GDALGetDriverShortName(drv) : "GDAL";
    details_.emplace_back("driver", drv ? std::string(GDALGetDriverLongName(drv)) : "?");
    GDALRasterBandH b1 = GDALGetRasterBand(ds, 1);
    details_.emplace_back("stored type", mixed_types_ ? std::string("mixed (read as Float64)")
                                                      : std::string(GDALGetDataTypeName(GDALGetRasterDataType(b1))));
    const char* il = GDALGetMetadataItem(ds, "INTERLEAVE", "IMAGE_STRUCTURE");
    const std::string interleave = il ? il : (bands_ == 1 ? "BAND" : "?");
    band_separate_ = interleave == "BAND";
    details_.emplace_back("interleave", interleave);
    const char* comp = GDALGetMetadataItem(ds, "COMPRESSION", "IMAGE_STRUCTURE");
    details_.emplace_back("compression", comp ? comp : "none");
    const bool tiled = block_x_ < static_cast<int>(cols_) || (block_y_ > 1 && block_x_ == block_y_ && rows_ > 1 &&
                                                             static_cast<std::size_t>(block_x_) != cols_);
    details_.emplace_back("blocks", std::to_string(block_x_) + " x " + std::to_string(block_y_) +
                                        (tiled ? " (tiled)" : " (striped)"));
    if (nodata_.front()) {
      std::ostringstream s;
      s.precision(17);
      s << *nodata_.front();
      details_.emplace_back("nodata", s.str());
    }
  }

  std::string user_name_, open_name_, driver_;
  std::size_t rows_ = 0, cols_ = 0, bands_ = 0;
  int block_x_ = 0, block_y_ = 1;
  Kind kind_ = Kind::f64, source_kind_ = Kind::f64;
  bool mixed_types_ = false, band_separate_ = false;
  std::vector<std::optional<double>> nodata_;  // one per band
  BandInfo info_;
  std::vector<std::pair<std::string, std::string>> details_;
  std::vector<std::string> files_;
  mutable std::mutex pool_mu_;
  mutable std::vector<Dataset> pool_;  // idle handles, under pool_mu_
  mutable std::vector<bool> counted_;  // block rows already counted in bytes_read_, under pool_mu_
  mutable std::atomic<std::uint64_t> bytes_read_{0};
};

/// For `file:var`, the GDAL subdataset whose name ends in ":var" or "/var" (netCDF, HDF4, GPKG ...).
std::string find_subdataset(GDALDatasetH ds, const std::string& file, const std::string& var) {
  char** md = GDALGetMetadata(ds, "SUBDATASETS");
  std::string listing;
  for (char** it = md; it && *it; ++it) {
    std::string kv = *it;
    const auto eq = kv.find('=');
    if (eq == std::string::npos || kv.compare(eq - 5, 5, "_NAME") != 0) continue;
    const std::string name = kv.substr(eq + 1);
    listing += (listing.empty() ? "" : ", ") + name;
    for (const std::string& suffix : {":" + var, "/" + var, ":\"" + var + "\""}) {
      if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
        return name;
      }
    }
  }
  throw FormatError(file, "variable",
                    "no subdataset '" + var + "'; GDAL lists: " + (listing.empty() ? "(none)" : listing));
}

}  // namespace

std::unique_ptr<Scene> open_gdal(const SceneSpec& spec) {
  register_gdal_once();
  QuietGdalErrors quiet;
  Dataset ds = open_dataset(spec.path);
  if (!ds) {
    throw FormatError(spec.path, "format", "not a raster any registered GDAL driver can open" + gdal_says());
  }
  std::string open_name = spec.path;
  if (!spec.variable.empty()) {
    open_name = find_subdataset(static_cast<GDALDatasetH>(ds.get()), spec.path, spec.variable);
    ds = open_dataset(open_name);
    if (!ds) throw FormatError(spec.path, "variable", "cannot open subdataset " + open_name + gdal_says());
  }
  return std::make_unique<GdalScene>(spec.str(), open_name, std::move(ds));
}

}  // namespace hsipipe::io

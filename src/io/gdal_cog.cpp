// io/gdal_cog: a scene as a tiled Cloud-Optimized GeoTIFF (hsipipe cog; see cmd_cog.cpp for the layout
// and the choice of values). Part of libhsipipe_gdal.so (io/gdal_api.hpp).
#include <cpl_conv.h>
#include <cpl_error.h>
#include <cpl_string.h>
#include <gdal.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <iomanip>
#include <limits>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "io/gdal_api.hpp"

namespace hsipipe::io {
namespace {

struct DatasetCloser {
  void operator()(void* h) const noexcept {
    if (h) GDALClose(static_cast<GDALDatasetH>(h));
  }
};
using Dataset = std::unique_ptr<void, DatasetCloser>;
GDALDatasetH H(const Dataset& d) { return static_cast<GDALDatasetH>(d.get()); }

/// Removes a path on destruction unless released (temporary files of an unfinished conversion).
class RemoveOnExit {
 public:
  explicit RemoveOnExit(std::string path) : path_(std::move(path)) {}
  ~RemoveOnExit() {
    if (path_.empty()) return;
    VSIUnlink(path_.c_str());
    VSIUnlink((path_ + ".aux.xml").c_str());
  }
  RemoveOnExit(const RemoveOnExit&) = delete;
  RemoveOnExit& operator=(const RemoveOnExit&) = delete;
  void release() { path_.clear(); }

 private:
  std::string path_;
};

std::string gdal_msg() {
  const char* m = CPLGetLastErrorMsg();
  return m && *m ? std::string(" (GDAL: ") + m + ")" : "";
}

std::string join_list(const std::vector<double>& v) {
  std::ostringstream os;
  os << std::setprecision(10) << "{";
  for (std::size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << "}";
  return os.str();
}

/// Stored type: 8/16-bit integers keep their type when the ignore value (if any) fits it; everything
/// else is Float32, which holds every decoded value exactly.
GDALDataType choose_type(const Scene& s, std::optional<double>& nodata) {
  auto fits = [&](double lo, double hi) {
    const auto iv = s.ignore_value();
    if (!iv) return true;
    return *iv == std::floor(*iv) && *iv >= lo && *iv <= hi;
  };
  switch (s.source_type()) {
    case DType::u8:
      if (fits(0, 255)) { nodata = s.ignore_value(); return GDT_Byte; }
      break;
    case DType::i16:
      if (fits(-32768, 32767)) { nodata = s.ignore_value(); return GDT_Int16; }
      break;
    case DType::u16:
      if (fits(0, 65535)) { nodata = s.ignore_value(); return GDT_UInt16; }
      break;
    default: break;
  }
  nodata.reset();
  return GDT_Float32;
}

template <class T>
void convert_rows(const float* in, T* out, std::size_t n, double nodata_value) {
  for (std::size_t i = 0; i < n; ++i) {
    const float v = in[i];
    out[i] = std::isnan(v) ? static_cast<T>(nodata_value) : static_cast<T>(v);
  }
}

// Band metadata (wavelength, fwhm, nodata per band) and the ENVI-domain lists the GDAL reader looks for.
void set_metadata(GDALDatasetH src, const BandInfo& info, std::size_t bands, const std::optional<double>& nodata) {
  for (std::size_t b = 0; b < bands; ++b) {
    GDALRasterBandH band = GDALGetRasterBand(src, static_cast<int>(b + 1));
    if (nodata) GDALSetRasterNoDataValue(band, *nodata);
    std::ostringstream v;
    v << std::setprecision(10);
    if (!info.wavelengths.empty()) {
      v << info.wavelengths[b];
      GDALSetMetadataItem(band, "wavelength", v.str().c_str(), nullptr);
      if (!info.wavelength_units.empty()) {
        GDALSetMetadataItem(band, "wavelength_units", info.wavelength_units.c_str(), nullptr);
      }
    }
    if (!info.fwhm.empty()) {
      std::ostringstream f;
      f << std::setprecision(10) << info.fwhm[b];
      GDALSetMetadataItem(band, "fwhm", f.str().c_str(), nullptr);
    }
  }
  // ENVI-style lists in the "ENVI" domain: what the GDAL reader looks for after band items.
  if (!info.wavelengths.empty()) GDALSetMetadataItem(src, "wavelength", join_list(info.wavelengths).c_str(), "ENVI");
  if (!info.fwhm.empty()) GDALSetMetadataItem(src, "fwhm", join_list(info.fwhm).c_str(), "ENVI");
  if (!info.bbl.empty()) {
    std::vector<double> bbl(info.bbl.begin(), info.bbl.end());
    GDALSetMetadataItem(src, "bbl", join_list(bbl).c_str(), "ENVI");
  }
  if (info.scale_factor != 1.0) {
    std::ostringstream s;
    s << std::setprecision(17) << info.scale_factor;
    GDALSetMetadataItem(src, "reflectance_scale_factor", s.str().c_str(), "ENVI");
  }
  if (!info.wavelength_units.empty()) GDALSetMetadataItem(src, "wavelength_units", info.wavelength_units.c_str(), nullptr);
}

// The scene's rows into src in blocks of one tile height: bounded memory whatever the scene size.
void write_rows(Scene& scene, GDALDatasetH src, const std::string& src_path, GDALDataType type,
                const std::optional<double>& nodata, std::size_t block) {
  const std::size_t rows = scene.rows(), cols = scene.cols(), bands = scene.bands();
  std::vector<float> buf(block * cols * bands);
  std::vector<unsigned char> conv(block * cols * bands * static_cast<std::size_t>(GDALGetDataTypeSizeBytes(type)));
  const int tsize = GDALGetDataTypeSizeBytes(type);
  for (std::size_t r0 = 0; r0 < rows; r0 += block) {
    const std::size_t r1 = std::min(rows, r0 + block), n = (r1 - r0) * cols * bands;
    scene.read_rows(r0, r1, buf.data());
    void* data = buf.data();
    const double nd = nodata.value_or(0.0);
    switch (type) {
      case GDT_Byte: convert_rows(buf.data(), reinterpret_cast<std::uint8_t*>(conv.data()), n, nd); data = conv.data(); break;
      case GDT_Int16: convert_rows(buf.data(), reinterpret_cast<std::int16_t*>(conv.data()), n, nd); data = conv.data(); break;
      case GDT_UInt16: convert_rows(buf.data(), reinterpret_cast<std::uint16_t*>(conv.data()), n, nd); data = conv.data(); break;
      default: break;  // Float32: the decoded buffer as is (NaN marks invalid pixels)
    }
    const GSpacing ps = static_cast<GSpacing>(tsize) * static_cast<GSpacing>(bands);
    const CPLErr err = GDALDatasetRasterIOEx(
        src, GF_Write, 0, static_cast<int>(r0), static_cast<int>(cols), static_cast<int>(r1 - r0), data,
        static_cast<int>(cols), static_cast<int>(r1 - r0), type, static_cast<int>(bands), nullptr, ps,
        ps * static_cast<GSpacing>(cols), tsize, nullptr);
    if (err != CE_None) throw IoError(src_path, "cannot write rows " + std::to_string(r0) + ".." + std::to_string(r1 - 1) + gdal_msg());
  }
}

// Step 1: the decoded scene as an uncompressed, tiled, pixel-interleaved GeoTIFF at src_path.
void write_source_tiff(Scene& scene, GDALDriverH gtiff, const std::string& src_path, GDALDataType type,
                       const std::optional<double>& nodata, int tile) {
  const std::string ts = std::to_string(tile);
  CPLStringList opts;
  opts.SetNameValue("TILED", "YES");
  opts.SetNameValue("BLOCKXSIZE", ts.c_str());
  opts.SetNameValue("BLOCKYSIZE", ts.c_str());
  opts.SetNameValue("INTERLEAVE", "PIXEL");
  opts.SetNameValue("BIGTIFF", "IF_SAFER");
  opts.SetNameValue("COMPRESS", "NONE");
  Dataset src(GDALCreate(gtiff, src_path.c_str(), static_cast<int>(scene.cols()), static_cast<int>(scene.rows()),
                         static_cast<int>(scene.bands()), type, opts.List()));
  if (!src) throw IoError(src_path, "cannot create the temporary GeoTIFF" + gdal_msg());
  set_metadata(H(src), scene.band_info(), scene.bands(), nodata);
  write_rows(scene, H(src), src_path, type, nodata, static_cast<std::size_t>(tile));
  GDALFlushCache(H(src));
}

// Step 2: the COG at tmp_out: header and tile index first, tiles in row-major order, no overviews; its
// tiles and band count checked against what was asked (`out` names it in errors).
void write_cog_copy(GDALDriverH cog, const std::string& src_path, const std::string& tmp_out, const std::string& out,
                    const CogOptions& o, std::size_t bands) {
  Dataset src(GDALOpen(src_path.c_str(), GA_ReadOnly));
  if (!src) throw IoError(src_path, "cannot reopen the temporary GeoTIFF" + gdal_msg());
  const int tile = o.tile;
  const std::string& compress = o.compress;
  CPLStringList opts;
  opts.SetNameValue("BLOCKSIZE", std::to_string(tile).c_str());
  opts.SetNameValue("COMPRESS", compress.c_str());
  if (o.predictor && compress != "NONE") opts.SetNameValue("PREDICTOR", "YES");
  if (o.level > 0 && (compress == "DEFLATE" || compress == "ZSTD")) opts.SetNameValue("LEVEL", std::to_string(o.level).c_str());
  opts.SetNameValue("OVERVIEWS", "NONE");
  opts.SetNameValue("BIGTIFF", "IF_SAFER");
  // The COG driver declares BLOCKSIZE >= 128 but writes any multiple of 16; sample-sized tiles are the point.
  CPLConfigOptionSetter no_validate("GDAL_VALIDATE_CREATION_OPTIONS", "NO", false);
  Dataset dst(GDALCreateCopy(cog, tmp_out.c_str(), H(src), FALSE, opts.List(), nullptr, nullptr));
  if (!dst) throw IoError(out, "the COG driver failed" + gdal_msg());
  GDALFlushCache(H(dst));
  int bx = 0, by = 0;
  GDALGetBlockSize(GDALGetRasterBand(H(dst), 1), &bx, &by);
  if (bx != tile || by != tile || GDALGetRasterCount(H(dst)) != static_cast<int>(bands)) {
    throw IoError(out, "the COG driver wrote " + std::to_string(bx) + "x" + std::to_string(by) + " tiles and " +
                           std::to_string(GDALGetRasterCount(H(dst))) + " bands, expected " + std::to_string(tile) +
                           "x" + std::to_string(tile) + " and " + std::to_string(bands));
  }
}

}  // namespace

CogResult write_cog(Scene& scene, const CogOptions& o, const std::string& out) {
  std::optional<double> nodata;
  const GDALDataType type = choose_type(scene, nodata);

  static std::once_flag once;
  std::call_once(once, [] { GDALAllRegister(); });
  CPLErrorHandlerPusher quiet(CPLQuietErrorHandler);

  const std::string tag = ".tmp-" + std::to_string(::getpid());
  const std::string src_path = out + tag + "-src.tif", tmp_out = out + tag;
  RemoveOnExit rm_src(src_path), rm_tmp(tmp_out);
  GDALDriverH gtiff = GDALGetDriverByName("GTiff"), cog = GDALGetDriverByName("COG");
  if (!gtiff || !cog) throw ConfigError("hsipipe cog: this GDAL lacks the GTiff or COG driver (GDAL >= 3.1 needed)");
  write_source_tiff(scene, gtiff, src_path, type, nodata, o.tile);
  write_cog_copy(cog, src_path, tmp_out, out, o, scene.bands());

  std::error_code ec;
  std::filesystem::rename(tmp_out, out, ec);
  if (ec) throw IoError(out, "rename from " + tmp_out + " failed: " + ec.message());
  rm_tmp.release();
  VSIUnlink((out + ".aux.xml").c_str());  // a stale sidecar of an overwritten file would mislead readers
  return {GDALGetDataTypeName(type), nodata};
}

}  // namespace hsipipe::io

// hsipipe cog: converts any scene hsipipe reads (ENVI, MATLAB, HDF5, GeoTIFF, a remote URL) into a
// tiled Cloud-Optimized GeoTIFF for object storage, so that `decode` from http(s):// or s3:// fetches
// only the tiles each rank's rows need. Rank-local (no MPI); built only with GDAL.
//
// Layout: square tiles (a multiple of 16; the advice is 1-2x the sample's spatial size, so a patch
// touches at most 4 tiles), pixel-interleaved (one tile holds every band of its pixels: a spectrum
// is one range request), no overviews (classification reads full resolution), compressed.
// Values: the decoded float32 samples are stored exactly: 8/16-bit integer sources keep their type
// (invalid pixels become the scene's ignore value, written as nodata); all others are stored as
// Float32 with NaN for invalid pixels. Band metadata (wavelengths, FWHM, units, bad-band list) is
// kept. The output appears by one rename when complete; on error nothing is left behind.
#include <cpl_conv.h>
#include <cpl_error.h>
#include <cpl_string.h>
#include <gdal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <limits>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "core/error.hpp"
#include "io/scene.hpp"

namespace hsipipe::cli {
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
GDALDataType choose_type(const io::Scene& s, std::optional<double>& nodata) {
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

int run_cog(int argc, char** argv) {
  po::options_description desc("hsipipe cog options");
  desc.add_options()("input", po::value<std::string>()->required(), "IN: any scene hsipipe reads (positional)")(
      "output", po::value<std::string>()->required(), "OUT.tif: the Cloud-Optimized GeoTIFF to write (positional)")(
      "tile", po::value<int>(), "tile side in pixels, a multiple of 16 (default 256, or from --patch)")(
      "patch", po::value<int>()->default_value(0),
      "sample patch side p the cache will use: without --tile, tile = p rounded up to a multiple of 16 "
      "(the advice: 1-2x the sample's spatial size)")(
      "compress", po::value<std::string>()->default_value("deflate"), "deflate | zstd | lzw | none")(
      "predictor", po::bool_switch(), "horizontal (integers) or floating-point predictor: smaller files for smooth spectra")(
      "level", po::value<int>()->default_value(0), "DEFLATE/ZSTD level (0: GDAL's default)")(
      "force", po::bool_switch(), "overwrite OUT if it exists");
  po::positional_options_description pos;
  pos.add("input", 1).add("output", 1);
  const Parsed a = parse(argc, argv, "cog", "IN OUT.tif [--tile 256] [--compress deflate|zstd|lzw] [--predictor]",
                         desc, &pos);
  if (a.help) return 0;
  const auto& vm = a.vm;
  const std::string in = vm["input"].as<std::string>(), out = vm["output"].as<std::string>();
  const int patch = vm["patch"].as<int>();
  std::string compress = vm["compress"].as<std::string>();
  for (auto& c : compress) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (compress != "DEFLATE" && compress != "ZSTD" && compress != "LZW" && compress != "NONE") {
    throw ConfigError("hsipipe cog: --compress '" + vm["compress"].as<std::string>() +
                      "': expected deflate, zstd, lzw or none");
  }
  if (patch < 0 || patch > 1024) throw ConfigError("hsipipe cog: --patch " + std::to_string(patch) + ": expected 0..1024");
  int tile = 256;
  if (vm.count("tile")) {
    tile = vm["tile"].as<int>();
  } else if (patch > 0) {
    tile = std::max(16, (patch + 15) / 16 * 16);
  }
  if (tile < 16 || tile > 4096 || tile % 16 != 0) {
    throw ConfigError("hsipipe cog: --tile " + std::to_string(tile) +
                      ": expected a multiple of 16 between 16 and 4096 (TIFF tiles are aligned to 16 pixels)");
  }
  const int level = vm["level"].as<int>();
  if (level < 0 || level > 22) throw ConfigError("hsipipe cog: --level " + std::to_string(level) + ": expected 0..22");
  const std::filesystem::path out_path(out);
  {
    std::string ext = out_path.extension().string();
    for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (ext != ".tif" && ext != ".tiff") throw ConfigError("hsipipe cog: OUT '" + out + "': expected a .tif or .tiff name");
  }
  if (std::filesystem::exists(out_path) && !vm["force"].as<bool>()) {
    throw ConfigError("hsipipe cog: OUT '" + out + "' exists (use --force to overwrite)");
  }
  const auto parent = out_path.has_parent_path() ? out_path.parent_path() : std::filesystem::path(".");
  if (!std::filesystem::is_directory(parent)) throw IoError(out, "the output directory does not exist");

  const auto t0 = std::chrono::steady_clock::now();
  auto scene = io::open_scene(io::SceneSpec::parse(in));
  const std::size_t rows = scene->rows(), cols = scene->cols(), bands = scene->bands();
  if (rows > static_cast<std::size_t>(std::numeric_limits<int>::max()) ||
      cols > static_cast<std::size_t>(std::numeric_limits<int>::max()) || bands > 65535) {
    throw FormatError(in, "size", "too large for a GeoTIFF written by hsipipe cog");
  }
  std::optional<double> nodata;
  const GDALDataType type = choose_type(*scene, nodata);

  static std::once_flag once;
  std::call_once(once, [] { GDALAllRegister(); });
  CPLErrorHandlerPusher quiet(CPLQuietErrorHandler);

  // 1. The decoded scene as an uncompressed, tiled, pixel-interleaved GeoTIFF next to OUT.
  const std::string tag = ".tmp-" + std::to_string(::getpid());
  const std::string src_path = out + tag + "-src.tif", tmp_out = out + tag;
  RemoveOnExit rm_src(src_path), rm_tmp(tmp_out);
  GDALDriverH gtiff = GDALGetDriverByName("GTiff"), cog = GDALGetDriverByName("COG");
  if (!gtiff || !cog) throw ConfigError("hsipipe cog: this GDAL lacks the GTiff or COG driver (GDAL >= 3.1 needed)");
  {
    const std::string ts = std::to_string(tile);
    CPLStringList opts;
    opts.SetNameValue("TILED", "YES");
    opts.SetNameValue("BLOCKXSIZE", ts.c_str());
    opts.SetNameValue("BLOCKYSIZE", ts.c_str());
    opts.SetNameValue("INTERLEAVE", "PIXEL");
    opts.SetNameValue("BIGTIFF", "IF_SAFER");
    opts.SetNameValue("COMPRESS", "NONE");
    Dataset src(GDALCreate(gtiff, src_path.c_str(), static_cast<int>(cols), static_cast<int>(rows),
                           static_cast<int>(bands), type, opts.List()));
    if (!src) throw IoError(src_path, "cannot create the temporary GeoTIFF" + gdal_msg());

    const auto& info = scene->band_info();
    for (std::size_t b = 0; b < bands; ++b) {
      GDALRasterBandH band = GDALGetRasterBand(H(src), static_cast<int>(b + 1));
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
    if (!info.wavelengths.empty()) GDALSetMetadataItem(H(src), "wavelength", join_list(info.wavelengths).c_str(), "ENVI");
    if (!info.fwhm.empty()) GDALSetMetadataItem(H(src), "fwhm", join_list(info.fwhm).c_str(), "ENVI");
    if (!info.bbl.empty()) {
      std::vector<double> bbl(info.bbl.begin(), info.bbl.end());
      GDALSetMetadataItem(H(src), "bbl", join_list(bbl).c_str(), "ENVI");
    }
    if (info.scale_factor != 1.0) {
      std::ostringstream s;
      s << std::setprecision(17) << info.scale_factor;
      GDALSetMetadataItem(H(src), "reflectance_scale_factor", s.str().c_str(), "ENVI");
    }
    if (!info.wavelength_units.empty()) GDALSetMetadataItem(H(src), "wavelength_units", info.wavelength_units.c_str(), nullptr);

    // Row blocks of one tile height: bounded memory whatever the scene size.
    const std::size_t block = static_cast<std::size_t>(tile);
    std::vector<float> buf(block * cols * bands);
    std::vector<unsigned char> conv(block * cols * bands * static_cast<std::size_t>(GDALGetDataTypeSizeBytes(type)));
    const int tsize = GDALGetDataTypeSizeBytes(type);
    for (std::size_t r0 = 0; r0 < rows; r0 += block) {
      const std::size_t r1 = std::min(rows, r0 + block), n = (r1 - r0) * cols * bands;
      scene->read_rows(r0, r1, buf.data());
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
          H(src), GF_Write, 0, static_cast<int>(r0), static_cast<int>(cols), static_cast<int>(r1 - r0), data,
          static_cast<int>(cols), static_cast<int>(r1 - r0), type, static_cast<int>(bands), nullptr, ps,
          ps * static_cast<GSpacing>(cols), tsize, nullptr);
      if (err != CE_None) throw IoError(src_path, "cannot write rows " + std::to_string(r0) + ".." + std::to_string(r1 - 1) + gdal_msg());
    }
    GDALFlushCache(H(src));
  }

  // 2. The COG: header and tile index first, tiles in row-major order, no overviews.
  {
    Dataset src(GDALOpen(src_path.c_str(), GA_ReadOnly));
    if (!src) throw IoError(src_path, "cannot reopen the temporary GeoTIFF" + gdal_msg());
    CPLStringList opts;
    opts.SetNameValue("BLOCKSIZE", std::to_string(tile).c_str());
    opts.SetNameValue("COMPRESS", compress.c_str());
    if (vm["predictor"].as<bool>() && compress != "NONE") opts.SetNameValue("PREDICTOR", "YES");
    if (level > 0 && (compress == "DEFLATE" || compress == "ZSTD")) opts.SetNameValue("LEVEL", std::to_string(level).c_str());
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
  std::error_code ec;
  std::filesystem::rename(tmp_out, out, ec);
  if (ec) throw IoError(out, "rename from " + tmp_out + " failed: " + ec.message());
  rm_tmp.release();
  VSIUnlink((out + ".aux.xml").c_str());  // a stale sidecar of an overwritten file would mislead readers

  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto bytes = std::filesystem::file_size(out);
  const double decoded = static_cast<double>(rows * cols * bands) * 4.0;
  std::cout << "cog: " << out << ": " << rows << " x " << cols << " x " << bands << ", " << GDALGetDataTypeName(type)
            << (nodata ? ", nodata " + std::to_string(*nodata) : std::string()) << ", tiles " << tile << " x " << tile
            << " pixel-interleaved, " << compress << (vm["predictor"].as<bool>() ? " + predictor" : "") << ", "
            << bytes << " bytes (" << std::fixed << std::setprecision(2) << decoded / static_cast<double>(bytes)
            << "x smaller than float32), " << std::setprecision(2) << secs << " s\n";
  if (patch > 0 && (tile < patch || tile > std::max(2 * patch, 16))) {
    std::cout << "cog: note: tile " << tile << " is outside 1-2x the patch size " << patch
              << " (suggested: --tile " << std::max(16, (patch + 15) / 16 * 16) << ")\n";
  }
  return 0;
}

}  // namespace

HSIPIPE_COMMAND("cog", "convert a scene to a tiled Cloud-Optimized GeoTIFF for http(s):// and s3:// decoding", run_cog);

}  // namespace hsipipe::cli

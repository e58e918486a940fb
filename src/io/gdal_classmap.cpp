// io/gdal_classmap: class maps as georeferenced rasters (hsipipe predict): the georeferencing of a source
// as GDAL reads it, and a single-band class raster written as a GeoTIFF or an ENVI Classification file.
// Part of libhsipipe_gdal.so (io/gdal_api.hpp).
#include <cpl_conv.h>
#include <cpl_error.h>
#include <cpl_string.h>
#include <gdal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "io/gdal_api.hpp"

namespace hsipipe::io {
namespace {

void register_once() {
  static std::once_flag once;
  std::call_once(once, [] { GDALAllRegister(); });
}

struct Closer {
  void operator()(void* h) const noexcept {
    if (h) GDALClose(static_cast<GDALDatasetH>(h));
  }
};
using Dataset = std::unique_ptr<void, Closer>;

std::string gdal_msg() {
  const char* m = CPLGetLastErrorMsg();
  return m && *m ? std::string(" (GDAL: ") + m + ")" : "";
}

/// Removes the temporary files of an unfinished write on destruction unless released.
class Scratch {
 public:
  explicit Scratch(std::vector<std::string> paths) : paths_(std::move(paths)) {}
  ~Scratch() {
    for (const auto& p : paths_) {
      std::remove(p.c_str());
      std::remove((p + ".aux.xml").c_str());
    }
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void release() { paths_.clear(); }

 private:
  std::vector<std::string> paths_;
};

std::string with_extension(const std::string& path, const std::string& ext) {
  return std::filesystem::path(path).replace_extension(ext).string();
}

void fill(GDALDatasetH ds, const ClassRaster& r, const std::string& out) {
  if (r.georef) {
    auto gt = r.georef->transform;
    if (GDALSetGeoTransform(ds, gt.data()) != CE_None) throw IoError(out, "set geotransform" + gdal_msg());
    if (!r.georef->wkt.empty() && GDALSetProjection(ds, r.georef->wkt.c_str()) != CE_None)
      throw IoError(out, "set CRS" + gdal_msg());
  }
  GDALRasterBandH band = GDALGetRasterBand(ds, 1);
  GDALColorTableH ct = GDALCreateColorTable(GPI_RGB);
  for (std::size_t i = 0; i < r.colours.size(); ++i) {
    const GDALColorEntry e{r.colours[i][0], r.colours[i][1], r.colours[i][2], 255};
    GDALSetColorEntry(ct, static_cast<int>(i), &e);
  }
  const CPLErr ct_err = GDALSetRasterColorTable(band, ct);
  GDALDestroyColorTable(ct);
  if (ct_err != CE_None) throw IoError(out, "set colour table" + gdal_msg());
  char** names = nullptr;
  for (const auto& n : r.names) names = CSLAddString(names, n.c_str());
  const CPLErr nm_err = GDALSetRasterCategoryNames(band, names);
  CSLDestroy(names);
  if (nm_err != CE_None) throw IoError(out, "set class names" + gdal_msg());
  if (GDALSetRasterNoDataValue(band, r.nodata) != CE_None) throw IoError(out, "set nodata" + gdal_msg());
  std::vector<std::uint16_t> row_buf(r.cols);
  for (std::size_t y = 0; y < r.rows; ++y) {
    const std::uint16_t* src = r.values.data() + y * r.cols;
    const CPLErr e = GDALRasterIO(band, GF_Write, 0, static_cast<int>(y), static_cast<int>(r.cols), 1, const_cast<std::uint16_t*>(src),
                                  static_cast<int>(r.cols), 1, GDT_UInt16, 0, 0);
    if (e != CE_None) throw IoError(out, "write row " + std::to_string(y) + gdal_msg());
  }
}

/// A GDAL configuration option set for this thread while in scope (also when an error leaves it).
class ThreadOption {
 public:
  ThreadOption(const char* key, const char* value) : key_(key) { CPLSetThreadLocalConfigOption(key, value); }
  ~ThreadOption() { CPLSetThreadLocalConfigOption(key_, nullptr); }
  ThreadOption(const ThreadOption&) = delete;
  ThreadOption& operator=(const ThreadOption&) = delete;

 private:
  const char* key_;
};

/// GDAL's ENVI header names the file it was written as (`description = {PATH}`): the temporary name, which
/// becomes the final one.
void name_in_header(const std::string& hdr, const std::string& tmp, const std::string& out) {
  std::ifstream in(hdr, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (std::size_t at = text.find(tmp); at != std::string::npos; at = text.find(tmp, at + out.size())) text.replace(at, tmp.size(), out);
  std::ofstream o(hdr, std::ios::binary | std::ios::trunc);
  o << text;
  if (!o.flush()) throw IoError(hdr, "write");
}

}  // namespace

std::optional<GeoRef> read_georef(const std::vector<std::string>& files) {
  register_once();
  CPLErrorHandlerPusher quiet(CPLQuietErrorHandler);
  for (const auto& f : files) {
    if (f.find("://") != std::string::npos) continue;
    Dataset ds(GDALOpenEx(f.c_str(), GDAL_OF_RASTER | GDAL_OF_READONLY, nullptr, nullptr, nullptr));
    if (!ds) continue;
    GeoRef g;
    if (GDALGetGeoTransform(static_cast<GDALDatasetH>(ds.get()), g.transform.data()) != CE_None) continue;
    const char* wkt = GDALGetProjectionRef(static_cast<GDALDatasetH>(ds.get()));
    g.wkt = wkt ? wkt : "";
    return g;
  }
  return std::nullopt;
}

void write_class_raster(const ClassRaster& r, const std::string& driver_name, const std::string& out) {
  register_once();
  if (r.values.size() != r.rows * r.cols) throw IoError(out, "class raster: values do not match rows x cols");
  GDALDriverH drv = GDALGetDriverByName(driver_name.c_str());
  if (!drv) throw IoError(out, "GDAL has no " + driver_name + " driver");
  const bool envi = driver_name == "ENVI";
  const std::string tmp = with_extension(out, "") + ".tmp-" + std::to_string(::getpid()) + std::filesystem::path(out).extension().string();
  std::vector<std::string> scratch{tmp};
  if (envi) scratch.push_back(with_extension(tmp, ".hdr"));
  Scratch guard(scratch);
  const ThreadOption no_pam("GDAL_PAM_ENABLED", "NO");  // no .aux.xml beside the outputs
  // Remote reads set GDAL_DISABLE_READDIR_ON_OPEN=EMPTY_DIR process-wide (gdal_remote.cpp), under which the ENVI
  // driver's Create, which opens the raw file it made again, finds no .hdr beside it and fails without a word:
  // a map of a remote scene failed with "create (ENVI)". The outputs are local files: list their folder.
  const ThreadOption list_dir("GDAL_DISABLE_READDIR_ON_OPEN", "FALSE");
  char** co = nullptr;
  if (!envi) {
    co = CSLSetNameValue(co, "TILED", "YES");
    co = CSLSetNameValue(co, "COMPRESS", "DEFLATE");
  }
  CPLErrorReset();
  {
    Dataset ds(GDALCreate(drv, tmp.c_str(), static_cast<int>(r.cols), static_cast<int>(r.rows), 1, r.u16 ? GDT_UInt16 : GDT_Byte, co));
    CSLDestroy(co);
    if (!ds) throw IoError(out, "create (" + driver_name + ")" + gdal_msg());
    fill(static_cast<GDALDatasetH>(ds.get()), r, out);
    GDALFlushCache(static_cast<GDALDatasetH>(ds.get()));
    if (CPLGetLastErrorType() >= CE_Failure) throw IoError(out, "write" + gdal_msg());
  }  // closed: the ENVI header is written now
  if (std::rename(tmp.c_str(), out.c_str()) != 0) throw IoError(out, "rename", errno);
  if (envi) {
    const std::string hdr = with_extension(out, ".hdr");
    name_in_header(scratch[1], tmp, out);
    if (std::rename(scratch[1].c_str(), hdr.c_str()) != 0) {
      std::remove(out.c_str());
      throw IoError(hdr, "rename", errno);
    }
  }
  guard.release();
}

}  // namespace hsipipe::io

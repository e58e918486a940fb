#pragma once
// io/gdal_api: the GDAL half of io (GDAL rasters, remote scenes, COG writing) is its own shared library,
// libhsipipe_gdal.so, loaded the first time a scene needs it. GDAL and the ~100 libraries it pulls in
// cost each process ~30 ms to load: commands and decode ranks that read ENVI, MATLAB or HDF5 scenes no
// longer pay it. With static libraries (BUILD_SHARED_LIBS=OFF) the same table is linked in directly.
// Rank-local; thread-safe.
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/scene.hpp"

namespace hsipipe::io {

/// hsipipe cog's choices (validated by the command).
struct CogOptions {
  int tile = 256;                  ///< square tiles, a multiple of 16
  std::string compress = "DEFLATE";  ///< DEFLATE | ZSTD | LZW | NONE
  bool predictor = false;
  int level = 0;                   ///< 0: GDAL's default
};

/// What write_cog stored.
struct CogResult {
  std::string type_name;          ///< GDAL's name of the stored type ("Int16", "Float32" ...)
  std::optional<double> nodata;   ///< the nodata value written, if any
};

/// Where a raster lies on the ground, as GDAL reads it from a source (GeoTIFF tags, an ENVI header's
/// `map info` / `coordinate system string`, ...): the affine geotransform and the CRS as WKT ("" when the
/// source names none).
struct GeoRef {
  std::array<double, 6> transform{};
  std::string wkt;
};

/// A single-band class raster for write_class_raster: one value a pixel (label values, `nodata` where no
/// class was given), a colour and a name per value 0 .. colours.size() - 1 (the colour table; ENVI's
/// `class lookup` and `class names`).
struct ClassRaster {
  std::size_t rows = 0, cols = 0;
  bool u16 = false;                      ///< UInt16 values; Byte otherwise (every value <= 255)
  std::vector<std::uint16_t> values;     ///< rows x cols, row-major
  std::uint16_t nodata = 0;
  std::vector<std::array<std::uint8_t, 3>> colours;
  std::vector<std::string> names;        ///< same size as colours
  std::optional<GeoRef> georef;
};

/// The entry points of libhsipipe_gdal.so (io/gdal_reader.cpp, gdal_remote.cpp, gdal_cog.cpp).
struct GdalApi {
  std::unique_ptr<Scene> (*open_gdal)(const SceneSpec&);
  std::unique_ptr<Scene> (*open_remote)(const SceneSpec&);
  /// Writes `scene` as a tiled, pixel-interleaved Cloud-Optimized GeoTIFF at `out` (see cmd_cog.cpp),
  /// by one rename when complete; nothing is left behind on error.
  CogResult (*write_cog)(Scene& scene, const CogOptions& opts, const std::string& out);
  std::string (*version)();  ///< GDAL's release name at run time
  /// The georeferencing of the first of `files` that GDAL opens with a geotransform (an ENVI scene: its
  /// data file, whose header GDAL reads), none when no file has one.
  std::optional<GeoRef> (*read_georef)(const std::vector<std::string>& files);
  /// Writes `raster` as `driver` "GTiff" (tiled, DEFLATE) or "ENVI" (an ENVI Classification file: `out`
  /// is the data file, its header beside it with the extension replaced by .hdr), with its georeferencing,
  /// nodata and colour table, under temporary names renamed into place when complete (the ENVI header
  /// last); throws IoError naming `out`, leaving nothing behind.
  void (*write_class_raster)(const ClassRaster& raster, const std::string& driver, const std::string& out);
};

/// The GDAL part, loaded on first call (next to libhsipipe_io.so, else the library search path).
/// Throws ConfigError when hsipipe was built without GDAL, IoError naming the library when it cannot
/// be loaded.
const GdalApi& gdal_api();

/// GDAL's release ("3.6.2"): of the loaded library when a GDAL scene was opened, else the release
/// hsipipe was built against (without loading it); "" when built without GDAL.
std::string gdal_version();

}  // namespace hsipipe::io

/// The table of libhsipipe_gdal.so (what gdal_api() looks up).
extern "C" const hsipipe::io::GdalApi* hsipipe_gdal_api();

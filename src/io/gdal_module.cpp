// io/gdal_module: the entry table of libhsipipe_gdal.so, looked up by io::gdal_api() (io/gdal_api.hpp).
#include <gdal.h>

#include "io/gdal_api.hpp"
#include "io/gdal_remote.hpp"
#include "io/readers.hpp"

namespace hsipipe::io {
CogResult write_cog(Scene& scene, const CogOptions& opts, const std::string& out);  // gdal_cog.cpp
std::optional<GeoRef> read_georef(const std::vector<std::string>& files);          // gdal_classmap.cpp
void write_class_raster(const ClassRaster& raster, const std::string& driver, const std::string& out);  // gdal_classmap.cpp
}  // namespace hsipipe::io

extern "C" const hsipipe::io::GdalApi* hsipipe_gdal_api() {
  static const hsipipe::io::GdalApi api{
      &hsipipe::io::open_gdal,
      &hsipipe::io::open_remote,
      &hsipipe::io::write_cog,
      [] { return std::string(GDALVersionInfo("RELEASE_NAME")); },
      &hsipipe::io::read_georef,
      &hsipipe::io::write_class_raster,
  };
  return &api;
}

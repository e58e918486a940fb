#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "io/gdal_api.hpp"
#include "io/readers.hpp"
#include "io/remote_path.hpp"

namespace hsipipe::io {

namespace {
std::string lower_ext(const std::string& p) {
  std::string e = std::filesystem::path(p).extension().string();
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return e;
}
/// The file begins with a TIFF or BigTIFF signature (II*\0, MM\0*, II+\0, MM\0+).
bool starts_as_tiff(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  unsigned char b[4] = {};
  in.read(reinterpret_cast<char*>(b), 4);
  if (in.gcount() != 4) return false;
  return (b[0] == 'I' && b[1] == 'I' && (b[2] == 42 || b[2] == 43) && b[3] == 0) ||
         (b[0] == 'M' && b[1] == 'M' && b[2] == 0 && (b[3] == 42 || b[3] == 43));
}
bool is_remote(const std::string& p) {
  return p.rfind("http://", 0) == 0 || p.rfind("https://", 0) == 0 || p.rfind("s3://", 0) == 0 ||
         p.rfind("/vsi", 0) == 0;
}
}  // namespace

bool opens_as_hdf5(const std::string& path) {
  if (is_remote(path) || is_remote_path(path)) return false;  // GDAL reads remote .h5
  const std::string ext = lower_ext(path);
  return ext == ".h5" || ext == ".hdf5" || ext == ".he5";
}

std::unique_ptr<Scene> open_scene(const SceneSpec& spec) {
  if (spec.path.empty()) throw ConfigError("scene path is empty");
  // http(s)://, s3:// and GDAL's network paths: range reads through GDAL, with request statistics.
  // GDAL (libhsipipe_gdal.so) is loaded only for the scenes that need it.
  if (is_remote_path(spec.path)) return gdal_api().open_remote(spec);
  if (!is_remote(spec.path) && !std::filesystem::exists(spec.path)) {
    // "scene.hdr:band1": a variable after a file that takes none (SceneSpec::parse splits .mat/.h5/... only)
    const auto colon = spec.path.rfind(':');
    if (colon != std::string::npos && colon > 0 && std::filesystem::is_regular_file(spec.path.substr(0, colon)))
      throw ConfigError(spec.path + ": no such file; " + spec.path.substr(0, colon) +
                        " exists, but only MATLAB and HDF5 files (.mat, .h5, .hdf5, .he5, .nc, .hdf) take a :VARIABLE");
    throw IoError(spec.path, "no such file");
  }
  // a FIFO (or a process substitution, /dev/fd/N) would block the open below forever, and is read once
  if (!is_remote(spec.path) && !std::filesystem::is_regular_file(spec.path))
    throw IoError(spec.path, "not a regular file (a directory, pipe or device); scenes and labels are read from files");
  const std::string ext = lower_ext(spec.path);
  if (ext == ".mat") return open_matlab(spec);
  if (spec.image_rows)  // it would be ignored without a word
    throw ConfigError(spec.path + ": --image-size / image_size " + spec.image_size() +
                      " reads a 2-D [bands x pixels] MATLAB matrix (.mat), and this file is not one");
  if (opens_as_hdf5(spec.path)) return open_hdf5(spec);
  // a TIFF named as the scene is read as a TIFF, even with an ENVI header of the same stem beside it (a
  // scene.tif next to scene.hdr was read as raw ENVI data: the TIFF's bytes as pixels)
  if (!is_remote(spec.path) && looks_like_envi(spec.path) && (ext == ".hdr" || !starts_as_tiff(spec.path))) {
    if (!spec.variable.empty())
      throw ConfigError(spec.path + ": an ENVI scene has no variables (given '" + spec.variable + "')");
    return open_envi(spec);
  }
#ifdef HSIPIPE_WITH_GDAL
  return gdal_api().open_gdal(spec);
#else
  throw FormatError(spec.path, "format",
                    "not ENVI, MATLAB or HDF5, and this hsipipe was built without GDAL (HSIPIPE_WITH_GDAL=OFF)");
#endif
}

}  // namespace hsipipe::io

// hsipipe cog: converts any scene hsipipe reads (ENVI, MATLAB, HDF5, GeoTIFF, a remote URL) into a
// tiled Cloud-Optimized GeoTIFF for object storage, so that `decode` from http(s):// or s3:// fetches
// only the tiles each rank's rows need. Rank-local (no MPI); built only with GDAL, whose part is
// io::write_cog in libhsipipe_gdal.so (io/gdal_api.hpp).
//
// Layout: square tiles (a multiple of 16; the advice is 1-2x the sample's spatial size, so a patch
// touches at most 4 tiles), pixel-interleaved (one tile holds every band of its pixels: a spectrum
// is one range request), no overviews (classification reads full resolution), compressed.
// Values: the decoded float32 samples are stored exactly: 8/16-bit integer sources keep their type
// (invalid pixels become the scene's ignore value, written as nodata); all others are stored as
// Float32 with NaN for invalid pixels. Band metadata (wavelengths, FWHM, units, bad-band list) is
// kept. The output appears by one rename when complete; on error nothing is left behind.
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
#include "core/outputs.hpp"
#include "io/gdal_api.hpp"
#include "io/scene.hpp"

namespace hsipipe::cli {
namespace {

// OUT: a .tif name, never IN (--force or not), replaced only with --force, in an existing folder.
void check_cog_output(const std::string& in, const std::string& out, bool force) {
  const std::filesystem::path out_path(out);
  {
    std::string ext = out_path.extension().string();
    for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (ext != ".tif" && ext != ".tiff") throw ConfigError("hsipipe cog: OUT '" + out + "': expected a .tif or .tiff name");
  }
  {
    std::error_code ec;  // never the scene being read, --force or not
    if (std::filesystem::exists(in, ec) && std::filesystem::equivalent(in, out_path, ec))
      throw ConfigError("hsipipe cog: OUT '" + out + "' is IN: write the COG to another file");
  }
  outputs::check_output_file(out, force, "hsipipe cog OUT");
  const auto parent = out_path.has_parent_path() ? out_path.parent_path() : std::filesystem::path(".");
  if (!std::filesystem::is_directory(parent)) throw IoError(out, "the output directory does not exist");
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
  check_cog_output(in, out, vm["force"].as<bool>());

  const auto t0 = std::chrono::steady_clock::now();
  auto scene = io::open_scene(io::SceneSpec::parse(in));
  const std::size_t rows = scene->rows(), cols = scene->cols(), bands = scene->bands();
  if (rows > static_cast<std::size_t>(std::numeric_limits<int>::max()) ||
      cols > static_cast<std::size_t>(std::numeric_limits<int>::max()) || bands > 65535) {
    throw FormatError(in, "size", "too large for a GeoTIFF written by hsipipe cog");
  }
  io::CogOptions opts;
  opts.tile = tile;
  opts.compress = compress;
  opts.predictor = vm["predictor"].as<bool>();
  opts.level = level;
  const io::CogResult res = io::gdal_api().write_cog(*scene, opts, out);
  const auto& nodata = res.nodata;

  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto bytes = std::filesystem::file_size(out);
  const double decoded = static_cast<double>(rows * cols * bands) * 4.0;
  std::cout << "cog: " << out << ": " << rows << " x " << cols << " x " << bands << ", " << res.type_name
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

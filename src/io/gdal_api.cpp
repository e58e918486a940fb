// io/gdal_api: loading libhsipipe_gdal.so on first use (see gdal_api.hpp).
#include "io/gdal_api.hpp"

#include <dlfcn.h>

#include <atomic>
#include <filesystem>

#include "core/dl.hpp"
#include "core/error.hpp"

#ifdef HSIPIPE_WITH_GDAL
#include <gdal_version.h>  // the release built against (header only: nothing of GDAL is loaded)
#endif

namespace hsipipe::io {

namespace {

std::atomic<bool> g_loaded{false};

#if defined(HSIPIPE_WITH_GDAL) && !defined(HSIPIPE_GDAL_LINKED)
const GdalApi* load() {
  constexpr const char* kName = "libhsipipe_gdal.so";
  std::string path = kName;  // the library search path, unless found next to this library
  Dl_info self{};
  if (::dladdr(reinterpret_cast<void*>(&gdal_api), &self) != 0 && self.dli_fname) {
    const auto p = std::filesystem::path(self.dli_fname).parent_path() / kName;
    std::error_code ec;
    if (std::filesystem::exists(p, ec)) path = p.string();
  }
  void* h = load_library(path);  // a missing GDAL library is reported here, not in the middle of a read
  using Entry = const GdalApi* (*)();
  auto entry = reinterpret_cast<Entry>(::dlsym(h, "hsipipe_gdal_api"));
  if (!entry) throw IoError(path, "not hsipipe's GDAL reader (no hsipipe_gdal_api)");
  return entry();
}
#endif

}  // namespace

const GdalApi& gdal_api() {
#if !defined(HSIPIPE_WITH_GDAL)
  throw ConfigError("this hsipipe was built without GDAL (HSIPIPE_WITH_GDAL=OFF): GeoTIFF, COG and remote scenes are not available");
#elif defined(HSIPIPE_GDAL_LINKED)
  g_loaded = true;
  return *hsipipe_gdal_api();
#else
  static const GdalApi* api = load();  // a failed load throws and is tried again next time
  g_loaded = true;
  return *api;
#endif
}

std::string gdal_version() {
#ifdef HSIPIPE_WITH_GDAL
  if (g_loaded) return gdal_api().version();
  return GDAL_RELEASE_NAME;
#else
  return "";
#endif
}

}  // namespace hsipipe::io

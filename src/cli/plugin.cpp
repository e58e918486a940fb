#include "cli/plugin.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <vector>

namespace hsipipe::cli {

namespace {

#ifdef HSIPIPE_TRAIN_PLUGIN
std::string load_once() {
  namespace fs = std::filesystem;
  std::vector<fs::path> dirs;
  if (const char* d = std::getenv("HSIPIPE_PLUGIN_DIR"); d && *d) dirs.emplace_back(d);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path dir = exe.parent_path();
    dirs.push_back(dir);
    dirs.push_back(dir / ".." / "lib" / "hsipipe");
    dirs.push_back(dir / ".." / "lib");
  }
  std::string tried;
  for (const auto& d : dirs) {
    const fs::path p = d / HSIPIPE_TRAIN_PLUGIN;
    if (!fs::exists(p, ec)) {
      tried += (tried.empty() ? "" : ", ") + p.string();
      continue;
    }
    // RTLD_NOW: a missing symbol or library (libtorch) is reported here, not in the middle of a run.
    if (::dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL) != nullptr) return "";
    const char* why = ::dlerror();
    return p.string() + ": " + (why ? why : "dlopen failed");
  }
  return std::string(HSIPIPE_TRAIN_PLUGIN) + " not found (looked for " + tried + ")";
}
#else
std::string load_once() { return ""; }
#endif

}  // namespace

std::string load_train_plugin() {
  static const std::string result = load_once();
  return result;
}

}  // namespace hsipipe::cli

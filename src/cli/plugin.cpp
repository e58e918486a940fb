#include "cli/plugin.hpp"

#include <filesystem>
#include <system_error>

#include "core/dl.hpp"
#include "core/error.hpp"

namespace hsipipe::cli {

namespace {

#ifdef HSIPIPE_TRAIN_PLUGIN
std::string load_once() {
  const std::filesystem::path p = std::filesystem::path(executable_dir()) / HSIPIPE_TRAIN_PLUGIN;
  std::error_code ec;
  if (!std::filesystem::exists(p, ec)) return p.string() + ": not found (it is built next to the executable)";
  try {
    load_library(p.string());
    return "";
  } catch (const Error& e) {
    return e.what();
  }
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

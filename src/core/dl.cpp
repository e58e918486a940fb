#include "core/dl.hpp"

#include <dlfcn.h>

#include <filesystem>
#include <system_error>

#include "core/error.hpp"

namespace hsipipe {

void* load_library(const std::string& path) {
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* why = ::dlerror();
    throw IoError(path, std::string("cannot load: ") + (why ? why : "dlopen failed"));
  }
  return h;
}

std::string executable_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

}  // namespace hsipipe

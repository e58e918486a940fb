#pragma once
// core/dl: loading the parts of hsipipe that are shared libraries of their own (the training commands,
// the GDAL readers), on demand. Rank-local.
#include <string>

namespace hsipipe {

/// dlopen(path) with RTLD_NOW | RTLD_LOCAL, so that a missing symbol or dependency (libtorch, GDAL) is
/// reported here and not in the middle of a run. Throws IoError naming the path and the loader's reason.
void* load_library(const std::string& path);

/// The directory of the executable of this process (/proc/self/exe), or "" when unknown.
std::string executable_dir();

}  // namespace hsipipe

#pragma once
// cli/plugin: loads libhsipipe-train.so, the commands that need libtorch (train, report, plan, bench),
// only when one of them is asked for. Its commands register themselves into registry() when it loads.
// Every other command, on every rank, skips libtorch's start-up (`hsipipe report --help` 0.45 s against
// `folds --help` 0.01 s, perf stat); io/gdal_api.hpp does the same for GDAL. With BUILD_SHARED_LIBS=OFF
// everything links into the one executable and this loads nothing.
#include <string>

namespace hsipipe::cli {

/// Loads the training plugin once (later calls return the first result). Returns "" when it loaded or when
/// this build has none (static build, or built without libtorch); otherwise why it could not be loaded,
/// naming the path. Looked for next to the executable, where the build puts it.
std::string load_train_plugin();

/// The commands the plugin registers when it loads (they are not in registry() before)
inline constexpr const char* kPluginCommands[] = {"train", "report", "plan", "bench"};

}  // namespace hsipipe::cli

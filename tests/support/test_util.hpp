#pragma once
// Test helpers: temporary directories, the hsipipe binary, /usr/bin/python3, ../shared/data.
#include <filesystem>
#include <string>

namespace hsipipe::test {

/// A fresh directory under $TMPDIR (or /tmp) removed on destruction unless HSIPIPE_KEEP_TMP is set.
class TempDir {
 public:
  explicit TempDir(const std::string& tag = "t");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string str(const std::string& child = "") const { return child.empty() ? path_.string() : (path_ / child).string(); }

 private:
  std::filesystem::path path_;
};

struct RunResult {
  int status = -1;  ///< exit code, or 128+signal
  std::string output;  ///< stdout and stderr together
};
/// Runs a shell command line, capturing stdout+stderr.
RunResult run(const std::string& cmdline);

std::string env_or(const char* name, const std::string& fallback);
std::string hsipipe_bin();  ///< $HSIPIPE_BIN
std::string python();       ///< $HSIPIPE_PYTHON (/usr/bin/python3)
std::string source_dir();   ///< $HSIPIPE_SOURCE_DIR
/// ../shared/data path, or "" when missing (tests then SKIP with a message; under CI=true they FAIL).
std::string shared_data();
bool in_ci();

}  // namespace hsipipe::test

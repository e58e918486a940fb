#include "support/test_util.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <random>

namespace hsipipe::test {

TempDir::TempDir(const std::string& tag) {
  const char* base = std::getenv("TMPDIR");
  std::filesystem::path root = base ? base : "/tmp";
  std::random_device rd;
  for (int i = 0; i < 100; ++i) {
    auto p = root / ("hsipipe-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(rd() % 1000000));
    if (std::filesystem::create_directory(p)) {
      path_ = p;
      return;
    }
  }
  throw std::runtime_error("cannot create a temporary directory under " + root.string());
}

TempDir::~TempDir() {
  if (std::getenv("HSIPIPE_KEEP_TMP")) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

RunResult run(const std::string& cmdline) {
  RunResult r;
  const std::string full = "(" + cmdline + ") 2>&1";
  FILE* p = ::popen(full.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  return r;
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}
std::string hsipipe_bin() { return env_or("HSIPIPE_BIN", "hsipipe"); }
std::string python() { return env_or("HSIPIPE_PYTHON", "/usr/bin/python3"); }
std::string source_dir() { return env_or("HSIPIPE_SOURCE_DIR", "."); }
bool in_ci() { return env_or("CI", "") == "true"; }
std::string shared_data() {
  const std::string d = env_or("HSIPIPE_SHARED_DATA", source_dir() + "/../shared/data");
  return std::filesystem::exists(d + "/SalinasA.mat") ? d : "";
}

}  // namespace hsipipe::test

#include "core/error.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

namespace hsipipe {

FormatError::FormatError(const std::string& file, const std::string& field, const std::string& what)
    : Error(file + ": field '" + field + "': " + what), file_(file), field_(field) {}

IoError::IoError(const std::string& path, const std::string& op, int err)
    : Error(path + ": " + op + " failed: " + std::strerror(err)) {}

IoError::IoError(const std::string& path, const std::string& what) : Error(path + ": " + what) {}

void print_error_line(const std::string& line) noexcept {
  std::cerr.flush();  // whatever went through std::cerr first stays first
  const std::string text = line + "\n";
  for (std::size_t off = 0; off < text.size();) {
    const ssize_t n = ::write(STDERR_FILENO, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += static_cast<std::size_t>(n);
  }
}

IoError io_error_from(const std::filesystem::filesystem_error& e) {
  std::string w = e.what();  // "filesystem error: cannot rename: Invalid argument [p1] [p2]"
  if (const std::string pre = "filesystem error: "; w.rfind(pre, 0) == 0) w.erase(0, pre.size());
  if (const auto b = w.find(" ["); b != std::string::npos) w.erase(b);
  if (!e.path2().empty()) w += " (with " + e.path2().string() + ")";
  return IoError(e.path1().empty() ? std::string("(no path)") : e.path1().string(), w);
}

}  // namespace hsipipe

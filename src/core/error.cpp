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

void rethrow_with_context(const std::string& context) {
  try {
    throw;
  } catch (const FormatError& e) {
    const std::string prefix = e.file() + ": field '" + e.field() + "': ", what = e.what();
    throw FormatError(e.file(), e.field(), (what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what) + context);
  } catch (const ConfigError& e) {
    throw ConfigError(e.what() + context);
  } catch (const IoError& e) {
    const std::string w = e.what();  // "PATH: what"
    const auto colon = w.find(": ");
    if (colon == std::string::npos) throw IoError(w, context);
    throw IoError(w.substr(0, colon), w.substr(colon + 2) + context);
  } catch (const StaleError& e) {
    throw StaleError(e.what() + context);
  } catch (const MpiError& e) {
    throw MpiError(e.what() + context);
  } catch (const H5Error& e) {
    throw H5Error(e.what() + context);
  } catch (const Error& e) {
    throw Error(e.what() + context);
  }
}

namespace {
/// Length of the valid UTF-8 sequence at s[i] (1-4), or 0.
std::size_t utf8_length(const std::string& s, std::size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  const std::size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return 0;
  return n;
}
}  // namespace

std::string printable(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    const std::size_t n = utf8_length(text, i);
    if (n == 0 || (n == 1 && ((b < 0x20 && b != '\n' && b != '\t') || b == 0x7f))) {
      static const char* const hex = "0123456789abcdef";
      out += "\\x";
      out += hex[b >> 4];
      out += hex[b & 15];
      ++i;
      continue;
    }
    out.append(text, i, n);
    i += n;
  }
  return out;
}

void print_error_line(const std::string& line) noexcept {
  std::cerr.flush();  // whatever went through std::cerr first stays first
  std::string text;
  try {
    text = printable(line) + "\n";  // a file's raw bytes in a message never reach the terminal as they are
  } catch (...) {
    text = line + "\n";
  }
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

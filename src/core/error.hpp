#pragma once
// core/error: one base Error and one subclass per area. Every user-facing error names the
// file (or object) and the field it concerns, so a message alone tells the user what to fix.
#include <filesystem>
#include <stdexcept>
#include <string>

namespace hsipipe {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  /// Process exit code the CLI uses for this kind of error.
  virtual int exit_code() const noexcept { return 1; }
};

/// Bad command line or configuration value: raised before anything is written.
class ConfigError : public Error {
 public:
  using Error::Error;
  int exit_code() const noexcept override { return 2; }
};

/// A file whose content disagrees with its format (truncated, lying header, unknown type...).
class FormatError : public Error {
 public:
  FormatError(const std::string& file, const std::string& field, const std::string& what);
  const std::string& file() const noexcept { return file_; }
  const std::string& field() const noexcept { return field_; }
  int exit_code() const noexcept override { return 3; }

 private:
  std::string file_, field_;
};

/// Operating-system I/O failure (open, read, write, rename...), carrying errno's text.
class IoError : public Error {
 public:
  IoError(const std::string& path, const std::string& op, int err);
  IoError(const std::string& path, const std::string& what);
  int exit_code() const noexcept override { return 4; }
};

/// A cache or folds file that does not match what it claims or what it is used with.
class StaleError : public Error {
 public:
  using Error::Error;
  int exit_code() const noexcept override { return 5; }
};

/// The text for a std::bad_alloc, with its likely causes (the CLI's, and collective_step's after its step).
inline constexpr const char* kOutOfMemory =
    "out of memory: a buffer could not be allocated (this node has too little free memory: other jobs on it? "
    "a ulimit -v or Slurm --mem below what the job needs?)";

/// Writes `line` and a newline to stderr in one write(2), so that the lines of processes sharing the stream
/// (MPI ranks under mpiexec) never interleave inside a line, as `std::cerr << a << b` (a write per piece) did.
void print_error_line(const std::string& line) noexcept;

/// TEXT with control characters (but newline and tab) and bytes that are not UTF-8 written as \xNN: a header's
/// binary bytes quoted in a message reach the terminal as text (print_error_line applies it).
std::string printable(const std::string& text);

/// Inside a catch block: throws the exception being handled again, of the same hsipipe type (so the same exit
/// code), with `context` appended to its message ("... (scene list campaign.txt line 12)"); a std::bad_alloc
/// and other exceptions are rethrown as they are.
[[noreturn]] void rethrow_with_context(const std::string& context);

/// std::filesystem's error (create_directories, rename, ...) as an IoError naming the path first:
/// "PATH: cannot create directories: Not a directory".
IoError io_error_from(const std::filesystem::filesystem_error& e);

class MpiError : public Error {
 public:
  using Error::Error;
};
class H5Error : public Error {
 public:
  using Error::Error;
};
class NcclError : public Error {
 public:
  using Error::Error;
};

}  // namespace hsipipe

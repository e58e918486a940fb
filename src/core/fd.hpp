#pragma once
// core/fd: a file opened read-only, closed on destruction, with a pread loop that reads exactly the bytes
// asked for (EINTR retried; a short file is an IoError naming it). Rank-local.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <string>

#include "core/error.hpp"

namespace hsipipe {

class ReadFile {
 public:
  explicit ReadFile(const std::string& path) : path_(path), fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_ < 0) throw IoError(path, "open", errno);
  }
  ~ReadFile() { ::close(fd_); }
  ReadFile(const ReadFile&) = delete;
  ReadFile& operator=(const ReadFile&) = delete;
  int get() const noexcept { return fd_; }
  const std::string& path() const noexcept { return path_; }

  /// Reads bytes [offset, offset + bytes) into dst.
  void pread_all(void* dst, std::uint64_t bytes, std::uint64_t offset) const {
    auto* p = static_cast<char*>(dst);
    std::uint64_t done = 0;
    while (done < bytes) {
      const ssize_t r = ::pread(fd_, p + done, static_cast<std::size_t>(std::min<std::uint64_t>(bytes - done, 1u << 30)),
                                static_cast<off_t>(offset + done));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) throw IoError(path_, r < 0 ? "read" : "read (unexpected end of file)", r < 0 ? errno : EIO);
      done += static_cast<std::uint64_t>(r);
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace hsipipe

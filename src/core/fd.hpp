#pragma once
// core/fd: a file opened read-only, closed on destruction, with a pread loop that reads exactly the bytes
// asked for (EINTR retried; a short file is an IoError naming it); a read-only shared mapping of a file's
// bytes. Rank-local.
#include <fcntl.h>
#include <sys/mman.h>
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

/// A read-only shared mapping of bytes [offset, offset + len) of an open file (offset a multiple of the page
/// size), unmapped on destruction; empty (false) when len is 0 or the file cannot be mapped, and the caller
/// reads it instead. A page past the file's end, or one the disk cannot read, is SIGBUS when touched.
class ReadMapping {
 public:
  ReadMapping(int fd, std::uint64_t offset, std::uint64_t len) {
    if (len == 0) return;
    void* p = ::mmap(nullptr, static_cast<std::size_t>(len), PROT_READ, MAP_SHARED, fd, static_cast<off_t>(offset));
    if (p == MAP_FAILED) return;
    addr_ = static_cast<const unsigned char*>(p);
    len_ = len;
  }
  ~ReadMapping() {
    if (addr_) ::munmap(const_cast<unsigned char*>(addr_), static_cast<std::size_t>(len_));
  }
  ReadMapping(const ReadMapping&) = delete;
  ReadMapping& operator=(const ReadMapping&) = delete;
  const unsigned char* data() const noexcept { return addr_; }
  explicit operator bool() const noexcept { return addr_ != nullptr; }

 private:
  const unsigned char* addr_ = nullptr;
  std::uint64_t len_ = 0;
};

}  // namespace hsipipe

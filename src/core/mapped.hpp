#pragma once
// core/mapped: a file mapped read-only (MAP_SHARED, PROT_READ), unmapped on destruction. The pages are the
// page cache's: a mapping of a file larger than memory costs address space, not memory, and the kernel
// reclaims clean pages under pressure. Rank-local; the mapping may be read by many threads at once.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <string>
#include <utility>

#include "core/error.hpp"

namespace hsipipe {

class MappedFile {
 public:
  /// Maps the whole file (an empty file maps nothing: data() is nullptr).
  explicit MappedFile(const std::string& path) : path_(path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw IoError(path, "open", errno);
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int e = errno;
      ::close(fd);
      throw IoError(path, "fstat", e);
    }
    size_ = static_cast<std::uint64_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
      const int e = errno;
      ::close(fd);  // the mapping keeps the file
      if (p == MAP_FAILED) throw IoError(path, "mmap", e);
      data_ = static_cast<const char*>(p);
    } else {
      ::close(fd);
    }
  }
  ~MappedFile() {
    if (data_) ::munmap(const_cast<char*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const char* data() const noexcept { return data_; }
  std::uint64_t size() const noexcept { return size_; }
  const std::string& path() const noexcept { return path_; }

  /// madvise over the pages covering [offset, offset + bytes) (clipped to the file); advisory, errors ignored.
  void advise(std::uint64_t offset, std::uint64_t bytes, int advice) const noexcept {
    if (!data_ || offset >= size_ || bytes == 0) return;
    static const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    const std::uint64_t a = offset / page * page, e = std::min(size_, offset + bytes);
    (void)::madvise(const_cast<char*>(data_) + a, e - a, advice);
  }

 private:
  std::string path_;
  const char* data_ = nullptr;
  std::uint64_t size_ = 0;
};

}  // namespace hsipipe

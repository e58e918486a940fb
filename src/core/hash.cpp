#include "core/hash.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <vector>

#include "core/error.hpp"

namespace hsipipe {

std::uint64_t xxh3_64(const void* data, std::size_t n, std::uint64_t seed) noexcept {
  return XXH3_64bits_withSeed(data, n, seed);
}

std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

struct Xxh3Stream::State {
  XXH3_state_t* st = XXH3_createState();
  ~State() { XXH3_freeState(st); }
};

Xxh3Stream::Xxh3Stream(std::uint64_t seed) : s_(std::make_unique<State>()) {
  if (!s_->st) throw Error("XXH3_createState failed");
  XXH3_64bits_reset_withSeed(s_->st, seed);
}
Xxh3Stream::~Xxh3Stream() = default;
void Xxh3Stream::update(const void* data, std::size_t n) { XXH3_64bits_update(s_->st, data, n); }
std::uint64_t Xxh3Stream::digest() const { return XXH3_64bits_digest(s_->st); }

struct Sha256::State {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ~State() { EVP_MD_CTX_free(ctx); }
};

Sha256::Sha256() : s_(std::make_unique<State>()) {
  if (!s_->ctx || EVP_DigestInit_ex(s_->ctx, EVP_sha256(), nullptr) != 1) throw Error("SHA-256 init failed");
}
Sha256::~Sha256() = default;
void Sha256::update(const void* data, std::size_t n) {
  if (EVP_DigestUpdate(s_->ctx, data, n) != 1) throw Error("SHA-256 update failed");
}
std::string Sha256::hex_digest() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(s_->ctx, md, &len) != 1) throw Error("SHA-256 final failed");
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(2 * len);
  for (unsigned i = 0; i < len; ++i) {
    out.push_back(digits[md[i] >> 4]);
    out.push_back(digits[md[i] & 15]);
  }
  return out;
}

std::uint64_t xxh3_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError(path, "open", errno);
  Xxh3Stream h;
  // A buffer that stays in the core's L2: the copy out of the page cache and the hash then cost one pass
  // over memory instead of three (an 8 MiB buffer made the hash thread ~2x dearer beside a decode).
  std::vector<char> buf(std::size_t{256} << 10);
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(fd);
      throw IoError(path, "read", e);
    }
    if (n == 0) break;
    h.update(buf.data(), static_cast<std::size_t>(n));
  }
  ::close(fd);
  return h.digest();
}

}  // namespace hsipipe

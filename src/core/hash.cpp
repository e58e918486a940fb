#include "core/hash.hpp"

#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/error.hpp"
#include "core/fd.hpp"
#include "core/fs.hpp"

namespace hsipipe {

namespace {
constexpr std::size_t kHashBufferBytes = std::size_t{256} << 10;
}  // namespace

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
  const ReadFile f(path);
  Xxh3Stream h;
  // A buffer that stays in the core's L2: the copy out of the page cache and the hash then cost one pass
  // over memory instead of three (an 8 MiB buffer made the hash thread ~2x dearer beside a decode).
  std::vector<char> buf(kHashBufferBytes);
  for (;;) {
    const ssize_t n = ::read(f.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw IoError(path, "read", errno);
    if (n == 0) break;
    h.update(buf.data(), static_cast<std::size_t>(n));
  }
  return h.digest();
}

std::vector<std::uint64_t> xxh3_file_chunks(const std::string& path, std::uint64_t file_bytes, std::uint64_t c0,
                                            std::uint64_t c1) {
  std::vector<std::uint64_t> out;
  if (c0 >= c1) return out;
  const ReadFile f(path);
  // A file shorter than file_bytes changed since it was described: an IoError naming it, checked up front.
  struct stat st{};
  if (::fstat(f.get(), &st) != 0) throw IoError(path, "fstat", errno);
  const std::uint64_t last = std::min(file_bytes, c1 * kHashChunkBytes);
  if (static_cast<std::uint64_t>(st.st_size) < last)
    throw IoError(path, "read (unexpected end of file: " + std::to_string(st.st_size) + " bytes, " +
                            std::to_string(file_bytes) + " expected)", EIO);
  // Chunks are read through a buffer that stays in L2 (the copy out of the page cache and the hash are one
  // pass over memory). Hashing them mapped instead (HSIPIPE_HASH_PREAD=0 until issue 34, see
  // docs/KNOBS.md) was faster on one VM (0.08 s against 0.14-0.18 s for the benchmark's 448 MiB scene),
  // slower on the next (the 1-rank npy decode 1.17 -> 1.00 s with the buffer, 2 Dec 2026), and turned a
  // file truncated while it was hashed into SIGBUS instead of this IoError.
  std::vector<char> buf;
  for (std::uint64_t c = c0; c < c1; ++c) {
    const std::uint64_t begin = c * kHashChunkBytes, end = std::min(file_bytes, begin + kHashChunkBytes);
    // A buffer that stays in the core's L2: the copy out of the page cache and the hash cost one pass
    buf.resize(kHashBufferBytes);
    Xxh3Stream h;
    for (std::uint64_t off = begin; off < end; off += buf.size()) {
      const std::uint64_t n = std::min<std::uint64_t>(buf.size(), end - off);
      f.pread_all(buf.data(), n, off);
      h.update(buf.data(), static_cast<std::size_t>(n));
    }
    out.push_back(h.digest());
  }
  return out;
}

std::uint64_t combine_chunk_hashes(const std::vector<std::uint64_t>& chunk_hashes) {
  std::vector<unsigned char> le(chunk_hashes.size() * 8);
  for (std::size_t i = 0; i < chunk_hashes.size(); ++i)
    for (int b = 0; b < 8; ++b) le[i * 8 + static_cast<std::size_t>(b)] = static_cast<unsigned char>(chunk_hashes[i] >> (8 * b));
  return xxh3_64(le.data(), le.size());
}

std::uint64_t xxh3_chunked_file(const std::string& path) {
  const std::uint64_t size = fs::stat_file(path).size;
  return combine_chunk_hashes(xxh3_file_chunks(path, size, 0, hash_chunk_count(size)));
}

}  // namespace hsipipe

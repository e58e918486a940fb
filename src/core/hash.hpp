#pragma once
// core/hash: xxh3-64 (libxxhash) for data checksums, SHA-256 (OpenSSL) for fingerprints.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace hsipipe {

/// One-shot XXH3-64 of a buffer.
std::uint64_t xxh3_64(const void* data, std::size_t n, std::uint64_t seed = 0) noexcept;
std::string hex64(std::uint64_t v);  ///< 16 lower-case hex digits

/// Streaming XXH3-64.
class Xxh3Stream {
 public:
  explicit Xxh3Stream(std::uint64_t seed = 0);
  ~Xxh3Stream();
  Xxh3Stream(const Xxh3Stream&) = delete;
  Xxh3Stream& operator=(const Xxh3Stream&) = delete;
  void update(const void* data, std::size_t n);
  std::uint64_t digest() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

/// Streaming SHA-256, hex digest.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, std::size_t n);
  void update(std::string_view s) { update(s.data(), s.size()); }
  std::string hex_digest();  ///< finalises; 64 lower-case hex digits

 private:
  struct State;
  std::unique_ptr<State> s_;
};

/// XXH3-64 of a whole file, streamed; throws IoError naming the path.
std::uint64_t xxh3_file(const std::string& path);

}  // namespace hsipipe

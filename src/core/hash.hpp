#pragma once
// core/hash: xxh3-64 (libxxhash) for data checksums, SHA-256 (OpenSSL) for fingerprints.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

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

/// Content hash of a source file (decode manifests, `verify --deep`), computable by many ranks at once:
/// the file is cut into chunks of kHashChunkBytes (the last one shorter), each chunk is hashed with
/// XXH3-64, and the file's hash is the XXH3-64 of those values stored as little-endian u64 (an empty
/// file: of no bytes). The value does not depend on who hashed which chunk. In Python:
///   xxh3_64(b"".join(xxh3_64(c).to_bytes(8, "little") for c in chunks_of(data, 16 << 20)))
inline constexpr std::uint64_t kHashChunkBytes = std::uint64_t{16} << 20;
inline std::uint64_t hash_chunk_count(std::uint64_t file_bytes) {
  return (file_bytes + kHashChunkBytes - 1) / kHashChunkBytes;
}
/// XXH3-64 of chunks [c0, c1) of a file of `file_bytes` bytes, read through an L2-sized buffer; throws IoError
/// naming the path (also when the file is shorter than `file_bytes`: it changed, or shrinks while it is read).
std::vector<std::uint64_t> xxh3_file_chunks(const std::string& path, std::uint64_t file_bytes, std::uint64_t c0,
                                            std::uint64_t c1);
/// The file hash from all of its chunk hashes, in order.
std::uint64_t combine_chunk_hashes(const std::vector<std::uint64_t>& chunk_hashes);
/// The same, hashing every chunk on this thread.
std::uint64_t xxh3_chunked_file(const std::string& path);

}  // namespace hsipipe

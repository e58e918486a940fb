#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "core/hash.hpp"
#include "support/test_util.hpp"

TEST_CASE("SHA-256 matches the FIPS 180-2 test vector") {
  hsipipe::Sha256 h;
  h.update("abc");
  REQUIRE(h.hex_digest() == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("XXH3-64 streaming equals one-shot and the published empty-input value") {
  REQUIRE(hsipipe::hex64(hsipipe::xxh3_64("", 0)) == "2d06800538d394c2");
  std::string s(100000, 'x');
  for (std::size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>(i * 31 + 7);
  hsipipe::Xxh3Stream st;
  st.update(s.data(), 1234);
  st.update(s.data() + 1234, s.size() - 1234);
  REQUIRE(st.digest() == hsipipe::xxh3_64(s.data(), s.size()));
}

TEST_CASE("chunked file hash: chunks, their order, an empty file, a short file") {
  const hsipipe::test::TempDir dir("hash");
  auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir.path() / name, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return dir.str(name);
  };
  // two whole chunks and one byte: three chunk hashes, combined as little-endian u64
  std::string s(2 * hsipipe::kHashChunkBytes + 1, '\0');
  for (std::size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>((i * 2654435761u) >> 13);
  const std::string big = write("big", s);
  REQUIRE(hsipipe::hash_chunk_count(s.size()) == 3);
  std::vector<std::uint64_t> want;
  for (std::uint64_t c = 0; c < 3; ++c) {
    const std::uint64_t b = c * hsipipe::kHashChunkBytes, n = std::min<std::uint64_t>(hsipipe::kHashChunkBytes, s.size() - b);
    want.push_back(hsipipe::xxh3_64(s.data() + b, n));
  }
  CHECK(hsipipe::xxh3_file_chunks(big, s.size(), 0, 3) == want);
  CHECK(hsipipe::xxh3_file_chunks(big, s.size(), 1, 3) == std::vector<std::uint64_t>(want.begin() + 1, want.end()));
  CHECK(hsipipe::xxh3_file_chunks(big, s.size(), 2, 3) == std::vector<std::uint64_t>{want[2]});
  // a file shorter than its recorded size changed while hashing: an error naming it
  CHECK_THROWS_WITH(hsipipe::xxh3_file_chunks(big, s.size() + 5, 2, 3), Catch::Contains("big"));
  unsigned char le[24];
  for (int i = 0; i < 24; ++i) le[i] = static_cast<unsigned char>(want[static_cast<std::size_t>(i / 8)] >> (8 * (i % 8)));
  CHECK(hsipipe::combine_chunk_hashes(want) == hsipipe::xxh3_64(le, sizeof le));
  CHECK(hsipipe::xxh3_chunked_file(big) == hsipipe::combine_chunk_hashes(want));
  CHECK(hsipipe::xxh3_chunked_file(big) != hsipipe::xxh3_file(big));  // not the whole-file hash
  // an empty file: no chunk, the hash of no bytes
  CHECK(hsipipe::xxh3_chunked_file(write("empty", "")) == hsipipe::xxh3_64("", 0));
  // a file shorter than its recorded size changed while hashing: an error naming it
  CHECK_THROWS_WITH(hsipipe::xxh3_file_chunks(write("short", "abc"), 10, 0, 1), Catch::Contains("short"));
}

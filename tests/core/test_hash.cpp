#include <catch2/catch.hpp>

#include "core/hash.hpp"

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

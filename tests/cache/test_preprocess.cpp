// Unit tests of the pieces of decode that need no scene reader: band lists, statistics merging,
// the exact covariance accumulator, patch cutting, value storage, .npy headers.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "cache/npy.hpp"
#include "cache/preprocess.hpp"
#include "core/error.hpp"
#include "core/half.hpp"
#include "support/test_util.hpp"

using namespace hsipipe;
using namespace hsipipe::cache;

TEST_CASE("parse_band_list: 1-based ranges, errors name --drop-bands") {
  CHECK(parse_band_list("108-112,154-167,224", 224).size() == 5 + 14 + 1);
  CHECK(parse_band_list("3, 1-2 ,2", 5) == std::vector<int>{0, 1, 2});
  CHECK(parse_band_list("", 5).empty());
  CHECK(parse_band_list("  ", 5).empty());
  CHECK_THROWS_WITH(parse_band_list("1,,2", 5), Catch::Contains("--drop-bands: an empty entry"));
  CHECK_THROWS_WITH(parse_band_list("1,2,", 5), Catch::Contains("--drop-bands: an empty entry"));
  CHECK(kept_bands(parse_band_list("2-4", 5), 5) == std::vector<int>{0, 4});
  CHECK_THROWS_AS(parse_band_list("0", 5), ConfigError);
  CHECK_THROWS_WITH(parse_band_list("4-9", 5), Catch::Contains("out of range") && Catch::Contains("--drop-bands"));
  CHECK_THROWS_AS(parse_band_list("5-3", 5), ConfigError);
  CHECK_THROWS_AS(parse_band_list("a-b", 5), ConfigError);
  CHECK_THROWS_AS(kept_bands(parse_band_list("1-5", 5), 5), ConfigError);
  CHECK_THROWS_WITH(parse_band_list("1,4-9", 5), Catch::Contains("band 9 (in '4-9')"));
  CHECK_THROWS_WITH(parse_band_list("0-2", 5), Catch::Contains("1-based"));
  CHECK_THROWS_AS(parse_band_list("99999999999", 5), ConfigError);  // not a long overflow
}

TEST_CASE("canonical_band_list: one spelling per band set (what the manifest records)") {
  CHECK(canonical_band_list("108-112,154-167,224") == "108-112,154-167,224");
  CHECK(canonical_band_list("224, 154-167,108-112") == "108-112,154-167,224");
  CHECK(canonical_band_list("1,2") == "1-2");
  CHECK(canonical_band_list("3,1-2,2") == "1-3");         // adjacent and overlapping ranges merge
  CHECK(canonical_band_list("5-9,1-6,12,11") == "1-9,11-12");
  CHECK(canonical_band_list("7-7") == "7");
  CHECK(canonical_band_list("") == "");
  CHECK(canonical_band_list("  ") == "");
  CHECK_THROWS_AS(canonical_band_list("1,,2"), ConfigError);
  CHECK_THROWS_AS(canonical_band_list("5-3"), ConfigError);
  CHECK_THROWS_AS(canonical_band_list("0"), ConfigError);
  // the same band set as parse_band_list, for any spelling
  for (const char* t : {"3, 1-2 ,2", "5-9,1-6,12,11", "224,1,2,3,100-110"})
    CHECK(parse_band_list(canonical_band_list(t), 224) == parse_band_list(t, 224));
}

TEST_CASE("BandStats: Welford + Chan merge equal a two-pass float64 computation") {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(1000.0f, 50.0f);
  const int B = 3;
  std::vector<float> data(3000 * B);
  for (auto& v : data) v = nd(rng);
  BandStats whole(B), a(B), b(B), c(B);
  for (int i = 0; i < 3000; ++i) {
    whole.add(&data[static_cast<std::size_t>(i) * B]);
    (i < 1000 ? a : i < 1700 ? b : c).add(&data[static_cast<std::size_t>(i) * B]);
  }
  a.merge(b);
  a.merge(c);
  for (int k = 0; k < B; ++k) {
    double mean = 0, m2 = 0, mn = 1e30, mx = -1e30;
    for (int i = 0; i < 3000; ++i) mean += data[static_cast<std::size_t>(i) * B + k];
    mean /= 3000;
    for (int i = 0; i < 3000; ++i) {
      const double x = data[static_cast<std::size_t>(i) * B + k];
      m2 += (x - mean) * (x - mean);
      mn = std::min(mn, x);
      mx = std::max(mx, x);
    }
    CHECK(a.n == 3000);
    CHECK(a.mean[k] == Approx(mean).epsilon(1e-13));
    CHECK(a.variance()[k] == Approx(m2 / 3000).epsilon(1e-10));
    CHECK(whole.mean[k] == Approx(mean).epsilon(1e-13));
    CHECK(a.min[k] == mn);
    CHECK(a.max[k] == mx);
  }
  std::vector<double> packed;
  a.pack(packed);
  const BandStats u = BandStats::unpack(packed.data() + 1, B);  // unpack skips nothing: n first
  (void)u;
  const BandStats v = BandStats::unpack(packed.data(), B);
  CHECK(v.n == a.n);
  CHECK(v.m2 == a.m2);
}

TEST_CASE("FixedSym: sums are exact, so independent of order and grouping") {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> ud(-3, 3);
  const int B = 4;
  std::vector<std::vector<double>> mats(50, std::vector<double>(B * B));
  for (auto& m : mats)
    for (int i = 0; i < B; ++i)
      for (int j = i; j < B; ++j) m[static_cast<std::size_t>(i * B + j)] = m[static_cast<std::size_t>(j * B + i)] = ud(rng) * 1e3;
  FixedSym fwd(B), g1(B), g2(B), rev(B);
  for (std::size_t i = 0; i < mats.size(); ++i) fwd.add(mats[i].data());
  for (std::size_t i = mats.size(); i-- > 0;) rev.add(mats[i].data());
  for (std::size_t i = 0; i < mats.size(); ++i) (i % 3 ? g1 : g2).add(mats[i].data());
  FixedSym merged = FixedSym::unpack(g2.pack().data(), B);
  merged.add(g1);
  CHECK(fwd.pack() == rev.pack());
  CHECK(fwd.pack() == merged.pack());
  const auto d = fwd.to_double(1.0);
  double direct = 0;
  for (const auto& m : mats) direct += m[1];
  CHECK(d[1] == Approx(direct).epsilon(1e-9));
  CHECK(d[4] == d[1]);  // symmetric
}

TEST_CASE("FixedSym: an entry or a sum beyond its range throws, never wraps") {
  const int B = 2;
  std::vector<double> big(B * B, 0x1p79);  // each within range (2^119 units of 2^-40), 2^8 of them are not
  FixedSym acc(B), other(B);
  bool threw = false;
  for (int i = 0; i < 300 && !threw; ++i) {
    try {
      acc.add(big.data());
    } catch (const hsipipe::Error&) {
      threw = true;
      CHECK(i >= 250);  // 2^127 / 2^119 = 256 additions fit
    }
  }
  CHECK(threw);
  for (int i = 0; i < 200; ++i) other.add(big.data());
  FixedSym again = FixedSym::unpack(other.pack().data(), B);
  CHECK_THROWS_AS(again.add(other), hsipipe::Error);  // merging ranks' sums: 400 x 2^119 > 2^127
  std::vector<double> huge(B * B, 0x1p81);
  CHECK_THROWS_AS(FixedSym(B).add(huge.data()), hsipipe::Error);
}

TEST_CASE("cut_patch: reflect mirrors without repeating the edge, zero pads") {
  RowWindow w;
  w.row0 = 0;
  w.nrows = w.scene_rows = 4;
  w.cols = 5;
  w.bands = 2;
  for (std::size_t r = 0; r < 4; ++r)
    for (std::size_t c = 0; c < 5; ++c) {
      w.data.push_back(static_cast<float>(10 * r + c));
      w.data.push_back(static_cast<float>(-(10 * static_cast<int>(r) + static_cast<int>(c))));
    }
  std::vector<float> out(2 * 9);
  cut_patch(w, 0, 0, 3, Border::reflect, out.data());
  // rows -1,0,1 -> 1,0,1; cols -1,0,1 -> 1,0,1 (numpy.pad mode='reflect')
  const std::vector<float> band0 = {11, 10, 11, 1, 0, 1, 11, 10, 11};
  for (int i = 0; i < 9; ++i) {
    CHECK(out[static_cast<std::size_t>(i)] == band0[static_cast<std::size_t>(i)]);
    CHECK(out[9 + static_cast<std::size_t>(i)] == -band0[static_cast<std::size_t>(i)]);
  }
  cut_patch(w, 3, 4, 3, Border::zero, out.data());
  const std::vector<float> z0 = {23, 24, 0, 33, 34, 0, 0, 0, 0};
  for (int i = 0; i < 9; ++i) CHECK(out[static_cast<std::size_t>(i)] == z0[static_cast<std::size_t>(i)]);
}

TEST_CASE("Preprocessor: (x - shift) / scale in float64, then PCA projection") {
  Preprocessor p;
  p.kept = {0, 1};
  p.shift = {1.0, 2.0};
  p.scale = {2.0, 4.0};
  float in[2] = {5.0f, 10.0f}, out[2];
  p.apply(in, out);
  CHECK(out[0] == 2.0f);
  CHECK(out[1] == 2.0f);
  p.pca_k = 1;
  p.pca_mean = {1.0, 0.5};
  p.components = {0.6, 0.8};
  p.apply(in, out);
  CHECK(out[0] == Approx(0.6 * 1.0 + 0.8 * 1.5));
  float nan_in[2] = {NAN, NAN};  // an invalid pixel (inside a patch or the cube): stored as 0
  p.apply(nan_in, out);
  CHECK(out[0] == 0.0f);
  p.pca_k = 0;
  p.apply(nan_in, out);
  CHECK((out[0] == 0.0f && out[1] == 0.0f));
}

TEST_CASE("store_values: float16 is numpy's round-to-nearest-even") {
  const float in[4] = {1.0f, 65504.0f, 1.0f / 3.0f, -2.5f};
  std::uint16_t h[4];
  store_values(in, 4, DType::f16, h);
  CHECK(h[0] == 0x3c00);
  CHECK(h[1] == 0x7bff);
  CHECK(h[2] == 0x3555);
  CHECK(half_to_float(h[3]) == -2.5f);
  CHECK_THROWS_AS(store_values(in, 1, DType::i16, h), ConfigError);
}

TEST_CASE("npy: header round trip and truncation is StaleError") {
  test::TempDir dir("npy");
  const std::vector<float> v = {1, 2, 3, 4, 5, 6};
  write_npy(dir.str("a.npy"), DType::f32, {2, 3}, v.data());
  NpyHeader h;
  const auto bytes = read_npy(dir.str("a.npy"), DType::f32, &h);
  CHECK(h.shape == std::vector<std::uint64_t>{2, 3});
  CHECK(h.data_offset % 64 == 0);
  CHECK(bytes.size() == 24);
  std::filesystem::resize_file(dir.str("a.npy"), h.data_offset + 10);
  CHECK_THROWS_AS(read_npy_header(dir.str("a.npy")), StaleError);
}

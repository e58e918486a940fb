// GDAL reader against numpy on the raw ENVI source and GDAL's Python bindings: GeoTIFFs written by
// gdal_translate, tiled and striped, DEFLATE/LZW/ZSTD/none, pixel and band interleaved, with nodata.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>

#include "io/format_check.hpp"
#include "io/readers.hpp"

using namespace hsipipe;
using hsipipe::test::fixtures;

TEST_CASE("GeoTIFF variants decode to the ENVI scene they were made from", "[gdal]") {
  const auto& m = fixtures("gdal").manifest;
  int n = 0;
  for (const auto& e : m.at("scenes")) {
    const std::string name = e.at("name");
    if (name.rfind("labels", 0) == 0) continue;
    for (std::size_t block : {1, 5, 16}) {
      auto s = test::check_scene(e, block);
      CHECK(s->format() == "GTiff");
    }
    ++n;
  }
  CHECK(n == 14);
}

TEST_CASE("GeoTIFF metadata: wavelengths, nodata, storage details", "[gdal]") {
  const auto& m = fixtures("gdal").manifest;
  const auto& e = test::entry(m, "i16nd_tiled_deflate_pixel");
  auto s = io::open_scene(io::SceneSpec::parse(e.at("spec")));
  CHECK(s->source_type() == DType::i16);
  CHECK(s->band_info().wavelengths == e.at("wavelengths").get<std::vector<double>>());
  CHECK(s->band_info().wavelength_units == "Nanometers");
  REQUIRE(s->ignore_value().has_value());
  CHECK(*s->ignore_value() == -1.0);
  const auto details = s->details();  // returned by value: keep one copy for begin()/end()
  std::map<std::string, std::string> d(details.begin(), details.end());
  CHECK(d["compression"] == "DEFLATE");
  CHECK(d["interleave"] == "PIXEL");
  CHECK(d["blocks"] == "16 x 16 (tiled)");
  auto striped = io::open_scene(io::SceneSpec::parse(test::entry(m, "i16_striped_lzw_band").at("spec")));
  const auto details2 = striped->details();
  std::map<std::string, std::string> d2(details2.begin(), details2.end());
  CHECK(d2["interleave"] == "BAND");
  CHECK(d2["blocks"] == "53 x 5 (striped)");
  // Compressed block sizes are what bytes_read() counts for GeoTIFF.
  std::vector<float> all(s->rows() * s->cols() * s->bands());
  s->read_rows(0, s->rows(), all.data());
  CHECK(s->bytes_read() > 0);
  CHECK(s->bytes_read() < all.size() * sizeof(std::int16_t));
  // nodata in band 2 of pixel (3, 4) only, in every band of pixel (20, 50): with band 2 not deciding validity
  // the first is valid, the second is not
  const std::size_t B = s->bands(), W = s->cols();
  CHECK(std::isnan(all[(3 * W + 4) * B]));
  std::vector<std::uint8_t> counts(B, 1);
  counts[2] = 0;
  s->set_validity_bands(counts);
  s->read_rows(0, s->rows(), all.data());
  CHECK(all[(3 * W + 4) * B + 2] == -1.0f);
  CHECK_FALSE(std::isnan(all[(3 * W + 4) * B]));
  CHECK(std::isnan(all[(20 * W + 50) * B]));
}

TEST_CASE("GeoTIFF concurrent block reads use separate dataset handles", "[gdal]") {
  const auto& m = fixtures("gdal").manifest;
  test::check_concurrent(test::entry(m, "i16_tiled_deflate_pixel"));
  test::check_concurrent(test::entry(m, "i16_tiled_zstd_band"));
}

TEST_CASE("GeoTIFF label rasters; integer nodata stays an integer label", "[gdal][labels]") {
  const auto& m = fixtures("gdal").manifest;
  test::check_labels(test::entry(m, "labels_plain"));
  // nodata = 255: read_rows() masks it to NaN (Scene contract), read_labels() gives back 255.
  test::check_scene(test::entry(m, "labels_nodata"));
  const io::LabelImage img = test::check_labels(test::entry(m, "labels_nodata"));
  CHECK(img.at(0, 0) == 255);
}

TEST_CASE("check_labels_match rejects a label raster of another size", "[gdal][labels][errors]") {
  const auto& m = fixtures("gdal").manifest;
  auto scene = io::open_scene(io::SceneSpec::parse(m.at("scene_for_labels").get<std::string>()));
  const io::LabelImage good = io::read_labels(io::SceneSpec::parse(test::entry(m, "labels_plain").at("spec")));
  CHECK_NOTHROW(io::check_labels_match(*scene, good));
  const io::LabelImage shorter = io::read_labels(io::SceneSpec::parse(m.at("labels_short").get<std::string>()));
  CHECK(shorter.rows == scene->rows() - 1);
  const std::string msg = test::error_of([&] { io::check_labels_match(*scene, shorter); });
  CHECK(msg.find("labels_short.tif") != std::string::npos);
  CHECK(msg.find("36 x 53") != std::string::npos);
  CHECK(msg.find("37 x 53") != std::string::npos);
  CHECK_THROWS_AS(io::check_labels_match(*scene, shorter), FormatError);
}

TEST_CASE("GDAL bad input", "[gdal][errors]") {
  test::check_errors(fixtures("gdal").manifest);
}

namespace {
double cpu_seconds(int who) {
  rusage u{};
  getrusage(who, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}
}  // namespace

// Not a test: `test_io_formats "[.bench]"` times block reads of a tiled DEFLATE GeoTIFF against
// gdal_translate to raw ENVI (both decode every tile once). Prints wall and CPU seconds and MB/s of
// decoded int16 data; CPU time is the fairer figure on a shared, loaded machine.
TEST_CASE("bench: tiled DEFLATE GeoTIFF block reads vs gdal_translate to raw", "[.bench]") {
  const std::string size = test::env_or("HSIPIPE_BENCH_SIZE", "512 512 224");
  const auto& m = fixtures("bench", size).manifest;
  const auto& e = test::entry(m, "bench");
  const double mb = e.at("raw_bytes").get<double>() / 1e6;
  const std::string tif = e.at("spec");
  using clock = std::chrono::steady_clock;
  for (std::size_t block : {16, 64, 256}) {
    auto s = io::open_scene(io::SceneSpec::parse(tif));
    std::vector<float> buf(block * s->cols() * s->bands());
    const double c0 = cpu_seconds(RUSAGE_SELF);
    const auto t0 = clock::now();
    for (std::size_t r0 = 0; r0 < s->rows(); r0 += block) s->read_rows(r0, std::min(s->rows(), r0 + block), buf.data());
    const double t = std::chrono::duration<double>(clock::now() - t0).count(), c = cpu_seconds(RUSAGE_SELF) - c0;
    std::printf("hsipipe read_rows, %3zu-row blocks: wall %.2f s (%.1f MB/s), cpu %.2f s (%.1f MB/s); %.1f MB read\n",
                block, t, mb / t, c, mb / c, static_cast<double>(s->bytes_read()) / 1e6);
  }
  const double c0 = cpu_seconds(RUSAGE_CHILDREN);
  const auto t0 = clock::now();
  const auto r = test::run("gdal_translate -q -of ENVI " + tif + " " + tif + "_raw.img");
  const double t = std::chrono::duration<double>(clock::now() - t0).count(), c = cpu_seconds(RUSAGE_CHILDREN) - c0;
  REQUIRE(r.status == 0);
  std::printf("gdal_translate -of ENVI (decode + write raw): wall %.2f s (%.1f MB/s), cpu %.2f s (%.1f MB/s)\n", t,
              mb / t, c, mb / c);
}

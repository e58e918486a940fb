// HDF5 input reader against h5py: every integer/float type in each axis order (hwb, bhw, whb).
#include "io/format_check.hpp"
#include "io/readers.hpp"

using namespace hsipipe;
using hsipipe::test::fixtures;

TEST_CASE("HDF5 every type in every axis order equals h5py", "[hdf5]") {
  const auto& m = fixtures("hdf5").manifest;
  int n = 0;
  for (const auto& e : m.at("scenes")) {
    const std::string name = e.at("name");
    if (name == "h5_labels" || name == "h5_meta") continue;
    auto s = test::check_scene(e, 2);
    CHECK(s->format() == "HDF5");
    ++n;
  }
  CHECK(n == 33);  // 11 types x 3 axis orders
}

TEST_CASE("HDF5 source types and storage details", "[hdf5]") {
  const auto& m = fixtures("hdf5").manifest;
  auto s = io::open_scene([&] {
    auto spec = io::SceneSpec::parse(test::entry(m, "h5_float16_whb").at("spec"));
    spec.axes = "whb";
    return spec;
  }());
  CHECK(s->source_type() == DType::f16);
  bool chunked = false;
  for (const auto& [k, v] : s->details())
    if (k == "layout") chunked = v.rfind("chunked", 0) == 0;
  CHECK(chunked);
}

TEST_CASE("HDF5 attributes: wavelengths and the ignore value", "[hdf5]") {
  const auto& m = fixtures("hdf5").manifest;
  const auto& e = test::entry(m, "h5_meta");
  auto s = test::check_scene(e, 2);
  CHECK(s->band_info().wavelengths == e.at("wavelengths").get<std::vector<double>>());
  CHECK(s->band_info().wavelength_units == "Nanometers");
  REQUIRE(s->ignore_value().has_value());
  CHECK(*s->ignore_value() == -999.0);
  std::vector<float> row(s->cols() * s->bands());
  s->read_rows(1, 2, row.data());
  for (std::size_t b = 0; b < s->bands(); ++b) CHECK(std::isnan(row[2 * s->bands() + b]));
  // pixel (1, 2) holds -999 in band 0 only: without band 0 deciding validity it is a valid pixel
  std::vector<std::uint8_t> counts(s->bands(), 1);
  counts[0] = 0;
  s->set_validity_bands(counts);
  s->read_rows(1, 2, row.data());
  CHECK(row[2 * s->bands()] == -999.0f);
  for (std::size_t b = 1; b < s->bands(); ++b) CHECK_FALSE(std::isnan(row[2 * s->bands() + b]));
}

TEST_CASE("HDF5 concurrent block reads", "[hdf5]") {
  const auto& m = fixtures("hdf5").manifest;
  test::check_concurrent(test::entry(m, "h5_int16_bhw"));
  test::check_concurrent(test::entry(m, "h5_float32_whb"));
}

TEST_CASE("HDF5 label raster: the only 2-D dataset is the default", "[hdf5][labels]") {
  const auto& m = fixtures("hdf5").manifest;
  test::check_scene(test::entry(m, "h5_labels"));
  test::check_labels(test::entry(m, "h5_labels"));
}

TEST_CASE("HDF5 bad input names the file, the dataset and what is wrong", "[hdf5][errors]") {
  const auto& m = fixtures("hdf5").manifest;
  test::check_errors(m);
  test::TempDir dir("h5bad");
  const std::string msg = test::error_of([&] { io::open_hdf5(io::SceneSpec::parse(dir.str("nope.h5:/x"))); });
  CHECK(msg.find("nope.h5") != std::string::npos);
  {
    std::ofstream(dir.str("text.h5")) << "not hdf5 at all";
  }
  const std::string msg2 = test::error_of([&] { io::open_hdf5(io::SceneSpec::parse(dir.str("text.h5"))); });
  CHECK(msg2.find("text.h5") != std::string::npos);
  CHECK(msg2.find("not an HDF5 file") != std::string::npos);
}

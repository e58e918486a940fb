// MATLAB reader against scipy.io.loadmat (v5) and h5py/numpy (v7.3 written in MATLAB's layout).
#include <matio.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "io/format_check.hpp"
#include "io/readers.hpp"

using namespace hsipipe;
using hsipipe::test::fixtures;

TEST_CASE("MATLAB v5 every numeric class, plain and compressed, equals scipy.io.loadmat", "[matlab]") {
  const auto& m = fixtures("matlab").manifest;
  int n = 0;
  for (const auto& e : m.at("scenes")) {
    const std::string name = e.at("name");
    if (name.rfind("cube_", 0) != 0) continue;
    auto s = test::check_scene(e, 3);
    CHECK(s->format() == "MATLAB v5");
    ++n;
  }
  CHECK(n == 20);  // 10 classes x {plain, compressed}
}

TEST_CASE("MATLAB source types follow the MATLAB class", "[matlab]") {
  const auto& m = fixtures("matlab").manifest;
  const std::map<std::string, DType> want{{"int8", DType::i16},  {"uint8", DType::u8},   {"int16", DType::i16},
                                          {"uint16", DType::u16}, {"int32", DType::i32}, {"uint32", DType::u32},
                                          {"int64", DType::i64}, {"uint64", DType::u64}, {"float32", DType::f32},
                                          {"float64", DType::f64}};
  for (const auto& [cls, dt] : want) {
    auto s = io::open_scene(io::SceneSpec::parse(test::entry(m, "cube_" + cls + "_z").at("spec")));
    INFO(cls);
    CHECK(s->source_type() == dt);
  }
}

TEST_CASE("MATLAB float NaN masks the whole pixel", "[matlab]") {
  const auto& m = fixtures("matlab").manifest;
  auto s = io::open_scene(io::SceneSpec::parse(test::entry(m, "cube_float32_u").at("spec")));
  std::vector<float> row(s->cols() * s->bands());
  s->read_rows(2, 3, row.data());
  for (std::size_t b = 0; b < s->bands(); ++b) CHECK(std::isnan(row[3 * s->bands() + b]));
  CHECK_FALSE(std::isnan(row[2 * s->bands()]));
  // its NaN is in band 1: without band 1 deciding validity (set after a read: a v5 variable kept whole in
  // memory is decoded again) the pixel is valid
  std::vector<std::uint8_t> counts(s->bands(), 1);
  counts[1] = 0;
  s->set_validity_bands(counts);
  s->read_rows(2, 3, row.data());
  CHECK(std::isnan(row[3 * s->bands() + 1]));
  for (std::size_t b = 0; b < s->bands(); ++b)
    if (b != 1) CHECK_FALSE(std::isnan(row[3 * s->bands() + b]));
}

TEST_CASE("MATLAB v7.3 (HDF5 inside) contiguous and chunked", "[matlab]") {
  const auto& m = fixtures("matlab").manifest;
  for (const char* name : {"v73_int16_contig", "v73_float64_chunked", "v73_uint8_chunked"}) {
    auto s = test::check_scene(test::entry(m, name), 2);
    CHECK(s->format() == "MATLAB v7.3");
  }
  test::check_concurrent(test::entry(m, "v73_float64_chunked"));
}

TEST_CASE("MATLAB label rasters: 2-D variable chosen by default", "[matlab][labels]") {
  const auto& m = fixtures("matlab").manifest;
  for (const char* name : {"labels5", "v73_labels"}) {
    test::check_scene(test::entry(m, name));
    test::check_labels(test::entry(m, name));
  }
}

TEST_CASE("MATLAB [bands x pixels] matrices equal scipy's column-major reshape", "[matlab][matrix]") {
  // the unmixing data sets' layout: Y(:, r+1 + c*H) is pixel (r, c); sizes from nRow/nCol, lines/cols, nr/nc
  // (v5 plain and compressed, v7.3 chunked) or --image-size
  const auto& m = fixtures("matlab").manifest;
  int n = 0;
  for (const auto& e : m.at("scenes")) {
    const std::string name = e.at("name");
    if (!e.contains("image_size")) continue;
    auto s = test::check_scene(e, 3);
    test::check_concurrent(e);
    CHECK(s->variable() == "Y");
    CHECK(s->image_size() == "7x5");
    ++n;
  }
  CHECK(n == 8);
  // the label raster beside them stays H x W
  for (const char* name : {"unmix_gt_nRow_u", "unmix_gt_nRow_z"}) {
    test::check_scene(test::entry(m, name));
    test::check_labels(test::entry(m, name));
  }
}

TEST_CASE("MATLAB compressed v5 is decoded once and read concurrently", "[matlab]") {
  const auto& m = fixtures("matlab").manifest;
  test::check_concurrent(test::entry(m, "cube_int16_z"));
  test::check_concurrent(test::entry(m, "cube_float64_u"));
}

TEST_CASE("MATLAB bad input names the file and the variables", "[matlab][errors]") {
  test::check_errors(fixtures("matlab").manifest);
}

TEST_CASE("SalinasA.mat equals scipy.io.loadmat bit for bit, labels count per class", "[matlab][shared]") {
  const std::string data = test::shared_data();
  if (data.empty()) {
    if (test::in_ci()) FAIL("../shared/data is missing (CI=true)");
    WARN("SKIPPED: ../shared/data is missing");
    return;
  }
  const auto& m = fixtures("salinas", data).manifest;
  auto s = test::check_scene(test::entry(m, "salinasA"), 16);
  CHECK(s->rows() == 83);
  CHECK(s->cols() == 86);
  CHECK(s->bands() == 224);
  CHECK(s->format() == "MATLAB v5");
  test::check_concurrent(test::entry(m, "salinasA"));

  const auto& gt = test::entry(m, "salinasA_gt");
  const io::LabelImage img = test::check_labels(gt);
  std::map<int, int> counts;
  for (auto v : img.labels) ++counts[v];
  const std::map<int, int> want{{0, 83 * 86 - 5348}, {1, 391}, {10, 1343}, {11, 616}, {12, 1525}, {13, 674}, {14, 799}};
  CHECK(counts == want);
  for (const auto& [cls, n] : gt.at("counts").items()) CHECK(counts[std::stoi(cls)] == n.get<int>());
  CHECK_NOTHROW(io::check_labels_match(*s, img));

  // Indian Pines ground truth (145 x 145, classes 0..16) against loadmat, and against the wrong scene.
  const io::LabelImage ip = test::check_labels(test::entry(m, "indian_pines_gt"));
  CHECK(ip.rows == 145);
  CHECK(*std::max_element(ip.labels.begin(), ip.labels.end()) == 16);
  const std::string msg = test::error_of([&] { io::check_labels_match(*s, ip); });
  CHECK(msg.find("Indian_pines_gt.mat") != std::string::npos);
  CHECK(msg.find("dimensions") != std::string::npos);

  // Samson's ENVI cube as its authors' .mat stores it: V [156 x 9025], nRow/nCol in the file
  auto samson = test::check_scene(test::entry(m, "samson_matrix"), 10);
  CHECK(samson->rows() == 95);
  CHECK(samson->bands() == 156);
  CHECK(samson->variable() == "V");
}

namespace {
// A value that tells row, column and band apart.
std::int32_t probe_value(std::size_t r, std::size_t c, std::size_t b) {
  return static_cast<std::int32_t>(1000000 * b + 1000 * c + r) - 500000;
}
}  // namespace

TEST_CASE("MATLAB column-major orientation: files written by libmatio, v5 and v7.3 compressed", "[matlab]") {
  // The oracle is the array itself: MATLAB's A(r+1, c+1, b+1) sits at r + c*H + b*H*W in memory and
  // must come out as pixel (r, c), band b.
  const std::size_t H = 11, W = 7, B = 5;
  std::vector<std::int32_t> a(H * W * B);
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t c = 0; c < W; ++c)
      for (std::size_t r = 0; r < H; ++r) a[r + c * H + b * H * W] = probe_value(r, c, b);
  test::TempDir dir("matio");
  for (const auto& [ver, comp, name] :
       {std::tuple{MAT_FT_MAT73, MAT_COMPRESSION_ZLIB, "v73z.mat"}, std::tuple{MAT_FT_MAT73, MAT_COMPRESSION_NONE, "v73.mat"},
        std::tuple{MAT_FT_MAT5, MAT_COMPRESSION_ZLIB, "v5z.mat"}, std::tuple{MAT_FT_MAT5, MAT_COMPRESSION_NONE, "v5.mat"}}) {
    const std::string path = dir.str(name);
    {
      mat_t* mat = Mat_CreateVer(path.c_str(), nullptr, ver);
      REQUIRE(mat != nullptr);
      std::size_t dims[3] = {H, W, B};
      matvar_t* v = Mat_VarCreate("cube", MAT_C_INT32, MAT_T_INT32, 3, dims, a.data(), MAT_F_DONT_COPY_DATA);
      REQUIRE(v != nullptr);
      CHECK(Mat_VarWrite(mat, v, comp) == 0);
      Mat_VarFree(v);
      Mat_Close(mat);
    }
    INFO(name);
    auto s = io::open_scene(io::SceneSpec::parse(path));
    REQUIRE(s->rows() == H);
    REQUIRE(s->cols() == W);
    REQUIRE(s->bands() == B);
    CHECK(s->format() == (ver == MAT_FT_MAT73 ? "MATLAB v7.3" : "MATLAB v5"));
    CHECK(s->source_type() == DType::i32);
    std::vector<float> out(3 * W * B);
    for (std::size_t r0 = 0; r0 < H; r0 += 3) {
      const std::size_t r1 = std::min(H, r0 + 3);
      s->read_rows(r0, r1, out.data());
      std::size_t bad = 0;
      for (std::size_t r = r0; r < r1; ++r)
        for (std::size_t c = 0; c < W; ++c)
          for (std::size_t b = 0; b < B; ++b)
            bad += out[((r - r0) * W + c) * B + b] != static_cast<float>(probe_value(r, c, b));
      CHECK(bad == 0);
    }
  }
}

// Synthetic scene: deterministic from the seed, independent of interleave/type/byte order, and shaped
// like a field scene (coherent parcels, unlabeled background, every class present, bad bands in the
// water-absorption windows, smooth spectra).
#include <catch2/catch.hpp>

#include <cmath>
#include <map>

#include "core/error.hpp"
#include "io/readers.hpp"
#include "io/synth.hpp"
#include "support/test_util.hpp"

using namespace hsipipe;
using namespace hsipipe::io;

namespace {
std::vector<float> decode(const std::string& path) {
  SceneSpec s;
  s.path = path;
  const auto scene = open_envi(s);
  std::vector<float> v(scene->rows() * scene->cols() * scene->bands());
  scene->read_rows(0, scene->rows(), v.data());
  return v;
}
}  // namespace

TEST_CASE("synthetic scene is deterministic and the same in every interleave and byte order", "[synth]") {
  test::TempDir d("synth");
  SynthOptions o{.rows = 40, .cols = 33, .bands = 50, .classes = 5, .seed = 99};
  std::vector<float> ref;
  std::vector<std::int32_t> ref_labels;
  int n = 0;
  for (Interleave il : {Interleave::bil, Interleave::bsq, Interleave::bip}) {
    for (int bo : {0, 1}) {
      o.interleave = il;
      o.byte_order = bo;
      const SynthFiles f = write_synthetic_scene(d.str("s" + std::to_string(n++)), o);
      const auto v = decode(f.scene_header);
      const auto l = decode(f.labels_data);
      std::vector<std::int32_t> labels(l.begin(), l.end());
      if (ref.empty()) {
        ref = v;
        ref_labels = labels;
      }
      CHECK(v == ref);
      CHECK(labels == ref_labels);
    }
  }
  SynthScene a(o), b(o);
  CHECK(a.labels() == b.labels());
  o.seed = 100;
  SynthScene c(o);
  CHECK(a.labels() != c.labels());
  // uint16 and float32 hold the same reflectance (int types x 10000, rounded)
  o.seed = 99;
  o.dtype = DType::f32;
  const SynthFiles ff = write_synthetic_scene(d.str("f32"), o);
  const auto vf = decode(ff.scene_header);
  REQUIRE(vf.size() == ref.size());
  double worst = 0;
  for (std::size_t i = 0; i < vf.size(); ++i) worst = std::max(worst, std::fabs(vf[i] * 10000.0 - ref[i]));
  CHECK(worst <= 0.5 + 1e-3);
}

TEST_CASE("synthetic scene looks like a field scene", "[synth]") {
  SynthOptions o;  // the defaults: 145 x 145 x 200, 8 classes
  SynthScene s(o);
  const auto& L = s.labels();
  const std::size_t R = o.rows, C = o.cols, B = o.bands;
  std::map<int, std::size_t> counts;
  for (auto l : L) ++counts[l];
  REQUIRE(counts.size() == static_cast<std::size_t>(o.classes) + 1);  // every class and unlabeled
  const double labeled = 1.0 - static_cast<double>(counts[0]) / static_cast<double>(L.size());
  CHECK(labeled > 0.3);
  CHECK(labeled < 0.8);
  // spatial coherence: labeled 4-neighbours mostly share the class
  std::size_t same = 0, pairs = 0;
  for (std::size_t r = 0; r + 1 < R; ++r)
    for (std::size_t c = 0; c + 1 < C; ++c) {
      const int a = L[r * C + c];
      for (int nb : {L[(r + 1) * C + c], L[r * C + c + 1]})
        if (a && nb) {
          ++pairs;
          same += a == nb;
        }
    }
  CHECK(static_cast<double>(same) / static_cast<double>(pairs) > 0.97);
  // bad bands sit in the water windows, a few of them
  const BandInfo& bi = s.band_info();
  REQUIRE(bi.wavelengths.size() == B);
  REQUIRE(bi.bbl.size() == B);
  std::size_t bad = 0;
  for (std::size_t b = 0; b < B; ++b) {
    if (bi.bbl[b]) continue;
    ++bad;
    const double w = bi.wavelengths[b];
    CHECK((b == 0 || b == B - 1 || (w > 1300 && w < 1480) || (w > 1780 && w < 1990)));
  }
  CHECK(bad >= 4);
  CHECK(bad <= B / 8);
  CHECK(bi.wavelengths.front() == 400.0);
  CHECK(bi.wavelengths.back() == 2500.0);
  std::vector<float> px(R * C * B);
  s.reflectance(0, R, px.data());
  // classes differ: the class mean spectra are further apart than the within-class spread of a band
  std::vector<std::vector<double>> mean(static_cast<std::size_t>(o.classes) + 1, std::vector<double>(B, 0.0));
  for (std::size_t p = 0; p < R * C; ++p)
    for (std::size_t b = 0; b < B; ++b) mean[static_cast<std::size_t>(L[p])][b] += px[p * B + b];
  for (int k = 1; k <= o.classes; ++k)
    for (auto& m : mean[static_cast<std::size_t>(k)]) m /= static_cast<double>(counts[k]);
  for (int k = 1; k < o.classes; ++k) {
    double dist = 0;
    for (std::size_t b = 0; b < B; ++b) dist += std::fabs(mean[static_cast<std::size_t>(k)][b] - mean[static_cast<std::size_t>(k + 1)][b]);
    CHECK(dist / static_cast<double>(B) > 0.003);
  }
  // endmembers are smooth on good bands: the class means' |second difference| is small next to the signal
  for (int k = 1; k <= o.classes; ++k) {
    const auto& m = mean[static_cast<std::size_t>(k)];
    double curv = 0, level = 0;
    for (std::size_t b = 1; b + 1 < B; ++b) {
      if (!bi.bbl[b - 1] || !bi.bbl[b] || !bi.bbl[b + 1]) continue;
      curv += std::fabs(m[b - 1] - 2 * m[b] + m[b + 1]);
      level += std::fabs(m[b]);
    }
    CHECK(curv / level < 0.03);
  }
}

TEST_CASE("sparse ground truth: survey plots covering the labeled fraction, spectra unchanged", "[synth]") {
  SynthOptions o{.rows = 256, .cols = 240, .bands = 20, .classes = 6, .seed = 7};
  const SynthScene full(o);
  const auto& F = full.labels();
  const std::size_t R = o.rows, C = o.cols;
  o.labeled_fraction = 0.05;
  const SynthScene sparse(o);
  const auto& S = sparse.labels();
  REQUIRE(S.size() == F.size());
  // exactly round(F * pixels) labeled, each with its label in the full ground truth
  std::size_t kept = 0;
  bool subset = true;
  std::map<int, std::size_t> counts;
  for (std::size_t i = 0; i < S.size(); ++i) {
    if (!S[i]) continue;
    ++kept;
    ++counts[S[i]];
    subset = subset && S[i] == F[i];
  }
  CHECK(kept == static_cast<std::size_t>(std::llround(0.05 * static_cast<double>(R * C))));
  CHECK(subset);
  CHECK(counts.size() == static_cast<std::size_t>(o.classes));  // every class keeps a plot
  // plots, not scattered pixels: most kept pixels have all four neighbours kept (a random 5 % thinning: ~0)
  std::size_t interior = 0;
  for (std::size_t r = 1; r + 1 < R; ++r)
    for (std::size_t c = 1; c + 1 < C; ++c)
      if (S[r * C + c] && S[(r - 1) * C + c] && S[(r + 1) * C + c] && S[r * C + c - 1] && S[r * C + c + 1]) ++interior;
  CHECK(static_cast<double>(interior) / static_cast<double>(kept) > 0.5);
  // many plots spread over the scene: labeled pixels in most 64 x 60 blocks
  std::size_t blocks = 0, hit = 0;
  for (std::size_t br = 0; br < R; br += 64)
    for (std::size_t bc = 0; bc < C; bc += 60) {
      ++blocks;
      bool any = false;
      for (std::size_t r = br; r < std::min(R, br + 64); ++r)
        for (std::size_t c = bc; c < std::min(C, bc + 60); ++c) any = any || S[r * C + c] != 0;
      hit += any;
    }
  CHECK(hit * 4 >= blocks * 3);
  // deterministic in the seed; another seed, other plots
  CHECK(SynthScene(o).labels() == S);
  o.seed = 8;
  CHECK(SynthScene(o).labels() != S);
  o.seed = 7;
  // the spectra do not depend on the labeled fraction
  std::vector<float> a(R * C * o.bands), b(R * C * o.bands);
  full.reflectance(0, R, a.data());
  sparse.reflectance(0, R, b.data());
  CHECK(a == b);
  // a fraction above what the scene has labeled keeps every label
  o.labeled_fraction = 0.999;
  CHECK(SynthScene(o).labels() == F);
  // the written raster holds the same labels and counts
  test::TempDir d("synth-sparse");
  o.labeled_fraction = 0.05;
  const SynthFiles f = write_synthetic_scene(d.str("s"), o);
  const auto l = decode(f.labels_data);
  CHECK(std::vector<std::int32_t>(l.begin(), l.end()) == S);
  std::uint64_t written = 0;
  for (std::size_t k = 1; k < f.class_counts.size(); ++k) written += f.class_counts[k];
  CHECK(written == kept);
}

TEST_CASE("synth rejects bad options", "[synth]") {
  SynthOptions o;
  o.rows = 0;
  CHECK_THROWS_AS(SynthScene(o), ConfigError);
  o.rows = 10;
  o.dtype = DType::f64;
  CHECK_THROWS_AS(SynthScene(o), ConfigError);
  o.dtype = DType::i16;
  o.classes = 0;
  CHECK_THROWS_AS(SynthScene(o), ConfigError);
  o.classes = 3;
  for (double f : {0.0, -0.1, 1.5, std::nan("")}) {
    o.labeled_fraction = f;
    CHECK_THROWS_AS(SynthScene(o), ConfigError);
  }
}

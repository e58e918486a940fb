// Models: forward shapes, deterministic initialisation, a few optimisation steps lower the loss on a
// tiny separable problem, and check_model_fits refusals.
#include <torch/torch.h>
// glog (through libtorch) defines CHECK; Catch2 owns it in tests.
#undef CHECK
#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "train/models.hpp"

using namespace hsipipe;
using namespace hsipipe::train;
using cache::Layout;

namespace {

struct Case {
  const char* name;
  int bands, patch;
};
// Small inputs so every model trains on 2 CPU cores in well under a second per step.
const Case kCases[] = {{"hu1d", 24, 1}, {"mlp", 24, 1}, {"li3d", 16, 5}, {"hamida3d", 16, 5}, {"hybridsn", 16, 9}, {"ssftt", 8, 7},
                      {"spectralformer", 8, 5}};

/// Three classes with distinct spectral signatures plus noise; the patch repeats the spectrum.
std::pair<torch::Tensor, torch::Tensor> separable(int n, int bands, int patch, std::uint64_t seed) {
  torch::manual_seed(seed);
  auto y = torch::arange(n, torch::kLong).remainder(3);
  auto b = torch::linspace(0, 1, bands);
  auto sig = torch::stack({torch::sin(b * 6.0), torch::cos(b * 4.0), b * 2.0 - 1.0});  // [3, B]
  auto x = sig.index_select(0, y) + 0.1 * torch::randn({n, bands});
  if (patch > 1) x = x.unsqueeze(-1).unsqueeze(-1).expand({n, bands, patch, patch}).contiguous() +
                     0.05 * torch::randn({n, bands, patch, patch});
  return {x, y};
}

}  // namespace

TEST_CASE("registry lists the models with their layouts", "[models]") {
  std::vector<std::string> names;
  for (const auto& m : model_registry()) names.push_back(m.name);
  CHECK(names == std::vector<std::string>{"hu1d", "li3d", "hamida3d", "hybridsn", "mlp", "ssftt", "spectralformer"});
  CHECK_FALSE(model_info("hu1d").spatial);
  CHECK(model_info("hybridsn").spatial);
  CHECK_THROWS_AS(model_info("resnet"), ConfigError);
}

TEST_CASE("forward gives [N, C] logits; trace agrees with the parameters", "[models]") {
  torch::set_num_threads(2);
  for (const auto& c : kCases) {
    INFO(c.name);
    auto m = make_model(c.name, c.bands, c.patch, 5, 1);
    auto x = c.patch == 1 ? torch::randn({7, c.bands}) : torch::randn({7, c.bands, c.patch, c.patch});
    auto y = m->forward(x);
    CHECK(y.sizes() == torch::IntArrayRef({7, 5}));
    CHECK(y.dtype() == torch::kFloat32);
    const auto tr = m->trace(x);
    REQUIRE(!tr.empty());
    CHECK(tr.back().out == std::vector<std::int64_t>{7, 5});
    std::int64_t params = 0;
    for (const auto& t : tr) params += t.params;
    CHECK(params == count_parameters(*m));
    if (!model_info(c.name).spatial) {
      // Spectral models take the centre pixel of a patch.
      auto p = torch::randn({3, c.bands, 5, 5});
      auto centre = p.select(3, 2).select(2, 2);
      m->eval();
      CHECK(torch::allclose(m->forward(p), m->forward(centre)));
    } else {
      CHECK_THROWS_AS(m->forward(torch::randn({3, c.bands})), std::invalid_argument);
      CHECK_THROWS_AS(m->forward(torch::randn({3, c.bands, c.patch + 2, c.patch + 2})), std::invalid_argument);
    }
  }
}

TEST_CASE("initialisation is deterministic from the seed", "[models]") {
  for (const auto& c : kCases) {
    INFO(c.name);
    auto a = make_model(c.name, c.bands, c.patch, 4, 42);
    auto b = make_model(c.name, c.bands, c.patch, 4, 42);
    auto d = make_model(c.name, c.bands, c.patch, 4, 43);
    auto pa = a->parameters(), pb = b->parameters(), pd = d->parameters();
    REQUIRE(pa.size() == pb.size());
    bool any_diff = false;
    for (std::size_t i = 0; i < pa.size(); ++i) {
      CHECK(torch::equal(pa[i], pb[i]));
      any_diff |= !torch::equal(pa[i], pd[i]);
    }
    CHECK(any_diff);
  }
}

TEST_CASE("a few Adam steps lower the loss on a separable problem", "[models]") {
  torch::set_num_threads(2);
  for (const auto& c : kCases) {
    INFO(c.name);
    auto [x, y] = separable(48, c.bands, c.patch, 7);
    auto m = make_model(c.name, c.bands, c.patch, 3, 3);
    m->train();
    torch::optim::Adam opt(m->parameters(), torch::optim::AdamOptions(c.name == std::string("hu1d") ? 1e-2 : 3e-3));
    double first = 0, last = 0;
    for (int step = 0; step < 25; ++step) {
      opt.zero_grad();
      auto loss = torch::nn::functional::cross_entropy(m->forward(x), y);
      loss.backward();
      opt.step();
      if (step == 0) first = loss.item<double>();
      last = loss.item<double>();
    }
    m->eval();
    torch::NoGradGuard g;
    const double acc = m->forward(x).argmax(1).eq(y).to(torch::kFloat).mean().item<double>();
    INFO("loss " << first << " -> " << last << ", train accuracy " << acc);
    CHECK(last < 0.6 * first);
    CHECK(acc > 0.9);
  }
}

TEST_CASE("ssftt at the published setting has the reference's parameter count", "[models]") {
  // zgr6010/HSI_SSFTT, 30 PCA bands, 13 x 13, 16 classes: conv3d 224 + bn 16, conv2d 129088 + bn 128,
  // wA 256, wV 4096, pos 320, cls 64, ln 128, qkv 12480, out 4160, ln 128, mlp 520 + 576, head 1040.
  CHECK(count_parameters(*make_model("ssftt", 30, 13, 16, 1)) == 153224);
}

TEST_CASE("spectralformer at the published setting has the reference's parameter count", "[models]") {
  // danfenghong/IEEE_TGRS_SpectralFormer, Indian Pines patch-wise (200 bands, 7 x 7, band_patches 3, 16 classes), as
  // its log/SpectralFormer_patch_indian.pt: embedding 9472, positions 12864, class token 64, 5 layers of 17800
  // (LN 128, qkv 12288, out 4160, LN 128, mlp 520 + 576), 3 fusion convs of 81003, head LN 128 + 1040.
  CHECK(count_parameters(*make_model("spectralformer", 200, 7, 16, 1)) == 355577);
}

TEST_CASE("check_model_fits refuses what a model cannot consume", "[models]") {
  // Spectral models: any layout, odd patch for the centre pixel.
  CHECK_NOTHROW(check_model_fits("hu1d", Layout::pixel, 1, 200));
  CHECK_NOTHROW(check_model_fits("hu1d", Layout::patch, 5, 200));
  CHECK_NOTHROW(check_model_fits("mlp", Layout::cube, 7, 30));
  CHECK_THROWS_AS(check_model_fits("hu1d", Layout::patch, 4, 200), ConfigError);
  CHECK_THROWS_AS(check_model_fits("hu1d", Layout::pixel, 3, 200), ConfigError);
  // Spatial models need a patch.
  CHECK_THROWS_WITH(check_model_fits("li3d", Layout::pixel, 1, 200),
                    Catch::Contains("li3d") && Catch::Contains("layout pixel") && Catch::Contains("--layout patch"));
  CHECK_NOTHROW(check_model_fits("li3d", Layout::patch, 5, 200));
  CHECK_THROWS_WITH(check_model_fits("li3d", Layout::patch, 3, 200), Catch::Contains("patch 3"));
  CHECK_THROWS_AS(check_model_fits("li3d", Layout::cube, 6, 200), ConfigError);
  CHECK_NOTHROW(check_model_fits("hamida3d", Layout::cube, 3, 200));
  CHECK_THROWS_AS(check_model_fits("hybridsn", Layout::patch, 7, 30), ConfigError);
  CHECK_NOTHROW(check_model_fits("hybridsn", Layout::patch, 25, 30));
  CHECK_THROWS_WITH(check_model_fits("hybridsn", Layout::patch, 25, 12),
                    Catch::Contains("at least 13 bands") && Catch::Contains("n_bands"));
  CHECK_THROWS_AS(check_model_fits("li3d", Layout::patch, 5, 4), ConfigError);
  CHECK_NOTHROW(check_model_fits("ssftt", Layout::patch, 13, 30));
  CHECK_THROWS_WITH(check_model_fits("ssftt", Layout::patch, 3, 30), Catch::Contains("ssftt") && Catch::Contains("[5, 99]"));
  CHECK_THROWS_AS(check_model_fits("ssftt", Layout::pixel, 1, 30), ConfigError);
  CHECK_THROWS_WITH(check_model_fits("ssftt", Layout::patch, 13, 2), Catch::Contains("at least 3 bands"));
  CHECK_NOTHROW(check_model_fits("spectralformer", Layout::patch, 7, 204));
  CHECK_NOTHROW(check_model_fits("spectralformer", Layout::cube, 1, 204));
  CHECK_THROWS_WITH(check_model_fits("spectralformer", Layout::pixel, 1, 204),
                    Catch::Contains("spectralformer") && Catch::Contains("layout pixel"));
  CHECK_THROWS_WITH(check_model_fits("spectralformer", Layout::patch, 6, 204), Catch::Contains("[1, 99]"));
  CHECK_THROWS_WITH(check_model_fits("spectralformer", Layout::patch, 7, 2), Catch::Contains("at least 3 bands"));
  CHECK_THROWS_AS(check_model_fits("nope", Layout::patch, 5, 40), ConfigError);
  CHECK_THROWS_AS(make_model("li3d", 16, 1, 3), ConfigError);
  CHECK_THROWS_AS(make_model("hu1d", 16, 1, 1), ConfigError);
}

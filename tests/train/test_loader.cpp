// Shard (cache/shard.cpp) against numpy, and the batch loader (train/loader.cpp): order, ring
// wrap-around, resume mid-plan, augmentation against torch::flip/rot90 and independent of threads; the
// device-resident batches (train/resident.cpp), run here on CPU tensors, against the ring, value for value.
#include <torch/torch.h>
// glog (pulled in by libtorch) defines CHECK too: Catch2's must win
#undef CHECK
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <vector>

#include "cache/cache.hpp"
#include "cache/npy.hpp"
#include "core/error.hpp"
#include "core/range.hpp"
#include "support/test_util.hpp"
#include "train/loader.hpp"
#include "train/resident.hpp"

using namespace hsipipe;
using namespace hsipipe::train;

namespace {

std::string make_cache(const test::TempDir& tmp, const std::string& name, const std::string& args) {
  const std::string dir = tmp.str(name);
  const auto r = test::run(test::python() + " " + test::source_dir() + "/tests/train/make_cache.py " + dir + " --expected " + args);
  INFO(r.output);
  REQUIRE(r.status == 0);
  return dir;
}

/// numpy's patches [N, B, P, P] (expected_patches.npy), centre-cropped to p.
std::vector<float> expected(const std::string& dir, std::uint64_t id, int p) {
  cache::NpyHeader h;
  const auto raw = cache::read_npy(dir + "/expected_patches.npy", DType::f32, &h);
  const auto* all = reinterpret_cast<const float*>(raw.data());
  const auto B = h.shape[1], P = h.shape[2];
  const auto off = (P - static_cast<std::uint64_t>(p)) / 2;
  std::vector<float> out;
  for (std::uint64_t b = 0; b < B; ++b)
    for (std::uint64_t i = 0; i < static_cast<std::uint64_t>(p); ++i)
      for (std::uint64_t j = 0; j < static_cast<std::uint64_t>(p); ++j)
        out.push_back(all[((id * B + b) * P + off + i) * P + off + j]);
  return out;
}

void check_gather(const std::string& dir, Range range, int patch_override, int want_patch) {
  const auto cache = cache::CacheReader::open(dir);
  const auto shard = cache::Shard::load(cache, range, patch_override);
  REQUIRE(shard.patch() == want_patch);
  REQUIRE(shard.sample_floats() == static_cast<std::size_t>(cache.n_bands() * want_patch * want_patch));
  std::vector<std::uint64_t> ids;
  for (auto i = range.end; i-- > range.begin;) ids.push_back(i);  // reverse order
  std::vector<float> out(ids.size() * shard.sample_floats());
  shard.gather(ids.data(), ids.size(), out.data());
  for (std::size_t k = 0; k < ids.size(); ++k) {
    const auto want = expected(dir, ids[k], want_patch);
    INFO("sample " << ids[k]);
    REQUIRE(std::memcmp(want.data(), out.data() + k * shard.sample_floats(), want.size() * 4) == 0);
  }
  const std::uint64_t outside = range.end < cache.n_samples() ? range.end : 0;
  if (outside != 0 || range.begin > 0) CHECK_THROWS_AS(shard.gather(&outside, 1, out.data()), std::out_of_range);
  // The same shard streamed (mapped, a 0-byte limit) gives the same floats, in batches of 3 over two passes:
  // more than 16 batches, so both of gather's paths (with MADV_WILLNEED, and without it once no batch has
  // waited on the disk) run.
  const auto streamed = cache::Shard::load(cache, range, patch_override, 0);
  REQUIRE(streamed.streamed());
  std::vector<float> batch(3 * shard.sample_floats());
  for (int pass = 0; pass < 2; ++pass)
    for (std::size_t k = 0; k < ids.size(); k += 3) {
      const std::size_t n = std::min<std::size_t>(3, ids.size() - k);
      streamed.gather(ids.data() + k, n, batch.data());
      INFO("streamed, pass " << pass << ", from sample " << ids[k]);
      REQUIRE(std::memcmp(batch.data(), out.data() + k * shard.sample_floats(), n * shard.sample_floats() * 4) == 0);
    }
  CHECK(streamed.streamed_bytes() > 0);
}

}  // namespace

TEST_CASE("Shard::gather equals numpy's patches for every layout, dtype and border", "[cache][shard]") {
  test::TempDir tmp("shard");
  SECTION("pixel float32, a middle range") {
    const auto d = make_cache(tmp, "c", "--layout pixel --bands 7");
    check_gather(d, {10, 40}, 0, 1);
    const auto cache = cache::CacheReader::open(d);
    CHECK(cache::Shard::load(cache, {10, 40}).bytes_read() == 30u * 7 * 4);  // only its rows
  }
  SECTION("patch float16 5x5, also centre-cropped to 3x3 and to the centre pixel") {
    const auto d = make_cache(tmp, "c", "--layout patch --patch 5 --dtype float16 --bands 6");
    check_gather(d, {3, 50}, 0, 5);
    check_gather(d, {3, 50}, 3, 3);
    check_gather(d, {0, 20}, 1, 1);
    const auto cache = cache::CacheReader::open(d);
    CHECK_THROWS_AS(cache::Shard::load(cache, {0, 5}, 7), ConfigError);
  }
  SECTION("cube reflect float32 7x7 over two scenes: rows + halo only") {
    const auto d = make_cache(tmp, "c", "--layout cube --patch 7 --bands 5 --scenes 2 --rows 20 --cols 9");
    const auto cache = cache::CacheReader::open(d);
    const auto n = cache.n_samples();
    check_gather(d, {0, n}, 0, 7);
    check_gather(d, {n / 3, n / 2}, 0, 7);
    check_gather(d, {n / 3, n / 2}, 1, 1);  // spectral models ask for the centre pixel only
    const auto part = cache::Shard::load(cache, {n / 3, n / 2});
    const auto whole = cache::Shard::load(cache, {0, n});
    CHECK(part.bytes_read() < whole.bytes_read() / 2);
  }
  // 11 x 11 and 9 x 9 run the 8 x 8 AVX2 blocks (where the CPU has them) with pixel and band tails.
  SECTION("cube reflect float16 11x11, 13 bands (8 x 8 blocks and tails)") {
    const auto d = make_cache(tmp, "c", "--layout cube --patch 11 --bands 13 --dtype float16 --rows 16 --cols 19");
    const auto cache = cache::CacheReader::open(d);
    check_gather(d, {0, cache.n_samples()}, 0, 11);
  }
  SECTION("cube zero border float32 9x9, 16 bands") {
    const auto d = make_cache(tmp, "c", "--layout cube --patch 9 --bands 16 --border zero --rows 12 --cols 14");
    const auto cache = cache::CacheReader::open(d);
    check_gather(d, {0, cache.n_samples()}, 0, 9);
  }
  SECTION("cube zero border float16 5x5") {
    const auto d = make_cache(tmp, "c", "--layout cube --patch 5 --bands 4 --border zero --dtype float16 --rows 8 --cols 6");
    const auto cache = cache::CacheReader::open(d);
    check_gather(d, {0, cache.n_samples()}, 0, 5);
  }
}

TEST_CASE("the shards' item hashes, in rank order, give the manifest's data_checksum for any rank count", "[cache][shard]") {
  test::TempDir tmp("shard-hashes");
  // make_cache.py computes data_checksum with python3-xxhash, independently of hsipipe
  for (const char* args : {"--layout pixel --bands 7", "--layout patch --patch 3 --bands 4 --dtype float16",
                           "--layout cube --patch 5 --bands 3 --rows 9 --cols 7 --scenes 2 --unlabeled 0.7",
                           "--layout cube --patch 3 --rows 16 --cols 4 --bands 5 --scenes 2 --unlabeled 0.75 --seed 6",
                           "--layout cube --patch 7 --bands 4 --rows 12 --cols 5 --scenes 3 --unlabeled 0.9 --seed 3"}) {
    INFO(args);
    const auto d = make_cache(tmp, "c", args);
    const auto cache = cache::CacheReader::open(d);
    const auto table = cache.read_sample_table();
    const std::uint64_t N = cache.n_samples();
    for (int R = 1; R <= 7; ++R) {
      INFO(R << " ranks");
      std::vector<std::uint64_t> all;
      for (int r = 0; r < R; ++r) {
        // a cube shard loaded for a spectral model (patch 1) owns the same rows
        const auto shard = cache::Shard::load(cache, split_range(N, R, r), r % 2 && cache.layout() == cache::Layout::cube ? 1 : 0);
        all.insert(all.end(), shard.item_hashes().begin(), shard.item_hashes().end());
      }
      CHECK(cache::data_checksum_of(all, table) == cache.data_checksum());
    }
    std::filesystem::remove_all(d);
  }
}

TEST_CASE("BatchLoader delivers the plan in order through a small ring, with labels", "[train][loader]") {
  test::TempDir tmp("loader");
  const auto d = make_cache(tmp, "c", "--layout patch --patch 3 --bands 4 --rows 10 --cols 10");
  const auto cache = cache::CacheReader::open(d);
  const Range range{5, cache.n_samples() - 3};
  const auto shard = cache::Shard::load(cache, range);
  std::vector<std::int64_t> cls(range.size());
  for (std::size_t i = 0; i < cls.size(); ++i) cls[i] = static_cast<std::int64_t>((i * 7) % 3);
  std::vector<std::vector<std::uint64_t>> plan;
  for (std::uint64_t b = 0; b < 23; ++b) {
    std::vector<std::uint64_t> ids;
    for (std::uint64_t k = 0; k < 1 + b % 5; ++k) ids.push_back(range.begin + (b * 13 + k * 7) % range.size());
    plan.push_back(ids);
  }
  plan.push_back({});  // an empty batch (a rank without training samples) is delivered too
  for (int threads : {1, 3}) {
    LoaderOptions lo;
    lo.threads = threads;
    lo.prefetch = 2;
    BatchLoader loader(shard, cls, lo);
    for (std::size_t first : {std::size_t{0}, std::size_t{17}}) {
      loader.start(plan, 1, false, first);
      std::size_t i = first;
      while (auto b = loader.next()) {
        REQUIRE(b->index == i);
        REQUIRE(b->size == plan[i].size());
        std::vector<float> want(plan[i].size() * shard.sample_floats());
        shard.gather(plan[i].data(), plan[i].size(), want.data());
        if (!want.empty()) REQUIRE(std::memcmp(want.data(), b->x.data_ptr<float>(), want.size() * 4) == 0);
        for (std::size_t k = 0; k < plan[i].size(); ++k) REQUIRE(b->y[static_cast<std::int64_t>(k)].item<std::int64_t>() == cls[plan[i][k] - range.begin]);
        ++i;
      }
      CHECK(i == plan.size());
    }
    // cancelling mid-plan and starting again works (no stale slots)
    loader.start(plan, 1, false);
    (void)loader.next();
    loader.start(plan, 1, false, 3);
    auto b = loader.next();
    REQUIRE(b);
    CHECK(b->index == 3);
  }
}

TEST_CASE("augmentation: each sample is one of the 8 flips/rotations (torch::flip/rot90), same for any thread count",
          "[train][loader]") {
  test::TempDir tmp("aug");
  const auto d = make_cache(tmp, "c", "--layout cube --patch 5 --bands 3 --rows 9 --cols 9");
  const auto cache = cache::CacheReader::open(d);
  const Range range{0, cache.n_samples()};
  const auto shard = cache::Shard::load(cache, range);
  std::vector<std::int64_t> cls(range.size(), 0);
  std::vector<std::vector<std::uint64_t>> plan;
  for (std::uint64_t b = 0; b * 8 < range.size(); ++b) {
    std::vector<std::uint64_t> ids;
    for (std::uint64_t k = b * 8; k < std::min<std::uint64_t>(range.size(), b * 8 + 8); ++k) ids.push_back(k);
    plan.push_back(ids);
  }
  auto collect = [&](int threads) {
    LoaderOptions lo;
    lo.threads = threads;
    lo.prefetch = 3;
    lo.augment = parse_augment("flip, rot90");
    BatchLoader loader(shard, cls, lo);
    loader.start(plan, 1234, true);
    std::vector<torch::Tensor> out;
    while (auto b = loader.next()) out.push_back(b->x.clone());
    return out;
  };
  const auto one = collect(1), three = collect(3);
  REQUIRE(one.size() == plan.size());
  int changed = 0;
  for (std::size_t b = 0; b < plan.size(); ++b) {
    REQUIRE(torch::equal(one[b], three[b]));
    std::vector<float> raw(plan[b].size() * shard.sample_floats());
    shard.gather(plan[b].data(), plan[b].size(), raw.data());
    const auto orig = torch::from_blob(raw.data(), one[b].sizes(), torch::kFloat32);
    for (std::int64_t k = 0; k < orig.size(0); ++k) {
      const auto o = orig[k];
      bool found = false;
      for (int flip = 0; flip < 2 && !found; ++flip) {
        const auto base = flip ? torch::flip(o, {2}) : o;
        for (int rot = 0; rot < 4 && !found; ++rot) found = torch::equal(torch::rot90(base, rot, {1, 2}), one[b][k]);
      }
      CHECK(found);
      changed += !torch::equal(o, one[b][k]);
    }
  }
  CHECK(changed > 0);
  CHECK_THROWS_AS(parse_augment("flip,mixup"), ConfigError);
  CHECK(!parse_augment("none").any());
}

TEST_CASE("ResidentBatches gives the ring's batches exactly: every layout, dtype, border, crop and augmentation",
          "[train][loader][resident]") {
  test::TempDir tmp("resident");
  struct Case {
    const char* args;
    int patch_override;
    Range (*range)(std::uint64_t n);
  };
  auto whole = [](std::uint64_t n) { return Range{0, n}; };
  auto middle = [](std::uint64_t n) { return Range{n / 4, n - n / 5}; };  // a rank's share: rows + halo only
  const std::vector<Case> cases = {
      {"--layout pixel --bands 5", 0, middle},
      {"--layout patch --patch 5 --bands 4 --dtype float16", 0, middle},
      {"--layout patch --patch 5 --bands 4", 3, whole},   // centre crop
      {"--layout patch --patch 5 --bands 4", 1, middle},  // spectral model on a patch cache
      {"--layout cube --patch 5 --bands 3 --rows 9 --cols 7 --dtype float16", 0, middle},
      {"--layout cube --patch 7 --bands 4 --rows 6 --cols 5 --border zero", 0, whole},
      {"--layout cube --patch 3 --bands 3 --rows 8 --cols 6 --scenes 2", 0, middle},
      {"--layout cube --patch 5 --bands 3 --rows 8 --cols 6", 1, whole},
  };
  int n_case = 0;
  for (const auto& c : cases) {
    const auto d = make_cache(tmp, "c" + std::to_string(n_case++), c.args);
    const auto cache = cache::CacheReader::open(d);
    const Range range = c.range(cache.n_samples());
    const auto shard = cache::Shard::load(cache, range, c.patch_override);
    std::vector<std::int64_t> cls(range.size());
    for (std::size_t i = 0; i < cls.size(); ++i) cls[i] = static_cast<std::int64_t>((i * 5) % 4);
    std::vector<std::vector<std::uint64_t>> plan;
    for (std::uint64_t b = 0; b < 9; ++b) {
      std::vector<std::uint64_t> ids;
      for (std::uint64_t k = 0; k < 1 + (b * 3) % 7; ++k) ids.push_back(range.begin + (b * 11 + k * 5) % range.size());
      plan.push_back(ids);
    }
    plan.push_back({});
    LoaderOptions lo;
    lo.threads = 2;
    lo.prefetch = 3;
    lo.augment = parse_augment("flip,rot90");
    BatchLoader ring(shard, cls, lo);
    ResidentBatches resident(shard, cls, lo);
    CHECK(std::string(resident.kind()) == "resident");
    for (const bool augment : {false, true}) {
      for (const std::size_t first : {std::size_t{0}, std::size_t{4}}) {
        INFO(c.args << " patch " << c.patch_override << " augment " << augment << " first " << first);
        ring.start(plan, 77, augment, first);
        resident.start(plan, 77, augment, first);
        std::size_t n = 0;
        while (auto a = ring.next()) {
          auto b = resident.next();
          REQUIRE(b);
          REQUIRE(b->index == a->index);
          REQUIRE(b->size == a->size);
          REQUIRE(b->x.sizes() == a->x.sizes());
          REQUIRE(b->x.scalar_type() == torch::kFloat32);
          REQUIRE(torch::equal(b->x, a->x));
          REQUIRE(torch::equal(b->y, a->y));
          ++n;
        }
        CHECK(!resident.next());
        CHECK(n == plan.size() - first);
      }
    }
    CHECK(resident_bytes(shard) > 0);
    const std::uint64_t outside = range.end < cache.n_samples() ? range.end : (range.begin > 0 ? 0 : cache.n_samples());
    CHECK_THROWS_AS(resident.start({{outside}}, 1, false), std::out_of_range);
  }
}

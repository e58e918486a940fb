// Planner: the budget terms add up, scale as they should, levers fit the budget, and the estimate
// agrees with the measured peak RSS increase of real CPU training steps.
#include <cmath>
#include <iostream>

#include <torch/torch.h>
// glog (through libtorch) defines CHECK; Catch2 owns it in tests.
#undef CHECK
#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "train/host_memory.hpp"
#include "train/models.hpp"
#include "train/planner.hpp"

using namespace hsipipe;
using namespace hsipipe::train;

namespace {
PlanRequest req(const std::string& model, int bands, int patch, int batch) {
  PlanRequest r;
  r.model = model;
  r.bands = bands;
  r.patch = patch;
  r.batch = batch;
  r.classes = 16;
  return r;
}
}  // namespace

// First in this binary, so the process has allocated little before it (glibc reuse would hide memory).
// Hidden from the default run (tag [.measure]): peak RSS on a shared CPU moves by +-30% between runs
// (glibc arenas, oneDNN reorder buffers, OpenMP), so like every speed and memory target it is a
// measurement to print and read, not a pass/fail gate in ctest. Run it with
//   build/tests/train/test_train_planner "[.measure]"
TEST_CASE("estimate vs measured peak RSS of real CPU steps (li3d, hybridsn)", "[planner][.measure]") {
  torch::set_num_threads(2);
  // Large enough that the activations dominate allocator noise (tens to hundreds of MiB), small enough
  // to run in a few seconds on 2 cores.
  const PlanRequest cases[] = {req("li3d", 64, 9, 256), req("hybridsn", 30, 15, 64)};
  for (const auto& r : cases) {
    const Plan p = make_plan(r);
    const Measured m = measure_cpu_step(r, 2);
    const double est = static_cast<double>(p.total), got = static_cast<double>(m.peak_rss_increase);
    const double rel = (est - got) / got;
    std::cout << "planner check " << r.model << " bands " << r.bands << " patch " << r.patch << " batch " << r.batch
              << ": estimate " << format_bytes(p.total) << " (act " << format_bytes(p.m_act) << ", workspace "
              << format_bytes(p.m_workspace) << "), measured peak RSS increase " << format_bytes(m.peak_rss_increase)
              << " (" << std::lround(rel * 100) << "%)" << (m.peak_reset ? "" : " [peak not reset]") << std::endl;
    INFO(r.model << ": estimate " << est << " measured " << got);
    CHECK(m.peak_reset);
    // CPU tolerance: 35% (glibc arenas, oneDNN reorder buffers and the OpenMP runtime add noise the
    // device allocator statistics do not have; the 25% applies to the GPU check).
    CHECK(std::abs(rel) < 0.35);
  }
}

TEST_CASE("parse_bytes and format_bytes", "[planner]") {
  CHECK(parse_bytes("24GiB") == 24ull << 30);
  CHECK(parse_bytes("512 MiB") == 512ull << 20);
  CHECK(parse_bytes("1.5GB") == 1500000000ull);
  CHECK(parse_bytes("1000") == 1000);
  CHECK_THROWS_AS(parse_bytes("lots"), ConfigError);
  CHECK_THROWS_WITH(parse_bytes("3 parsecs", "--budget"), Catch::Contains("--budget"));
  CHECK(format_bytes(3ull << 30) == "3.00 GiB");
}

TEST_CASE("budget terms add up and scale", "[planner]") {
  const Plan a = make_plan(req("hybridsn", 30, 13, 32));
  const Plan b = make_plan(req("hybridsn", 30, 13, 64));
  auto model = make_model("hybridsn", 30, 13, 16);
  CHECK(a.params == count_parameters(*model));
  CHECK(a.m_param == static_cast<std::uint64_t>(a.params) * 4);
  CHECK(a.m_grad == a.m_param);
  CHECK(a.m_opt == 2 * a.m_param);  // adam
  CHECK(a.total == a.m_param + a.m_grad + a.m_opt + a.m_act + a.m_input + a.m_workspace);
  CHECK(b.m_act == 2 * a.m_act);  // activations linear in the batch
  CHECK(b.m_param == a.m_param);
  CHECK(b.m_input == 2 * a.m_input);
  std::uint64_t layer_sum = 0;
  for (const auto& l : a.layers) layer_sum += l.act_bytes;
  CHECK(layer_sum == a.m_act);
  CHECK(a.layers.back().out == std::vector<std::int64_t>{32, 16});

  // Ranks share the global batch.
  auto r2 = req("hybridsn", 30, 13, 64);
  r2.ranks = 2;
  CHECK(make_plan(r2).total == a.total);
  // bf16 halves activations; sgd without momentum has no optimizer state.
  auto rb = req("hybridsn", 30, 13, 32);
  rb.precision = "bf16";
  CHECK(make_plan(rb).m_act < a.m_act);
  auto rs = req("hybridsn", 30, 13, 32);
  rs.optimizer = "sgd";
  rs.momentum = 0;
  CHECK(make_plan(rs).m_opt == 0);

  // Hand count for li3d on 16 bands, patch 5: conv1 keeps nothing new (the input is the batch),
  // relu1 keeps its output 16 x 12 x 3 x 3, conv2 reuses it, relu2 keeps 32 x 12 x 1 x 1, fc reuses it.
  const Plan l = make_plan(req("li3d", 16, 5, 10));
  CHECK(l.m_act == 10ull * 4 * (16 * 12 * 3 * 3 + 32 * 12));
  CHECK(l.m_input == 10ull * (16 * 5 * 5 * 4 + 8));

  CHECK_THROWS_AS(make_plan(req("li3d", 16, 1, 10)), ConfigError);
  auto bad = req("li3d", 16, 5, 10);
  bad.precision = "fp8";
  CHECK_THROWS_WITH(make_plan(bad), Catch::Contains("--precision"));
}

TEST_CASE("cache sizes per layout", "[planner]") {
  auto r = req("hybridsn", 30, 25, 64);
  r.rows = 512;
  r.cols = 217;
  r.samples = 54129;
  const Plan p = make_plan(r);
  REQUIRE(p.caches.size() == 3);
  CHECK(p.caches[0].bytes == 54129ull * 30 * 2 + 54129ull * 16);
  CHECK(p.caches[1].bytes == 54129ull * 30 * 625 * 2 + 54129ull * 16);
  CHECK(p.caches[2].bytes == 512ull * 217 * 30 * 2 + 54129ull * 16);
}

TEST_CASE("host memory per rank: shard, ring and streaming window per layout", "[planner]") {
  auto r = req("hybridsn", 30, 25, 64);
  r.rows = 512;
  r.cols = 217;
  r.samples = 54129;
  r.ranks = 2;
  r.prefetch = 3;
  const Plan p = make_plan(r);
  REQUIRE(p.host.size() == 3);
  const std::uint64_t page = 4096, bpr = 32;
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(p.host[i].layout == p.caches[i].layout);
    CHECK(p.host[i].shard == (p.caches[i].bytes + 1) / 2);
    CHECK(p.host[i].ring == 3 * bpr * (30ull * 25 * 25 * 4 + 8));  // the ring's slots hold the model's input
  }
  // pixel: a 60-byte spectrum spans at most 2 pages; patch: 37,500 bytes = 10 pages (+1 straddled);
  // cube: 25 row segments of 1,500 bytes, 2 pages each
  CHECK(p.host[0].window == 3 * bpr * 2 * page);
  CHECK(p.host[1].window == 3 * bpr * 11 * page);
  CHECK(p.host[2].window == std::min(p.host[2].shard, 3 * bpr * 25 * 2 * page));
  r.prefetch = 0;
  CHECK_THROWS_WITH(make_plan(r), Catch::Contains("--prefetch 0"));
}

TEST_CASE("host memory: the shard limit is what the budget leaves, a budget below the floor is refused", "[planner]") {
  HostMemoryRequest q;
  q.budget = 100ull << 20;
  q.batch_per_rank = 32;
  q.prefetch = 4;
  q.sample_floats = 200;
  q.stored_item_bytes = 8192;
  q.model = 10ull << 20;
  const HostMemory m = plan_host_memory(q);
  CHECK(m.ring == 4 * 32 * (200 * 4 + 8));
  CHECK(m.window == 4 * 32 * 8192);
  CHECK(m.shard_limit == q.budget - m.ring - m.window - m.model);
  q.shard_limit_mb = 3;
  CHECK(plan_host_memory(q).shard_limit == 3ull << 20);
  q.budget = m.floor() - 1;
  q.budget_given = true;
  CHECK_THROWS_WITH(plan_host_memory(q), Catch::Contains("loader ring") && Catch::Contains("--host-memory-mb"));
  CHECK(parse_memory_mb("auto", "--x", 0) == -1);
  CHECK(parse_memory_mb("0", "--x", 0) == 0);
  CHECK_THROWS_AS(parse_memory_mb("0", "--x", 1), ConfigError);
  CHECK_THROWS_AS(parse_memory_mb("12MB", "--x", 0), ConfigError);
  CHECK_THROWS_AS(parse_memory_mb("-3", "--x", 0), ConfigError);
}

TEST_CASE("levers bring an over-budget plan within reach", "[planner]") {
  auto r = req("hybridsn", 200, 25, 256);
  const Plan full = make_plan(r);
  r.budget = full.total / 3;
  const Plan p = make_plan(r);
  REQUIRE(p.total > r.budget);
  REQUIRE(!p.levers.empty());
  bool any_fits = false;
  for (const auto& l : p.levers) {
    INFO(l.lever << ": " << l.change << " -> " << l.total);
    CHECK(l.fits == (l.total <= r.budget));
    any_fits |= l.fits;
  }
  CHECK(any_fits);
  // The batch lever names the largest batch that fits: one more sample per rank would not.
  for (const auto& l : p.levers) {
    if (l.lever != "batch") continue;
    const int b = std::stoi(l.change.substr(std::string("--batch ").size()));
    auto more = r;
    more.batch = b + 1;
    more.budget = 0;
    CHECK(make_plan(more).total > r.budget);
  }
  CHECK(plan_text(p).find("Levers") != std::string::npos);
  r.budget = full.total * 2;
  CHECK(make_plan(r).levers.empty());
}

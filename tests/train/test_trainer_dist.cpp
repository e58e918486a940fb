// Data-parallel training under real mpiexec (1, 2, 3 ranks):
//  - one step on R ranks == one step of single-process training on the same global batch;
//  - after an epoch with uneven shards every rank holds identical parameters;
//  - train(): the all-gathered validation covers each validation sample exactly once (R = 3, N odd).
//
// Tolerance of the one-step comparison: |p_R - p_1| <= 1e-6 + 1e-5 |p_1| per parameter (float32).
// Why not bitwise: the R-rank gradient is a sum of R partial sums (each rank's samples) reduced by
// MPI, the single-process one a single sum over the batch; float32 addition is not associative, so
// the two differ by a few ulp of the gradient's magnitude (~1e-7 relative), times lr for SGD; Adam's
// first step (m / sqrt(v) ~ sign(g)) is bounded by lr. 1e-6 absolute leaves a margin of ~10x.
#include <torch/torch.h>
// glog (pulled in by libtorch) defines CHECK too: Catch2's must win
#undef CHECK
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <numeric>
#include <sstream>

#include "cache/cache.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/hash.hpp"
#include "dist/comm.hpp"
#include "folds/folds.hpp"
#include "folds/rng.hpp"
#include "support/test_util.hpp"
#include "train/loader.hpp"
#include "train/metrics.hpp"
#include "train/models.hpp"
#include "train/step.hpp"
#include "train/trainer.hpp"

using namespace hsipipe;
using namespace hsipipe::train;

namespace {

/// Rank 0 makes a cache with tests/train/make_cache.py in a temp dir; every rank gets the path.
struct SharedCache {
  const dist::Comm& world;
  std::unique_ptr<test::TempDir> tmp;  // rank 0 only
  std::string dir;
  // Rank 0 removes the directory: not before every rank is done with the cache (a rank still opening
  // coords.npy once found it gone).
  ~SharedCache() { world.barrier(); }
  SharedCache(const dist::Comm& w, const std::string& args) : world(w) {
    std::string path;
    int ok = 1;
    if (world.rank() == 0) {
      tmp = std::make_unique<test::TempDir>("train-dist");
      path = tmp->str("cache");
      const auto r = test::run(test::python() + " " + test::source_dir() + "/tests/train/make_cache.py " + path + " " + args);
      if (r.status != 0) {
        ok = 0;
        FAIL_CHECK("make_cache.py failed: " << r.output);
      }
    }
    REQUIRE(world.all_ok(ok == 1));
    dir = world.bcast_string(path);
  }
  std::string root() const { return dir.substr(0, dir.rfind('/')); }
};

std::vector<std::uint64_t> pick_ids(std::uint64_t n, std::size_t count, std::uint64_t seed) {
  std::vector<std::uint64_t> all(n);
  std::iota(all.begin(), all.end(), 0);
  folds::SplitMix64 g(seed);
  folds::shuffle(all, g);
  all.resize(std::min<std::size_t>(count, all.size()));
  return all;
}

struct LocalBatch {
  torch::Tensor x, y;
};
LocalBatch make_batch(const cache::Shard& shard, const cache::SampleTable& t, const ClassIndex& ci,
                      const std::vector<std::uint64_t>& ids) {
  std::vector<std::uint64_t> mine;
  for (auto id : ids)
    if (shard.range().contains(id)) mine.push_back(id);
  std::vector<std::int64_t> shape{static_cast<std::int64_t>(mine.size()), shard.bands()};
  if (shard.patch() > 1) {
    shape.push_back(shard.patch());
    shape.push_back(shard.patch());
  }
  LocalBatch b{torch::empty(shape), torch::empty({static_cast<std::int64_t>(mine.size())}, torch::kInt64)};
  shard.gather(mine.data(), mine.size(), b.x.data_ptr<float>());
  for (std::size_t i = 0; i < mine.size(); ++i) b.y[static_cast<std::int64_t>(i)] = ci.index(t.label[mine[i]]);
  return b;
}

void one_step_matches(const std::string& model_name, const std::string& optimizer, const std::string& cache_args,
                      int patch_override) {
  const dist::Comm world(MPI_COMM_WORLD);
  SharedCache sc(world, cache_args);
  const auto cache = cache::CacheReader::open(sc.dir);
  const auto table = cache.read_sample_table();
  const ClassIndex ci(cache.manifest()["label_values"].get<std::vector<std::int32_t>>());
  const std::uint64_t N = cache.n_samples();
  const int R = world.size();
  const auto ids = pick_ids(N, 37, 99);
  const auto G = static_cast<std::int64_t>(ids.size());

  auto run_step = [&](const cache::Shard& shard, const dist::Comm& comm_world) {
    auto comm = dist::make_communicator(dist::Backend::mpi, comm_world);
    const int p = shard.patch();
    auto model = make_model(model_name, shard.bands(), p, ci.size(), 7);
    std::unique_ptr<torch::optim::Optimizer> opt;
    if (optimizer == "sgd") opt = std::make_unique<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    else opt = std::make_unique<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(1e-3));
    GradSync sync(model->parameters(), *comm);
    const auto b = make_batch(shard, table, ci, ids);
    train_step(*model, *opt, sync, b.x, b.y, G, Precision::fp32);
    return model;
  };
  const auto before = make_model(model_name, cache.n_bands(), patch_override > 0 ? patch_override : cache.patch(), ci.size(), 7);
  const auto dist_shard = cache::Shard::load(cache, split_range(N, R, world.rank()), patch_override);
  auto dist_model = run_step(dist_shard, world);
  // the reference: this process alone (MPI_COMM_SELF), the whole cache, the same global batch
  const dist::Comm self(MPI_COMM_SELF);
  const auto full = cache::Shard::load(cache, Range{0, N}, patch_override);
  auto ref_model = run_step(full, self);

  const auto pd = dist_model->parameters(), pr = ref_model->parameters(), p0 = before->parameters();
  REQUIRE(pd.size() == pr.size());
  double max_err = 0, max_change = 0;
  for (std::size_t i = 0; i < pd.size(); ++i) {
    const auto err = (pd[i] - pr[i]).abs() - 1e-5 * pr[i].abs();
    max_err = std::max(max_err, err.max().item<double>());
    max_change = std::max(max_change, (pr[i] - p0[i]).abs().max().item<double>());
  }
  INFO("model " << model_name << " " << optimizer << " on " << R << " ranks: max excess error " << max_err
                << ", max parameter change " << max_change);
  CHECK(max_change > 1e-4);  // the step did move the parameters
  CHECK(max_err <= 1e-6);
}

/// Rank 0 writes stratified k-fold splits of the cache to ROOT/folds.json (with its data checksum, as
/// `hsipipe folds` does); every rank returns the path after a barrier.
std::string write_folds(const dist::Comm& world, const SharedCache& sc, int k) {
  const std::string path = sc.root() + "/folds.json";
  if (world.rank() == 0) {
    const auto cache = cache::CacheReader::open(sc.dir);
    const auto t = cache.read_sample_table();
    std::vector<folds::SceneSize> sizes;
    for (const auto& s : t.scenes) sizes.push_back({s.rows, s.cols});
    folds::FoldParams fp;
    fp.k = k;
    auto f = folds::make_folds(folds::SampleTableView{t.scene, t.row, t.col, t.label, sizes, 1}, fp);
    f.data_checksum = cache.data_checksum();
    folds::save_folds(f, path);
  }
  world.barrier();
  return path;
}

/// CPU training of one fold of the shared cache into ROOT/run.
TrainOptions cpu_fold_options(const SharedCache& sc, const std::string& folds_path, const std::string& model,
                              const std::string& fold, int epochs, int batch) {
  TrainOptions o;
  o.cache = sc.dir;
  o.folds = folds_path;
  o.model = model;
  o.out = sc.root() + "/run";
  o.fold = fold;
  o.epochs = epochs;
  o.batch = batch;
  o.device = "cpu";
  return o;
}

std::uint64_t param_hash(torch::nn::Module& m) {
  Xxh3Stream h;
  for (const auto& p : m.parameters()) {
    auto c = p.detach().contiguous();
    h.update(c.data_ptr(), static_cast<std::size_t>(c.numel()) * 4);
  }
  return h.digest();
}

}  // namespace

TEST_CASE("split_batch: proportional, exact total, empty ranks get nothing", "[train]") {
  CHECK(split_batch(10, {5, 5}) == std::vector<std::int64_t>{5, 5});
  CHECK(split_batch(10, {7, 3, 0}) == std::vector<std::int64_t>{7, 3, 0});
  CHECK(split_batch(10, {1, 1, 1}) == std::vector<std::int64_t>{1, 1, 1});  // capped at the total
  const auto s = split_batch(64, {34, 33, 33});
  CHECK(std::accumulate(s.begin(), s.end(), std::int64_t{0}) == 64);
  CHECK(s == std::vector<std::int64_t>{22, 21, 21});
  CHECK(split_batch(5, {0, 0}) == std::vector<std::int64_t>{0, 0});
}

TEST_CASE("epoch_plan: fixed steps, each local id once before any repeat, pure", "[train]") {
  std::vector<std::uint64_t> ids{10, 11, 12, 13, 14, 15, 16};
  const auto plan = epoch_plan(ids, 3, 4, 42, 1, 2, 0);
  REQUIRE(plan.size() == 4);
  std::vector<std::uint64_t> flat;
  for (const auto& b : plan) {
    CHECK(b.size() == 3);
    flat.insert(flat.end(), b.begin(), b.end());
  }
  std::vector<std::uint64_t> first7(flat.begin(), flat.begin() + 7);
  std::sort(first7.begin(), first7.end());
  CHECK(first7 == ids);  // a full pass before the reshuffle
  CHECK(epoch_plan(ids, 3, 4, 42, 1, 2, 0) == plan);
  CHECK(epoch_plan(ids, 3, 4, 42, 1, 3, 0) != plan);  // another epoch, another order
  CHECK(epoch_plan({}, 3, 4, 42, 1, 2, 0) == std::vector<std::vector<std::uint64_t>>(4));
}

TEST_CASE("one step on R ranks equals single-process training on the same global batch", "[train][mpi]") {
  SECTION("hu1d, sgd, pixel float32") { one_step_matches("hu1d", "sgd", "--layout pixel --rows 9 --cols 11 --bands 24", 0); }
  SECTION("mlp, adam, pixel float16") { one_step_matches("mlp", "adam", "--layout pixel --rows 9 --cols 11 --bands 24 --dtype float16", 0); }
  SECTION("li3d, sgd, cube patches 5x5") {
    one_step_matches("li3d", "sgd", "--layout cube --patch 5 --rows 9 --cols 11 --bands 12", 0);
  }
}

TEST_CASE("an epoch with uneven shards: same step count, identical parameters on every rank", "[train][mpi]") {
  const dist::Comm world(MPI_COMM_WORLD);
  // 9 x 11 = 99 pixels, ~20% unlabeled: N odd or even depending on the draw; the train subset is uneven anyway
  SharedCache sc(world, "--layout patch --patch 3 --rows 9 --cols 11 --bands 12 --seed 3");
  const auto cache = cache::CacheReader::open(sc.dir);
  const auto table = cache.read_sample_table();
  const ClassIndex ci(cache.manifest()["label_values"].get<std::vector<std::int32_t>>());
  const std::uint64_t N = cache.n_samples();
  const int R = world.size(), r = world.rank();
  const Range range = split_range(N, R, r);
  const auto shard = cache::Shard::load(cache, range, 0);
  // an uneven training subset: every sample of rank 0's range, every third elsewhere
  std::vector<std::uint64_t> mine;
  for (auto i = range.begin; i < range.end; ++i)
    if (r == 0 || i % 3 == 0) mine.push_back(i);
  const auto counts = world.allgatherv(std::vector<std::uint64_t>{mine.size()});
  const std::uint64_t total = std::accumulate(counts.begin(), counts.end(), std::uint64_t{0});
  const auto share = split_batch(16, counts);
  const std::int64_t G = std::accumulate(share.begin(), share.end(), std::int64_t{0});
  const auto steps = static_cast<std::int64_t>((total + 15) / 16);
  std::vector<std::int64_t> class_of(range.size());
  for (auto i = range.begin; i < range.end; ++i) class_of[i - range.begin] = ci.index(table.label[i]);
  LoaderOptions lo;
  lo.threads = 2;
  lo.prefetch = 2;
  lo.augment = parse_augment("flip,rot90");
  BatchLoader loader(shard, class_of, lo);
  auto comm = dist::make_communicator(dist::Backend::mpi, world);
  auto model = make_model("hamida3d", shard.bands(), 3, ci.size(), 5);
  torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(1e-3));
  GradSync sync(model->parameters(), *comm);
  loader.start(epoch_plan(mine, share[static_cast<std::size_t>(r)], steps, 1, 0, 0, r), 77, true);
  std::int64_t done = 0;
  while (auto b = loader.next()) {
    train_step(*model, opt, sync, b->x, b->y, G, Precision::fp32);
    ++done;
  }
  CHECK(done == steps);
  CHECK(world.allreduce_min(done) == world.allreduce_max(done));
  const std::uint64_t h = param_hash(*model);
  CHECK(world.allreduce_min(h) == world.allreduce_max(h));
  CHECK(h != param_hash(*make_model("hamida3d", shard.bands(), 3, ci.size(), 5)));
}

TEST_CASE("train(): validation all-gathered covers each validation sample exactly once", "[train][mpi]") {
  const dist::Comm world(MPI_COMM_WORLD);
  // 7 x 9 = 63 pixels with no unlabeled ones: N = 63 is odd, shards of 21 (R = 3), 32/31 (R = 2)
  SharedCache sc(world, "--layout pixel --rows 7 --cols 9 --bands 10 --unlabeled 0");
  const std::string folds_path = write_folds(world, sc, 4);
  const TrainOptions o = cpu_fold_options(sc, folds_path, "hu1d", "1", 2, 8);
  std::ostringstream log;
  REQUIRE(hsipipe::train::train(o, world, log) == 0);
  world.barrier();
  if (world.rank() == 0) {
    INFO(log.str());
    const auto f = folds::load_folds(folds_path);
    const auto want = f.val_ids(1);
    std::ifstream csv(o.out + "/fold-1/predictions.csv");
    std::string line;
    std::getline(csv, line);  // header
    std::vector<std::uint64_t> got;
    while (std::getline(csv, line))
      if (!line.empty()) got.push_back(std::stoull(line.substr(0, line.find(','))));
    std::sort(got.begin(), got.end());
    CHECK(got == want);
    CHECK(std::adjacent_find(got.begin(), got.end()) == got.end());
    std::ifstream ep(o.out + "/fold-1/epochs.jsonl");
    int n = 0;
    while (std::getline(ep, line)) {
      if (line.empty()) continue;
      const auto j = nlohmann::json::parse(line);
      CHECK(j["val"]["n"].get<std::size_t>() == want.size());
      CHECK(j["replicas_identical"].get<bool>());
      CHECK(j["ranks"].get<int>() == world.size());
      for (const char* k : {"data_wait", "compute", "communication", "evaluation", "checkpoint", "total"}) CHECK(j["time_s"].contains(k));
      CHECK(j["peak_rss_bytes"].get<std::uint64_t>() > 0);
      ++n;
    }
    CHECK(n == 2);
  }
}

TEST_CASE("train(): a global batch smaller than the rank count: ranks without a sample step with the others", "[train][mpi]") {
  // --batch 1 on R ranks: every step, one rank trains on one sample and the others on none (empty batches
  // from their loaders, zero gradients in the all-reduce). It hung before (an empty loader slot threw on
  // one rank while the others waited in the step's all-reduce).
  const dist::Comm world(MPI_COMM_WORLD);
  SharedCache sc(world, "--layout pixel --rows 5 --cols 6 --bands 8 --unlabeled 0");
  const std::string folds_path = write_folds(world, sc, 3);
  const TrainOptions o = cpu_fold_options(sc, folds_path, "mlp", "0", 2, 1);
  std::ostringstream log;
  REQUIRE(hsipipe::train::train(o, world, log) == 0);
  world.barrier();
  if (world.rank() == 0) {
    INFO(log.str());
    std::ifstream ep(o.out + "/fold-0/epochs.jsonl");
    std::string line;
    int n = 0;
    while (std::getline(ep, line)) {
      if (line.empty()) continue;
      const auto j = nlohmann::json::parse(line);
      CHECK(j["global_batch"].get<int>() == 1);
      CHECK(j["replicas_identical"].get<bool>());
      ++n;
    }
    CHECK(n == 2);
  }
}

TEST_CASE("train(): --loader resident gives the ring's results exactly; the time split adds up to the epoch",
          "[train][mpi][resident]") {
  // The device-resident batches (train/resident.cpp) run here on CPU tensors: same plan, same augmentation,
  // same values, so --deterministic training must end with the same weights and predictions as the ring.
  const dist::Comm world(MPI_COMM_WORLD);
  SharedCache sc(world, "--layout cube --patch 5 --rows 12 --cols 11 --bands 6 --unlabeled 0.1 --dtype float16");
  const std::string folds_path = write_folds(world, sc, 3);
  auto run = [&](const std::string& loader) {
    TrainOptions o = cpu_fold_options(sc, folds_path, "hamida3d", "2", 2, 8);
    o.loader = loader;
    o.augment = "flip,rot90";
    o.deterministic = true;
    o.out = sc.root() + "/run-" + loader;
    std::ostringstream log;
    REQUIRE(hsipipe::train::train(o, world, log) == 0);
    world.barrier();
    return o.out;
  };
  const auto ring = run("ring"), resident = run("resident");
  if (world.rank() != 0) return;
  auto records = [](const std::string& dir) {
    std::vector<nlohmann::json> out;
    std::ifstream ep(dir + "/fold-2/epochs.jsonl");
    std::string line;
    while (std::getline(ep, line))
      if (!line.empty()) out.push_back(nlohmann::json::parse(line));
    return out;
  };
  const auto a = records(ring), b = records(resident);
  REQUIRE(a.size() == 2);
  REQUIRE(b.size() == 2);
  for (std::size_t e = 0; e < a.size(); ++e) {
    CHECK(a[e]["batches"] == "ring");
    CHECK(b[e]["batches"] == "resident");
    CHECK(a[e]["parameter_hash"] == b[e]["parameter_hash"]);
    CHECK(a[e]["loss"] == b[e]["loss"]);
    CHECK(a[e]["val"] == b[e]["val"]);
    for (const auto& r : {a[e], b[e]}) {
      const auto& t = r["time_s"];
      double parts = 0;
      for (const char* k : {"data_wait", "compute", "communication", "idle", "evaluation", "checkpoint"}) parts += t[k].get<double>();
      CHECK(parts <= t["total"].get<double>() * 1.001 + 1e-3);  // disjoint intervals of the epoch
      CHECK(r["clock"] == "host");
    }
  }
  CHECK(hsipipe::fs::read_text(ring + "/fold-2/predictions.csv") == hsipipe::fs::read_text(resident + "/fold-2/predictions.csv"));
}

// `hsipipe train` end to end (real processes, real mpiexec): --fold all reads the cache once;
// --fold I tasks + `hsipipe report` give the same summary; refusals before training; SIGTERM writes a
// usable checkpoint (exit 75) and --resume with --deterministic ends with bitwise the same weights as
// an uninterrupted run. Caches are made by tests/train/make_cache.py (numpy), folds by `hsipipe folds`.
#include <torch/torch.h>
// glog (pulled in by libtorch) defines CHECK too: Catch2's must win
#undef CHECK
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/fs.hpp"
#include "train/models.hpp"
#include "support/test_util.hpp"

using namespace hsipipe;
namespace fsys = std::filesystem;

namespace {

std::string bin() { return test::hsipipe_bin(); }
std::string mpiexec(int n) { return std::string(HSIPIPE_MPIEXEC) + " -n " + std::to_string(n) + " --oversubscribe "; }

std::string make_cache(const std::string& dir, const std::string& args) {
  const auto r = test::run(test::python() + " " + test::source_dir() + "/tests/train/make_cache.py " + dir + " " + args);
  INFO(r.output);
  REQUIRE(r.status == 0);
  return dir;
}
std::string make_folds(const std::string& cache, const std::string& out, int k) {
  const auto r = test::run(bin() + " folds --cache " + cache + " --k " + std::to_string(k) + " --seed 5 --out " + out);
  INFO(r.output);
  REQUIRE(r.status == 0);
  return out;
}
nlohmann::json read_json(const std::string& p) { return nlohmann::json::parse(fs::read_text(p)); }

/// The parameters of a checkpoint's "model" entry, loaded into a fresh model of that architecture.
std::vector<torch::Tensor> checkpoint_params(const std::string& path, const std::string& model, int bands, int patch,
                                             int classes) {
  torch::serialize::InputArchive ar, m;
  ar.load_from(path);
  ar.read("model", m);
  auto net = train::make_model(model, bands, patch, classes, 1);
  net->load(m);
  return net->parameters();
}

}  // namespace

TEST_CASE("train --fold all on 2 ranks reads one shard per rank; --fold I tasks + report give the same summary",
          "[train][cli]") {
  test::TempDir tmp("train-cli");
  // noisy classes: OA ~0.8, so the compared per-fold figures are not all 1
  const auto cache = make_cache(tmp.str("cache"), "--layout pixel --rows 12 --cols 11 --bands 10 --unlabeled 0.1 --noise 1.5");
  const auto folds = make_folds(cache, tmp.str("folds.json"), 3);
  const std::string common = " train --cache " + cache + " --folds " + folds +
                             " --model hu1d --epochs 2 --batch 16 --lr 0.01 --deterministic --quiet --seed 9";
  const auto all = test::run(mpiexec(2) + bin() + common + " --fold all --out " + tmp.str("all"));
  INFO(all.output);
  REQUIRE(all.status == 0);
  CHECK(all.output.find("nothing decoded") != std::string::npos);
  const auto s_all = read_json(tmp.str("all/summary.json"));
  REQUIRE(s_all["folds"].size() == 3);
  CHECK(s_all["mean"]["oa"].get<double>() < 1.0);
  // one shard per rank: the bytes read are exactly the samples array, split in two (io.json, beside the summary)
  const auto manifest = read_json(cache + "/manifest.json");
  const std::uint64_t n = manifest["n_samples"], b = manifest["n_bands"];
  const auto io = read_json(tmp.str("all/io.json"));
  const auto per_rank = io["cache_bytes_read_per_rank"].get<std::vector<std::uint64_t>>();
  REQUIRE(per_rank.size() == 2);
  CHECK(per_rank[0] == ((n + 1) / 2) * b * 4);
  CHECK(per_rank[1] == (n / 2) * b * 4);
  CHECK(io["shard_loads"] == 1);
  CHECK(io["folds"] == 3);
  CHECK(io["scene_bytes_decoded"] == 0);

  for (int f = 0; f < 3; ++f) {
    const auto r = test::run(mpiexec(2) + bin() + common + " --fold " + std::to_string(f) + " --out " + tmp.str("tasks"));
    INFO(r.output);
    REQUIRE(r.status == 0);
  }
  const auto rep = test::run(bin() + " report " + tmp.str("tasks"));
  INFO(rep.output);
  REQUIRE(rep.status == 0);
  const auto s_tasks = read_json(tmp.str("tasks/summary.json"));
  // the whole summary, key by key (a key only one side has shows up as null on the other), then as a whole
  std::set<std::string> keys;
  for (const auto& [k, v] : s_all.items()) keys.insert(k);
  for (const auto& [k, v] : s_tasks.items()) keys.insert(k);
  for (const auto& k : keys) {
    INFO("summary.json key " << k);
    CHECK(s_tasks.value(k, nlohmann::json()) == s_all.value(k, nlohmann::json()));
  }
  CHECK(s_tasks == s_all);
  CHECK(fs::read_text(tmp.str("tasks/summary.md")) == fs::read_text(tmp.str("all/summary.md")));
  // report over the --fold all run rewrites its summary unchanged
  const auto again = test::run(bin() + " report --quiet " + tmp.str("all"));
  INFO(again.output);
  REQUIRE(again.status == 0);
  CHECK(read_json(tmp.str("all/summary.json")) == s_all);
}

TEST_CASE("train refuses a model/layout mismatch and a folds file of another cache before training", "[train][cli]") {
  test::TempDir tmp("train-refuse");
  const auto cache = make_cache(tmp.str("cache"), "--layout pixel --rows 8 --cols 8 --bands 6");
  const auto other = make_cache(tmp.str("other"), "--layout pixel --rows 9 --cols 8 --bands 6 --seed 4");
  const auto folds = make_folds(cache, tmp.str("folds.json"), 3);
  const auto other_folds = make_folds(other, tmp.str("other_folds.json"), 3);
  const std::string base = " train --cache " + cache + " --epochs 1 --out " + tmp.str("run");
  const auto mism = test::run(mpiexec(2) + bin() + base + " --folds " + folds + " --model li3d");
  INFO(mism.output);
  CHECK(mism.status == 2);
  CHECK(mism.output.find("layout pixel") != std::string::npos);
  const auto stale = test::run(mpiexec(2) + bin() + base + " --folds " + other_folds + " --model hu1d");
  INFO(stale.output);
  CHECK(stale.status == 5);
  CHECK(stale.output.find(other_folds) != std::string::npos);
  CHECK(stale.output.find(cache) != std::string::npos);
  CHECK_FALSE(fsys::exists(tmp.str("run/fold-0/metrics.json")));
  const auto badfold = test::run(bin() + base + " --folds " + folds + " --model hu1d --fold 3");
  CHECK(badfold.status == 2);
}

TEST_CASE("SIGTERM writes a checkpoint and exits 75; --resume ends with the weights of an uninterrupted run",
          "[train][cli]") {
  test::TempDir tmp("train-sig");
  const auto cache = make_cache(tmp.str("cache"), "--layout patch --patch 3 --rows 20 --cols 20 --bands 8 --unlabeled 0");
  const auto folds = make_folds(cache, tmp.str("folds.json"), 2);
  const std::string opts = " train --cache " + cache + " --folds " + folds +
                           " --model hamida3d --fold 0 --epochs 12 --batch 4 --deterministic --augment flip,rot90 --quiet";
  const auto ref = test::run(bin() + opts + " --out " + tmp.str("ref"));
  INFO(ref.output);
  REQUIRE(ref.status == 0);

  // interrupted run: started directly (singleton MPI), SIGTERM once its first epoch is recorded
  const std::string run_dir = tmp.str("int");
  const std::string log = tmp.str("int.log");
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const std::string cmd = "exec " + bin() + opts + " --out " + run_dir + " > " + log + " 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    std::ifstream ep(run_dir + "/fold-0/epochs.jsonl");
    std::string line;
    if (ep && std::getline(ep, line) && !line.empty()) break;
    int st = 0;
    if (waitpid(pid, &st, WNOHANG) == pid) FAIL("the run ended before it could be interrupted: " << fs::read_text(log));
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(120)) {
      kill(pid, SIGKILL);
      FAIL("no epoch record after 120 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  REQUIRE(kill(pid, SIGTERM) == 0);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  const std::string out1 = fs::read_text(log);
  INFO(out1);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 75);
  CHECK(out1.find("checkpoint written, exiting for requeue") != std::string::npos);
  REQUIRE(fsys::exists(run_dir + "/fold-0/checkpoint.pt"));
  CHECK_FALSE(fsys::exists(run_dir + "/fold-0/metrics.json"));

  const auto res = test::run(bin() + opts + " --out " + run_dir + " --resume");
  INFO(res.output);
  REQUIRE(res.status == 0);
  CHECK(res.output.find("resumed from checkpoint") != std::string::npos);
  const auto a = checkpoint_params(tmp.str("ref/fold-0/checkpoint.pt"), "hamida3d", 8, 3, 3);
  const auto b = checkpoint_params(run_dir + "/fold-0/checkpoint.pt", "hamida3d", 8, 3, 3);
  const auto fresh = train::make_model("hamida3d", 8, 3, 3, 1)->parameters();
  REQUIRE(a.size() == b.size());
  bool trained = false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(torch::equal(a[i], b[i]));
    trained |= !torch::equal(a[i], fresh[i]);
  }
  CHECK(trained);
  CHECK(read_json(tmp.str("ref/fold-0/metrics.json"))["metrics"] == read_json(run_dir + "/fold-0/metrics.json")["metrics"]);
  // the epoch records continue where they stopped: 12 in all
  std::ifstream ep(run_dir + "/fold-0/epochs.jsonl");
  int lines = 0;
  for (std::string l; std::getline(ep, l);) lines += !l.empty();
  CHECK(lines == 12);
}

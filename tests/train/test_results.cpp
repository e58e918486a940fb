// Results: fold files, PNGs, and the run summary (mean, sample std, refusals of mixed or missing folds).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "support/test_util.hpp"
#include "train/results.hpp"

using namespace hsipipe;
using namespace hsipipe::train;
namespace stdfs = std::filesystem;

namespace {

const std::vector<std::int32_t> kLabels = {2, 5, 9};
const std::vector<cache::SceneDims> kScenes = {{"alpha", 6, 8}, {"beta", 4, 5}};

RunInfo run_info(const std::string& fingerprint = "fp-abc") {
  RunInfo r;
  r.config = {{"model", "hu1d"}, {"epochs", 3}};
  r.cache_dir = "/tmp/cache";
  r.cache_checksum = "0123456789abcdef";
  r.folds_fingerprint = fingerprint;
  r.n_folds = 3;
  return r;
}

/// Fold k: 10 validation pixels, `correct` of them predicted right (the others predicted as the next class).
FoldResult fold_result(int k, int correct) {
  FoldResult f;
  f.fold = k;
  ClassIndex ci(kLabels);
  std::vector<int> t, p;
  for (int i = 0; i < 10; ++i) {
    Prediction q;
    q.id = static_cast<std::uint64_t>(100 * k + (9 - i));  // unsorted on purpose
    q.scene = i % 2;
    q.row = i % 4;
    q.col = (i + k) % 5;
    const int ti = i % 3, pi = i < correct ? ti : (ti + 1) % 3;
    q.true_label = kLabels[static_cast<std::size_t>(ti)];
    q.pred_label = kLabels[static_cast<std::size_t>(pi)];
    t.push_back(ti);
    p.push_back(pi);
    f.predictions.push_back(q);
  }
  f.metrics = compute_metrics(t, p, ci);
  f.extra = {{"epochs", 3}};
  return f;
}

std::vector<std::string> lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace

TEST_CASE("fold files: CSVs, metrics.json, PNGs", "[results]") {
  test::TempDir tmp("results");
  const auto f = fold_result(1, 7);
  write_fold_results(tmp.str("run"), run_info(), f, kScenes);
  const auto dir = tmp.path() / "run" / "fold-1";
  for (const char* name : {"metrics.json", "predictions.csv", "confusion.csv", "confusion.png", "map.png"})
    CHECK(stdfs::exists(dir / name));
  for (const auto& e : stdfs::directory_iterator(dir)) CHECK(e.path().filename().string().find(".tmp") == std::string::npos);

  const auto pred = lines((dir / "predictions.csv").string());
  REQUIRE(pred.size() == 11);
  CHECK(pred[0] == "sample_id,scene,row,col,true,predicted");
  CHECK(pred[1].rfind("100,", 0) == 0);  // sorted by id
  CHECK(pred[10].rfind("109,", 0) == 0);

  const auto cm = lines((dir / "confusion.csv").string());
  REQUIRE(cm.size() == 4);
  CHECK(cm[0] == "true\\pred,2,5,9");
  // Recount the CSV's rows from the predictions.
  std::map<std::pair<int, int>, int> counts;
  for (const auto& q : f.predictions) counts[{q.true_label, q.pred_label}]++;
  for (std::size_t i = 0; i < kLabels.size(); ++i) {
    std::string expect = std::to_string(kLabels[i]);
    for (auto pl : kLabels) expect += "," + std::to_string(counts[{kLabels[i], pl}]);
    CHECK(cm[i + 1] == expect);
  }

  const auto j = nlohmann::json::parse(fs::read_text((dir / "metrics.json").string()));
  CHECK(j["fold"] == 1);
  CHECK(j["n_folds"] == 3);
  CHECK(j["run"]["folds_fingerprint"] == "fp-abc");
  CHECK(j["metrics"]["oa"].get<double>() == Approx(0.7));
  CHECK(j["train"]["epochs"] == 3);

  int w = 0, h = 0;
  auto px = read_png((dir / "map.png").string(), w, h);
  CHECK(w >= 8);
  CHECK(h >= 6 + 4);
  std::set<std::tuple<int, int, int>> colours;
  for (const auto& c : px) colours.insert({c.r, c.g, c.b});
  for (std::size_t i = 0; i < kLabels.size(); ++i) {
    const auto c = class_colour(static_cast<int>(i));
    CHECK(colours.count({c.r, c.g, c.b}));  // every class colour appears (map and legend)
  }
  CHECK(colours.count({24, 24, 28}));  // dark background
  px = read_png((dir / "confusion.png").string(), w, h);
  CHECK(w > 3 * 14);
  CHECK(h > 3 * 14);

  // A prediction outside its scene is refused.
  auto bad = f;
  bad.predictions[0].row = 99;
  CHECK_THROWS_WITH(write_fold_results(tmp.str("run2"), run_info(), bad, kScenes), Catch::Contains("outside scene"));
}

TEST_CASE("class colours are distinct", "[results]") {
  std::set<std::tuple<int, int, int>> seen;
  for (int c = 0; c < 40; ++c) {
    const auto x = class_colour(c);
    seen.insert({x.r, x.g, x.b});
  }
  CHECK(seen.size() == 40);
}

TEST_CASE("summary: mean and sample std over folds, identical on every call", "[results]") {
  test::TempDir tmp("summary");
  const std::string run = tmp.str("run");
  write_fold_results(run, run_info(), fold_result(0, 8), kScenes);
  write_fold_results(run, run_info(), fold_result(1, 9), kScenes);
  write_fold_results(run, run_info(), fold_result(2, 10), kScenes);
  const auto s = summarize_run(run);
  REQUIRE(s["folds"].size() == 3);
  CHECK(s["folds"][0]["oa"].get<double>() == Approx(0.8));
  CHECK(s["folds"][2]["oa"].get<double>() == Approx(1.0));
  CHECK(s["mean"]["oa"].get<double>() == Approx(0.9));
  CHECK(s["std"]["oa"].get<double>() == Approx(0.1));  // sample std of {0.8, 0.9, 1.0}
  CHECK(s["pooled"]["oa"].get<double>() == Approx(27.0 / 30));
  CHECK(s["run"]["cache_checksum"] == "0123456789abcdef");
  CHECK(s["run"]["folds_fingerprint"] == "fp-abc");
  CHECK(s["run"]["config"]["model"] == "hu1d");
  const std::string json1 = fs::read_text(run + "/summary.json"), md1 = fs::read_text(run + "/summary.md");
  CHECK(md1.find("n-1") != std::string::npos);
  CHECK(md1.find("0.9000 +- 0.1000") != std::string::npos);
  summarize_run(run);
  CHECK(fs::read_text(run + "/summary.json") == json1);
  CHECK(fs::read_text(run + "/summary.md") == md1);

  // One fold only (a --fold I task): std is null.
  const auto one = summarize_run(run, {1});
  CHECK(one["folds"].size() == 1);
  CHECK(one["std"]["oa"].is_null());
}

TEST_CASE("summary refuses missing folds and folds of other runs", "[results]") {
  test::TempDir tmp("summary-bad");
  const std::string run = tmp.str("run");
  write_fold_results(run, run_info(), fold_result(0, 8), kScenes);
  write_fold_results(run, run_info(), fold_result(2, 10), kScenes);
  CHECK_THROWS_WITH(summarize_run(run), Catch::Contains("fold-1") && Catch::Contains("missing"));
  CHECK_FALSE(stdfs::exists(run + "/summary.json"));  // nothing half-written

  write_fold_results(run, run_info("fp-other"), fold_result(1, 9), kScenes);
  try {
    summarize_run(run);
    FAIL("expected StaleError");
  } catch (const StaleError& e) {
    const std::string msg = e.what();
    CHECK(msg.find("run.folds_fingerprint") != std::string::npos);
    CHECK(msg.find("fold-1") != std::string::npos);
  }

  write_fold_results(run, run_info(), fold_result(1, 9), kScenes);
  CHECK_NOTHROW(summarize_run(run));
  RunInfo other = run_info();
  other.cache_checksum = "ffff";
  write_fold_results(run, other, fold_result(2, 10), kScenes);
  CHECK_THROWS_WITH(summarize_run(run), Catch::Contains("run.cache_checksum") && Catch::Contains("fold-2"));

  // A metrics.json that lies about its fold.
  write_fold_results(run, run_info(), fold_result(2, 10), kScenes);
  auto j = nlohmann::json::parse(fs::read_text(run + "/fold-2/metrics.json"));
  j["fold"] = 1;
  fs::write_text_atomic(run + "/fold-2/metrics.json", j.dump());
  CHECK_THROWS_AS(summarize_run(run), FormatError);
  CHECK_THROWS_AS(summarize_run(tmp.str("nothing-here")), IoError);
}

TEST_CASE("summary: a requested fold the run cannot have, and an unfinished fold", "[results]") {
  test::TempDir tmp("summary-range");
  const std::string run = tmp.str("run");
  write_fold_results(run, run_info(), fold_result(0, 8), kScenes);  // run_info: k = 3
  write_fold_results(run, run_info(), fold_result(1, 9), kScenes);
  // --folds 5 of a 3-fold run: out of range (a ConfigError naming the count), not "fold 5 missing".
  CHECK_THROWS_AS(summarize_run(run, {5}), ConfigError);
  CHECK_THROWS_WITH(summarize_run(run, {0, 5}),
                    Catch::Contains("--folds: fold 5 is out of range") && Catch::Contains("has 3 folds (0-2)"));
  // The count is known from an unrequested fold's results too.
  CHECK_THROWS_WITH(summarize_run(run, {3}), Catch::Contains("out of range"));
  // A fold-2/ left by a training task that failed: missing, naming its metrics.json.
  stdfs::create_directories(run + "/fold-2");
  CHECK_THROWS_WITH(summarize_run(run), Catch::Contains("fold-2/metrics.json") && Catch::Contains("did not finish"));
  CHECK_THROWS_WITH(summarize_run(run, {2}), Catch::Contains("did not finish"));
  // Folds not requested do not matter, even unfinished ones.
  CHECK(summarize_run(run, {0, 1})["folds_summarised"] == 2);
  CHECK_FALSE(stdfs::exists(run + "/fold-5"));
}

// Metrics: a textbook kappa example, and random multi-class predictions against an independent
// numpy computation (/usr/bin/python3).
#include <catch2/catch.hpp>

#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "support/test_util.hpp"
#include "train/metrics.hpp"

using namespace hsipipe;
using namespace hsipipe::train;

TEST_CASE("textbook two-rater example: kappa 0.4", "[metrics]") {
  // Cohen's kappa, Wikipedia "Simple example": 50 items, yes/yes 20, yes/no 5, no/yes 10, no/no 15.
  // p_o = 0.7, p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5, kappa = 0.4.
  ClassIndex ci({7, 3});
  ConfusionMatrix cm(2);
  cm.add(0, 0, 20);
  cm.add(0, 1, 5);
  cm.add(1, 0, 10);
  cm.add(1, 1, 15);
  const Metrics m = compute_metrics(cm, ci);
  CHECK(m.n == 50);
  CHECK(m.oa == Approx(0.7));
  CHECK(m.kappa == Approx(0.4));
  CHECK(m.recall[0] == Approx(0.8));
  CHECK(m.recall[1] == Approx(0.6));
  CHECK(m.aa == Approx(0.7));
  CHECK(m.precision[0] == Approx(20.0 / 30));
  CHECK(m.precision[1] == Approx(15.0 / 20));
  CHECK(m.f1[0] == Approx(2 * (20.0 / 30) * 0.8 / (20.0 / 30 + 0.8)));
  const auto j = to_json(m);
  CHECK(j["label_values"] == nlohmann::json({7, 3}));
  CHECK(j["per_class"][0]["label"] == 7);
  CHECK(j["confusion"][1][0] == 10);
}

TEST_CASE("class index maps original labels to 0..C-1", "[metrics]") {
  ClassIndex ci({1, 2, 5, 9});
  CHECK(ci.size() == 4);
  CHECK(ci.index(5) == 2);
  CHECK(ci.value(3) == 9);
  CHECK_FALSE(ci.contains(3));
  CHECK_THROWS_AS(ci.index(3), ConfigError);
  CHECK_THROWS_AS((ClassIndex(std::vector<std::int32_t>{1, 2, 1})), ConfigError);
  ConfusionMatrix cm(4);
  CHECK_THROWS_AS(cm.add(4, 0), std::out_of_range);
}

TEST_CASE("edge cases: perfect, single class, class without samples", "[metrics]") {
  ClassIndex ci({0, 1, 2});
  auto m = compute_metrics({0, 1, 2, 2}, {0, 1, 2, 2}, ci);
  CHECK(m.oa == 1.0);
  CHECK(m.kappa == Approx(1.0));
  m = compute_metrics({1, 1, 1}, {1, 1, 1}, ci);  // p_e = 1
  CHECK(m.kappa == 1.0);
  CHECK(m.aa == 1.0);  // only class 1 has samples
  m = compute_metrics({0, 0, 1, 1}, {0, 2, 1, 1}, ci);
  CHECK(m.support[2] == 0);
  CHECK(m.aa == Approx((0.5 + 1.0) / 2));  // class 2 has no sample: not averaged
  CHECK(m.precision[2] == 0.0);
  CHECK(to_json(m)["per_class"][2]["accuracy"].is_null());
}

TEST_CASE("JSON round trip refuses inconsistent files", "[metrics]") {
  ClassIndex ci({4, 8, 15});
  const auto m = compute_metrics({0, 1, 2, 2, 1}, {0, 2, 2, 2, 1}, ci);
  auto j = to_json(m);
  const auto back = metrics_from_json(j, "x.json");
  CHECK(back.oa == m.oa);
  CHECK(back.kappa == m.kappa);
  CHECK(back.confusion.data() == m.confusion.data());
  auto bad = j;
  bad["oa"] = 0.99;
  CHECK_THROWS_WITH(metrics_from_json(bad, "x.json"), Catch::Contains("x.json") && Catch::Contains("metrics.oa"));
  bad = j;
  bad.erase("confusion");
  CHECK_THROWS_AS(metrics_from_json(bad, "x.json"), FormatError);
}

TEST_CASE("random predictions agree with numpy", "[metrics]") {
  std::mt19937 rng(12345);
  const int c = 6, n = 997;
  std::vector<int> t(n), p(n);
  std::uniform_int_distribution<int> cls(0, c - 1), coin(0, 9);
  for (int i = 0; i < n; ++i) {
    t[i] = cls(rng);
    p[i] = coin(rng) < 6 ? t[i] : cls(rng);  // ~ 67% correct, so kappa is far from 0 and 1
  }
  ClassIndex ci({1, 2, 3, 4, 10, 11});
  const Metrics m = compute_metrics(t, p, ci);

  test::TempDir tmp("metrics");
  {
    std::ofstream f(tmp.str("tp.txt"));
    for (int i = 0; i < n; ++i) f << t[i] << ' ' << p[i] << '\n';
  }
  std::ofstream(tmp.str("ref.py")) << R"(import sys, json, numpy as np
d = np.loadtxt(sys.argv[1], dtype=np.int64)
t, p, c = d[:, 0], d[:, 1], int(sys.argv[2])
cm = np.zeros((c, c), np.int64)
np.add.at(cm, (t, p), 1)
n = cm.sum(); po = np.trace(cm) / n
pe = float((cm.sum(1) * cm.sum(0)).sum()) / n**2
rec = np.diag(cm) / cm.sum(1); prec = np.diag(cm) / cm.sum(0)
print(json.dumps({"oa": po, "kappa": (po - pe) / (1 - pe), "aa": float(rec.mean()),
                  "recall": rec.tolist(), "precision": prec.tolist(), "f1": (2*prec*rec/(prec+rec)).tolist()}))
)";
  const auto r = test::run(test::python() + " " + tmp.str("ref.py") + " " + tmp.str("tp.txt") + " " + std::to_string(c));
  REQUIRE(r.status == 0);
  const auto ref = nlohmann::json::parse(r.output);
  CHECK(m.oa == Approx(ref["oa"].get<double>()).epsilon(1e-12));
  CHECK(m.aa == Approx(ref["aa"].get<double>()).epsilon(1e-12));
  CHECK(m.kappa == Approx(ref["kappa"].get<double>()).epsilon(1e-12));
  for (int i = 0; i < c; ++i) {
    CHECK(m.recall[i] == Approx(ref["recall"][i].get<double>()).epsilon(1e-12));
    CHECK(m.precision[i] == Approx(ref["precision"][i].get<double>()).epsilon(1e-12));
    CHECK(m.f1[i] == Approx(ref["f1"][i].get<double>()).epsilon(1e-12));
  }
  CHECK(m.kappa > 0.3);
  CHECK(m.kappa < 0.9);
}

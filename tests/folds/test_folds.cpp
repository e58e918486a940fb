// folds: generator reference values, the three strategies' guarantees, golden fingerprints from the
// independent reference (scripts/folds_reference.py), the folds file and its check.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include "core/error.hpp"
#include "folds/folds.hpp"
#include "folds/rng.hpp"
#include "support/test_util.hpp"

using namespace hsipipe;
using namespace hsipipe::folds;

namespace {

/// Owner of a synthetic sample table.
struct Table {
  std::vector<std::int32_t> scene, row, col, label;
  std::vector<SceneSize> sizes;
  int patch = 5;
  SampleTableView view() const { return {scene, row, col, label, sizes, patch}; }
  void add(int s, int r, int c, int l) {
    scene.push_back(s);
    row.push_back(r);
    col.push_back(c);
    label.push_back(l);
  }
};

/// The fixed table of tests/folds/golden_table.py (keep the two identical).
Table golden_table() {
  Table t;
  t.sizes = {{37, 41}, {23, 29}};
  for (int s = 0; s < 2; ++s) {
    const int R = s == 0 ? 37 : 23, C = s == 0 ? 41 : 29;
    for (int r = 0; r < R; ++r) {
      for (int c = 0; c < C; ++c) {
        const int h = (r * 7 + c * 13 + s * 5) % 23;
        if (h >= 1 && h <= 3) continue;
        int lab = h == 0 ? -1 : (r / 6 + 2 * (c / 8) + s) % 4;
        if (s == 1 && ((r == 3 && c == 3) || (r == 20 && c == 25))) lab = 9;
        t.add(s, r, c, lab);
      }
    }
  }
  return t;
}

/// A dense table with random-looking labels (LCG), all classes with >= k samples.
Table dense_table(std::uint32_t salt, int rows = 30, int cols = 34) {
  Table t;
  t.sizes = {{static_cast<std::uint32_t>(rows), static_cast<std::uint32_t>(cols)}};
  std::uint32_t x = 12345u + salt;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      x = x * 1664525u + 1013904223u;
      t.add(0, r, c, static_cast<int>((x >> 16) % 6));
    }
  return t;
}

int chebyshev(const Table& t, std::uint64_t a, std::uint64_t b) {
  return std::max(std::abs(t.row[a] - t.row[b]), std::abs(t.col[a] - t.col[b]));
}

FoldParams params(Strategy s, int k = 5, std::uint64_t seed = 42) {
  FoldParams p;
  p.k = k;
  p.seed = seed;
  p.strategy = s;
  return p;
}

}  // namespace

TEST_CASE("SplitMix64 matches the published reference output", "[folds][rng]") {
  // Vigna's splitmix64.c / java.util.SplittableRandom, seed 1234567.
  SplitMix64 g(1234567);
  const std::uint64_t want[] = {6457827717110365317ULL, 3203168211198807973ULL, 9817491932198370423ULL,
                                4593380528125082431ULL, 16408922859458223821ULL};
  for (const auto w : want) CHECK(g.next() == w);
  SplitMix64 z(0);
  CHECK(z.next() == 16294208416658607535ULL);
  CHECK(z.next() == 7960286522194355700ULL);
}

TEST_CASE("bounded, shuffle and derive match docs/FOLDS.md (values from the reference script)", "[folds][rng]") {
  SplitMix64 g(42);
  const std::uint64_t want[] = {0, 0, 0, 1, 0, 5, 1, 6, 3, 6};
  for (std::uint64_t n = 1; n <= 10; ++n) CHECK(g.bounded(n) == want[n - 1]);
  SplitMix64 h(7);  // bound 2^63+1 rejects about half the draws
  const std::uint64_t big[] = {3595544800446187243ULL, 8308050873407804673ULL, 2300599727732774152ULL,
                               1238314238945538992ULL, 3810556812210252212ULL};
  for (const auto w : big) CHECK(h.bounded((1ULL << 63) + 1) == w);
  std::vector<int> v = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  SplitMix64 s(42);
  shuffle(v, s);
  CHECK(v == std::vector<int>{8, 3, 6, 5, 4, 0, 9, 2, 1, 7});
  CHECK(derive_seed(42, 1, 3) == 1663794057191208978ULL);
}

TEST_CASE("portable 64x64 product equals the 128-bit one", "[folds][rng]") {
  SplitMix64 g(99);
  for (int i = 0; i < 10000; ++i) {
    const auto a = g.next() >> (i % 64), b = g.next() >> ((i / 64) % 64);
    CHECK(mul_64x64_portable(a, b) == mul_64x64(a, b));
  }
  CHECK(mul_64x64_portable(~0ULL, ~0ULL) == std::pair<std::uint64_t, std::uint64_t>{~0ULL - 1, 1});
}

TEST_CASE("golden fingerprints from the independent reference implementation", "[folds][golden]") {
  // From `python3 tests/folds/golden_table.py` (scripts/folds_reference.py on the same table).
  const Table t = golden_table();
  REQUIRE(t.label.size() == 1899);
  CHECK(make_folds(t.view(), params(Strategy::stratified)).fingerprint ==
        "3452dcaaf011c51487b686cb4e15f468bbc67e46b38c1e93e3af1673c5f67c47");
  CHECK(make_folds(t.view(), params(Strategy::random)).fingerprint ==
        "69c0ebe8a70bbdfe88a7777f5fc3892e37c3e4a8d103db1a8da7a1fe8bef8d8f");
  CHECK(make_folds(t.view(), params(Strategy::spatial)).fingerprint ==
        "67682bfaed6a2ad70c65cb81ca16d60c66dbd47b8d34ddc42adaa4d0f943ee33");
  FoldParams p = params(Strategy::spatial, 3, 7);
  p.block = 6;
  p.buffer = 1;
  CHECK(make_folds(t.view(), p).fingerprint == "ae6e6e36f42942b3c69dea3fbaa5dab435347fc7a31b2feb6dea104368674895");
}

TEST_CASE("every participating sample is validated in exactly one fold", "[folds]") {
  const Table t = golden_table();
  for (const auto s : {Strategy::stratified, Strategy::spatial, Strategy::random}) {
    const Folds f = make_folds(t.view(), params(s));
    REQUIRE(f.fold.size() == t.label.size());
    std::vector<int> seen(t.label.size(), 0);
    for (int g = 0; g < f.k; ++g) {
      for (const auto i : f.val_ids(g)) ++seen[i];
      // train and validation of one fold are disjoint and cover the participants minus exclusions
      const auto tr = f.train_ids(g), va = f.val_ids(g);
      CHECK(tr.size() + va.size() + f.excluded[static_cast<std::size_t>(g)].size() ==
            static_cast<std::size_t>(std::count_if(t.label.begin(), t.label.end(), [](int l) { return l >= 0; })));
      for (const auto i : tr) CHECK(f.fold[i] != g);
    }
    for (std::size_t i = 0; i < t.label.size(); ++i) {
      INFO(strategy_name(s) << " sample " << i);
      if (t.label[i] < 0) {
        CHECK(f.fold[i] == -1);
        CHECK(seen[i] == 0);
      } else {
        CHECK(seen[i] == 1);
      }
    }
  }
}

TEST_CASE("another seed gives other folds; the same seed the same", "[folds]") {
  const Table t = golden_table();
  for (const auto s : {Strategy::stratified, Strategy::spatial, Strategy::random}) {
    INFO(strategy_name(s));
    const Folds a = make_folds(t.view(), params(s, 5, 42));
    const Folds b = make_folds(t.view(), params(s, 5, 43));
    const Folds c = make_folds(t.view(), params(s, 5, 42));
    CHECK(a.fold == c.fold);
    CHECK(a.fingerprint == c.fingerprint);
    CHECK(a.fingerprint != b.fingerprint);
    std::size_t diff = 0;
    for (std::size_t i = 0; i < a.fold.size(); ++i) diff += a.fold[i] != b.fold[i];
    CHECK(diff > a.fold.size() / 4);
  }
}

TEST_CASE("stratified: each class within one sample of its ideal share, fold sizes within one", "[folds]") {
  for (std::uint32_t salt : {1u, 2u, 3u}) {
    const Table t = dense_table(salt);
    for (const int k : {2, 3, 5, 7}) {
      const Folds f = make_folds(t.view(), params(Strategy::stratified, k, salt));
      std::uint64_t lo_tot = ~0ULL, hi_tot = 0;
      for (int g = 0; g < k; ++g) {
        std::uint64_t tot = 0;
        for (std::size_t c = 0; c < f.classes.size(); ++c) {
          std::uint64_t n_c = 0;
          for (int h = 0; h < k; ++h) n_c += f.counts[static_cast<std::size_t>(h)][c];
          const auto got = f.counts[static_cast<std::size_t>(g)][c];
          INFO("k " << k << " fold " << g << " class " << f.classes[c] << " n_c " << n_c);
          CHECK(got * static_cast<std::uint64_t>(k) + k > n_c);  // got > n_c/k - 1
          CHECK(got * static_cast<std::uint64_t>(k) < n_c + k);  // got < n_c/k + 1
          tot += got;
        }
        lo_tot = std::min(lo_tot, tot);
        hi_tot = std::max(hi_tot, tot);
      }
      CHECK(hi_tot - lo_tot <= 1);
      CHECK(f.warnings.empty());
    }
  }
}

TEST_CASE("spatial with its buffer: no training pixel within any validation patch", "[folds]") {
  const Table t = golden_table();
  for (const int k : {3, 5}) {
    for (const std::uint64_t seed : {1ULL, 42ULL}) {
      const Folds f = make_folds(t.view(), params(Strategy::spatial, k, seed));
      CHECK(f.buffer == t.patch / 2);
      CHECK(f.leakage == 0.0);
      std::uint64_t excluded = 0;
      for (int g = 0; g < k; ++g) {
        const auto va = f.val_ids(g), tr = f.train_ids(g);
        CHECK(!va.empty());
        excluded += f.excluded[static_cast<std::size_t>(g)].size();
        // brute force over all pairs: independent of the grid the library scans
        for (const auto v : va)
          for (const auto u : tr)
            if (t.scene[v] == t.scene[u]) REQUIRE(chebyshev(t, v, u) > f.buffer);
      }
      CHECK(excluded > 0);
      // blocks are whole: every block of the recorded grid lies in one fold
      std::map<std::tuple<int, std::int64_t, std::int64_t>, int> block_fold;
      for (std::size_t i = 0; i < t.label.size(); ++i) {
        if (f.fold[i] < 0) continue;
        const auto key = std::make_tuple(t.scene[i], (t.row[i] + f.grid_offset_row) / f.block,
                                         (t.col[i] + f.grid_offset_col) / f.block);
        const auto [it, fresh] = block_fold.emplace(key, f.fold[i]);
        if (!fresh) REQUIRE(it->second == f.fold[i]);
      }
      CHECK(block_fold.size() >= 4 * static_cast<std::size_t>(k));  // the default block rule
    }
  }
}

TEST_CASE("leakage: high for stratified and random patches, counted when the buffer is too small", "[folds]") {
  const Table t = golden_table();
  CHECK(make_folds(t.view(), params(Strategy::stratified)).leakage > 0.9);
  CHECK(make_folds(t.view(), params(Strategy::random)).leakage > 0.9);
  FoldParams p = params(Strategy::spatial);
  p.buffer = 0;
  const Folds f = make_folds(t.view(), p);
  CHECK(f.leakage > 0.0);  // only samples near block borders leak
  CHECK(f.leakage < make_folds(t.view(), params(Strategy::stratified)).leakage / 1.5);
  Table pix = t;
  pix.patch = 1;  // pixel samples cannot leak
  CHECK(make_folds(pix.view(), params(Strategy::stratified)).leakage == 0.0);
}

TEST_CASE("bad input: typed errors and a documented warning", "[folds][errors]") {
  Table t = golden_table();
  CHECK_THROWS_AS(make_folds(t.view(), params(Strategy::stratified, 1)), ConfigError);
  CHECK_THROWS_AS(make_folds(t.view(), params(Strategy::stratified, 0)), ConfigError);
  CHECK_THROWS_AS(make_folds(t.view(), params(Strategy::stratified, 5000)), ConfigError);  // more folds than samples
  FoldParams huge = params(Strategy::spatial);
  huge.block = 1000;  // two blocks (one per scene) for five folds
  CHECK_THROWS_WITH(make_folds(t.view(), huge), Catch::Contains("non-empty blocks"));

  // class 9 has 2 samples < k = 5: a warning naming it, and the folds are still complete
  const Folds f = make_folds(t.view(), params(Strategy::stratified));
  REQUIRE(f.warnings.size() == 1);
  CHECK_THAT(f.warnings[0], Catch::Contains("class 9") && Catch::Contains("fewer than k = 5"));

  Table bad = t;
  bad.row.pop_back();
  CHECK_THROWS_AS(make_folds(bad.view(), params(Strategy::stratified)), FormatError);
  bad = t;
  bad.row[10] = 40;  // outside scene 0 (37 rows)
  CHECK_THROWS_WITH(make_folds(bad.view(), params(Strategy::stratified)), Catch::Contains("outside scene 0"));
  bad = t;
  bad.row[1] = bad.row[0];
  bad.col[1] = bad.col[0];
  CHECK_THROWS_WITH(make_folds(bad.view(), params(Strategy::spatial)), Catch::Contains("share scene 0 pixel"));
}

TEST_CASE("folds file: round trip, refusal of bad files naming the field", "[folds][file]") {
  const Table t = golden_table();
  test::TempDir dir("folds");
  const std::string path = dir.str("f.json");
  Folds f = make_folds(t.view(), params(Strategy::spatial));
  f.data_checksum = "0123456789abcdef";
  save_folds(f, path);
  const Folds g = load_folds(path);
  CHECK(g.k == f.k);
  CHECK(g.seed == f.seed);
  CHECK(g.strategy == f.strategy);
  CHECK(g.fold == f.fold);
  CHECK(g.excluded == f.excluded);
  CHECK(g.fingerprint == f.fingerprint);
  CHECK(g.data_checksum == f.data_checksum);
  CHECK(g.n_samples == t.label.size());
  CHECK(g.block == f.block);
  CHECK(g.counts == f.counts);
  CHECK(to_json_text(g) == to_json_text(f));
  CHECK(!std::filesystem::exists(path + ".tmp-" + std::to_string(::getpid())));

  // a large seed survives JSON
  Folds big = make_folds(t.view(), params(Strategy::random, 5, 18446744073709551615ULL));
  save_folds(big, path);
  CHECK(load_folds(path).seed == 18446744073709551615ULL);

  auto edit = [&](const std::string& key, const nlohmann::json& value) {
    auto j = to_json(f);
    if (value.is_null()) j.erase(key);
    else j[key] = value;
    std::ofstream(path) << j.dump();
  };
  auto field_of = [&]() -> std::string {
    try {
      load_folds(path);
    } catch (const FormatError& e) {
      CHECK(e.file().find(path) == 0);
      return e.field();
    }
    return "(no error)";
  };
  edit("fold", nlohmann::json::array({0, 1}));
  CHECK(field_of() == "fold");
  auto bad_fold = f.fold;
  bad_fold[3] = 5;
  edit("fold", bad_fold);
  CHECK(field_of() == "fold");
  edit("format_version", 2);
  CHECK(field_of() == "format_version");
  edit("algorithm_version", 0);
  CHECK(field_of() == "algorithm_version");
  edit("k", 1);
  CHECK(field_of() == "k");
  edit("fingerprint", "xyz");
  CHECK(field_of() == "fingerprint");
  edit("n_samples", nullptr);
  CHECK(field_of() == "n_samples");
  edit("strategy", "blocks");
  CHECK(field_of() == "strategy");
  auto ex = f.excluded;
  ex[0].insert(ex[0].begin(), f.val_ids(0).front());  // a validation sample of fold 0 "excluded from training"
  edit("excluded", ex);
  CHECK(field_of() == "excluded");
  std::ofstream(path) << "{\"k\": 5,";
  CHECK(field_of() == "json");

  // classes, counts, leakage and data_checksum are informational (FOLDS.md section 10): a file may omit
  // them, and complete_informational computes the same values from the table; but not one of the three alone
  {
    auto j = to_json(f);
    for (const char* k : {"classes", "counts", "leakage", "data_checksum", "excluded_counts", "warnings"}) j.erase(k);
    std::ofstream(path) << j.dump();
    Folds h = load_folds(path);
    CHECK(!h.has_informational);
    CHECK(h.data_checksum.empty());
    CHECK(check_folds(h, t.view(), "0123456789abcdef").ok);
    complete_informational(t.view(), h);
    CHECK(h.classes == f.classes);
    CHECK(h.counts == f.counts);
    CHECK(h.leaky == f.leaky);
    CHECK(h.leakage == f.leakage);
    CHECK(h.leakage_radius == f.leakage_radius);
  }
  edit("counts", nullptr);
  CHECK(field_of() == "classes/counts/leakage");
}

TEST_CASE("check: a folds file applies to its table, is refused for another with the reason", "[folds][check]") {
  const Table t = golden_table();
  Folds f = make_folds(t.view(), params(Strategy::stratified));
  f.data_checksum = "aaaa";
  auto r = check_folds(f, t.view(), "aaaa");
  CHECK(r.ok);
  CHECK(r.recomputed_fingerprint == f.fingerprint);
  CHECK_THAT(r.notes.back(), Catch::Contains("identical"));

  // same samples, other data checksum (float16 vs float32 cache): accepted with a note
  r = check_folds(f, t.view(), "bbbb");
  CHECK(r.ok);
  CHECK_THAT(r.notes.front(), Catch::Contains("data_checksum differs"));

  // another table of the same size: one label changed
  Table other = t;
  other.label[100] = (other.label[100] + 1) % 4;
  r = check_folds(f, other.view(), "aaaa");
  CHECK(!r.ok);
  CHECK_THAT(r.problems.front(), Catch::Contains("sample table differs"));
  CHECK_THROWS_AS(require_folds_match(f, other.view(), "aaaa", "f.json"), StaleError);

  // another size
  Table smaller = t;
  for (auto* v : {&smaller.scene, &smaller.row, &smaller.col, &smaller.label}) v->pop_back();
  r = check_folds(f, smaller.view(), "aaaa");
  CHECK(!r.ok);
  CHECK_THAT(r.problems.front(), Catch::Contains("1899 samples"));

  // an edited fold array: fingerprint mismatch
  Folds edited = f;
  const auto a = edited.val_ids(0).front(), b = edited.val_ids(1).front();
  std::swap(edited.fold[a], edited.fold[b]);
  r = check_folds(edited, t.view(), "aaaa");
  CHECK(!r.ok);
  CHECK_THAT(r.problems.back(), Catch::Contains("fingerprint"));
  CHECK_NOTHROW(require_folds_match(f, t.view(), "zzzz", "f.json"));
}

TEST_CASE("folds ignore everything but the table: patch changes only spatial defaults and leakage", "[folds]") {
  Table a = golden_table();
  Table b = a;
  b.patch = 9;
  CHECK(make_folds(a.view(), params(Strategy::stratified)).fold == make_folds(b.view(), params(Strategy::stratified)).fold);
  CHECK(make_folds(a.view(), params(Strategy::random)).fold == make_folds(b.view(), params(Strategy::random)).fold);
  // scene sizes are a bounds check only
  Table c = a;
  c.sizes.clear();
  CHECK(make_folds(c.view(), params(Strategy::spatial)).fingerprint ==
        make_folds(a.view(), params(Strategy::spatial)).fingerprint);
}

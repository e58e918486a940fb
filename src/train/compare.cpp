// train/compare: reading and checking the runs of `hsipipe compare`, the table (Markdown and JSON) and the
// per-fold OA chart. Contracts in compare.hpp; the tests are in compare_stats.cpp.
#include "train/compare.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <map>
#include <regex>
#include <sstream>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/outputs.hpp"
#include "train/metrics.hpp"
#include "train/results.hpp"

namespace hsipipe::train {
namespace {

using json = nlohmann::json;
namespace stdfs = std::filesystem;

struct FoldData {
  std::string dir;                              ///< fold-I/ folder it came from
  Metrics metrics;
  std::vector<std::pair<std::uint64_t, bool>> correct;  ///< (sample id, predicted == true), sorted by id
};

struct Run {
  std::string arg;  ///< as given
  RunInfo info;
  std::map<int, FoldData> folds;
};

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string part; std::getline(ss, part, ',');)
    if (!part.empty()) out.push_back(part);
  return out;
}

std::vector<std::pair<std::uint64_t, bool>> read_predictions(const std::string& file) {
  std::istringstream in(fs::read_text(file, std::uint64_t{1} << 30));
  std::string line;
  if (!std::getline(in, line) || line.rfind("sample_id,scene,row,col,true,predicted", 0) != 0)
    throw FormatError(file, "header", "expected sample_id,scene,row,col,true,predicted");
  std::vector<std::pair<std::uint64_t, bool>> out;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::vector<std::string> f = split_commas(line);
    if (f.size() != 6) throw FormatError(file, "row " + std::to_string(out.size() + 1), "expected 6 fields");
    try {
      out.emplace_back(std::stoull(f[0]), std::stol(f[4]) == std::stol(f[5]));
    } catch (const std::exception&) {
      throw FormatError(file, "row " + std::to_string(out.size() + 1), "not integers: " + line);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

void add_fold(Run& r, const stdfs::path& fdir, int k) {
  const std::string mfile = (fdir / "metrics.json").string();
  json j;
  try {
    j = json::parse(fs::read_text(mfile));
  } catch (const json::parse_error& e) {
    throw FormatError(mfile, "json", e.what());
  }
  if (!j.is_object() || !j.contains("run") || !j.contains("metrics")) throw FormatError(mfile, "run", "missing");
  const RunInfo info = run_info_from_json(j["run"], mfile);
  if (r.folds.count(k))
    throw ConfigError("compare: " + r.arg + ": fold " + std::to_string(k) + " is in both " + r.folds[k].dir + " and " +
                      fdir.string());
  if (r.folds.empty()) {
    r.info = info;
  } else {
    if (info.cache_checksum != r.info.cache_checksum || info.folds_fingerprint != r.info.folds_fingerprint)
      throw StaleError(mfile + ": fold " + std::to_string(k) + " was trained on cache " + info.cache_checksum +
                       " / folds " + info.folds_fingerprint + ", the run's other folds on cache " + r.info.cache_checksum +
                       " / folds " + r.info.folds_fingerprint + " (fields run.cache_checksum, run.folds_fingerprint)");
    for (const auto& [key, v] : info.config.items())
      if (!r.info.config.contains(key) || r.info.config[key] != v)
        throw ConfigError("compare: " + r.arg + ": fold " + std::to_string(k) + " (" + mfile + ") was trained with " +
                          key + " = " + v.dump() + ", the run's other folds with " +
                          (r.info.config.contains(key) ? r.info.config[key].dump() : "none"));
  }
  FoldData f;
  f.dir = fdir.string();
  f.metrics = metrics_from_json(j["metrics"], mfile);
  f.correct = read_predictions((fdir / "predictions.csv").string());
  r.folds[k] = std::move(f);
}

Run read_run(const std::string& arg) {
  Run r;
  r.arg = arg;
  static const std::regex fold_re("fold-([0-9]+)");
  for (const auto& dir : split_commas(arg)) {
    std::error_code ec;
    if (!stdfs::is_directory(dir, ec)) throw IoError(dir, "not a directory (a run: hsipipe train --out)");
    std::vector<std::pair<int, stdfs::path>> found;
    for (const auto& e : stdfs::directory_iterator(dir)) {
      std::smatch m;
      const std::string name = e.path().filename().string();
      if (e.is_directory() && std::regex_match(name, m, fold_re) && stdfs::exists(e.path() / "metrics.json"))
        found.emplace_back(std::stoi(m[1].str()), e.path());
    }
    for (const auto& [k, p] : found) add_fold(r, p, k);
  }
  if (r.folds.empty()) throw ConfigError("compare: " + arg + ": no finished fold (fold-I/metrics.json)");
  return r;
}

void check_same_folds(const std::vector<Run>& runs) {
  const Run& a = runs.front();
  for (const Run& b : runs) {
    if (b.info.cache_checksum != a.info.cache_checksum)
      throw StaleError("compare: " + b.arg + " was trained on cache " + b.info.cache_checksum + " (" + b.info.cache_dir +
                       "), " + a.arg + " on cache " + a.info.cache_checksum + " (" + a.info.cache_dir +
                       "): runs on different caches are not comparable (field run.cache_checksum)");
    if (b.info.folds_fingerprint != a.info.folds_fingerprint)
      throw StaleError("compare: " + b.arg + " used folds " + b.info.folds_fingerprint + ", " + a.arg + " folds " +
                       a.info.folds_fingerprint + ": runs on different folds files are not comparable (field run.folds_fingerprint)");
    std::string fa, fb;
    for (const auto& [k, f] : a.folds) fa += (fa.empty() ? "" : ",") + std::to_string(k);
    for (const auto& [k, f] : b.folds) fb += (fb.empty() ? "" : ",") + std::to_string(k);
    if (fa != fb)
      throw ConfigError("compare: " + b.arg + " holds folds " + fb + ", " + a.arg + " folds " + fa +
                        ": compare needs the same folds in every run");
    for (const auto& [k, f] : b.folds) {
      const auto& fr = a.folds.at(k).correct;
      bool same = fr.size() == f.correct.size();
      for (std::size_t i = 0; same && i < fr.size(); ++i) same = fr[i].first == f.correct[i].first;
      if (!same)
        throw FormatError(f.dir + "/predictions.csv", "sample_id",
                          "the validation samples differ from " + a.folds.at(k).dir + "/predictions.csv");
    }
  }
}

json mean_std(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m += x;
  m /= static_cast<double>(v.size());
  double ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  return {{"mean", m}, {"std", v.size() > 1 ? json(std::sqrt(ss / static_cast<double>(v.size() - 1))) : json(nullptr)}};
}

json opt_json(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

json run_json(const Run& r) {
  json folds = json::array();
  std::vector<double> oa, aa, kappa;
  std::map<std::int32_t, std::pair<std::int64_t, std::int64_t>> per_class;  // label -> (correct, support) pooled
  for (const auto& [k, f] : r.folds) {
    const Metrics& m = f.metrics;
    folds.push_back({{"fold", k}, {"oa", m.oa}, {"aa", m.aa}, {"kappa", m.kappa}, {"n", m.n}});
    oa.push_back(m.oa), aa.push_back(m.aa), kappa.push_back(m.kappa);
    for (std::size_t c = 0; c < m.label_values.size(); ++c) {
      auto& pc = per_class[m.label_values[c]];
      pc.first += m.confusion.at(static_cast<int>(c), static_cast<int>(c));
      pc.second += m.support[c];
    }
  }
  json classes = json::array();
  for (const auto& [label, cs] : per_class)
    classes.push_back({{"label", label}, {"support", cs.second},
                       {"accuracy", cs.second ? json(static_cast<double>(cs.first) / static_cast<double>(cs.second)) : json(nullptr)}});
  const std::string model = r.info.config.value("model", std::string("?"));
  return {{"run", r.arg}, {"model", model}, {"config", r.info.config}, {"cache_dir", r.info.cache_dir},
          {"folds", folds}, {"oa", mean_std(oa)}, {"aa", mean_std(aa)}, {"kappa", mean_std(kappa)},
          {"per_class_pooled", classes}};
}

json paired_json(const Run& a, const Run& b) {
  std::vector<double> d_oa;
  json per_fold = json::array();
  std::int64_t bb = 0, cc = 0;
  for (const auto& [k, fa] : a.folds) {
    const auto& fb = b.folds.at(k);
    d_oa.push_back(fb.metrics.oa - fa.metrics.oa);
    per_fold.push_back({{"fold", k}, {"d_oa", fb.metrics.oa - fa.metrics.oa}, {"d_aa", fb.metrics.aa - fa.metrics.aa},
                        {"d_kappa", fb.metrics.kappa - fa.metrics.kappa}});
    for (std::size_t i = 0; i < fa.correct.size(); ++i) {
      bb += fa.correct[i].second && !fb.correct[i].second;
      cc += !fa.correct[i].second && fb.correct[i].second;
    }
  }
  const McNemarResult mc = mcnemar(bb, cc);
  const WilcoxonResult w = wilcoxon_signed_rank(d_oa);
  const TTestResult t = paired_t_test(d_oa);
  return {{"against", a.arg}, {"per_fold", per_fold},
          {"mcnemar", {{"b_reference_right_other_wrong", mc.b}, {"c_reference_wrong_other_right", mc.c},
                       {"chi2_corrected", mc.chi2}, {"p_chi2", mc.p_chi2}, {"p_exact", mc.p_exact}}},
          {"wilcoxon_oa", {{"n", w.n}, {"w_plus", w.w_plus}, {"w_minus", w.w_minus}, {"statistic", w.statistic},
                           {"p", opt_json(w.p)}, {"exact", w.exact}}},
          {"paired_t_oa", {{"df", t.df}, {"t", opt_json(t.t)}, {"p", opt_json(t.p)}}}};
}

std::string fixed(const json& v, int digits = 4) {
  if (v.is_null()) return "-";
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v.get<double>();
  return s.str();
}

std::string pm(const json& ms) { return fixed(ms["mean"]) + " +- " + fixed(ms["std"]); }

std::string recipe(const json& config) {
  std::string s;
  for (const char* k : {"epochs", "batch", "lr", "optimizer", "seed", "precision"})
    if (config.contains(k)) s += (s.empty() ? "" : ", ") + std::string(k) + " " + (config[k].is_string() ? config[k].get<std::string>() : config[k].dump());
  return s;
}

std::string markdown(const json& t) {
  std::ostringstream o;
  o << "# hsipipe compare\n\ncache `" << t["cache_checksum"].get<std::string>() << "`, folds `"
    << t["folds_fingerprint"].get<std::string>() << "`, folds " << t["folds"].dump()
    << " (mean +- sample std over the folds; tests against the first run)\n\n"
    << "| run | model | recipe | OA | AA | kappa |\n|---|---|---|---|---|---|\n";
  for (const auto& r : t["runs"])
    o << "| `" << r["run"].get<std::string>() << "` | `" << r["model"].get<std::string>() << "` | " << recipe(r["config"]) << " | "
      << pm(r["oa"]) << " | " << pm(r["aa"]) << " | " << pm(r["kappa"]) << " |\n";
  o << "\n## Per-fold OA\n\n| run |";
  for (const auto& k : t["folds"]) o << " fold " << k.get<int>() << " |";
  o << "\n|---|";
  for (std::size_t i = 0; i < t["folds"].size(); ++i) o << "---|";
  o << "\n";
  for (const auto& r : t["runs"]) {
    o << "| `" << r["run"].get<std::string>() << "` |";
    for (const auto& f : r["folds"]) o << " " << fixed(f["oa"]) << " |";
    o << "\n";
  }
  o << "\n## Per-class accuracy (pooled over the folds' validation samples)\n\n| run |";
  for (const auto& c : t["runs"][0]["per_class_pooled"]) o << " " << c["label"].get<int>() << " |";
  o << "\n|---|";
  for (std::size_t i = 0; i < t["runs"][0]["per_class_pooled"].size(); ++i) o << "---|";
  o << "\n";
  for (const auto& r : t["runs"]) {
    o << "| `" << r["run"].get<std::string>() << "` |";
    for (const auto& c : r["per_class_pooled"]) o << " " << fixed(c["accuracy"]) << " |";
    o << "\n";
  }
  return o.str();
}

std::string markdown_tests(const json& t) {
  std::ostringstream o;
  o << "\n## Paired tests against `" << t["runs"][0]["run"].get<std::string>() << "`\n\n"
    << "| run | per-fold OA differences | McNemar b / c | McNemar p (chi2, exact) | Wilcoxon W (p) | paired t (p) |\n"
    << "|---|---|---|---|---|---|\n";
  for (const auto& p : t["paired"]) {
    std::string d;
    for (const auto& f : p["per_fold"]) d += (d.empty() ? "" : ", ") + fixed(f["d_oa"]);
    const auto& m = p["mcnemar"];
    const auto& w = p["wilcoxon_oa"];
    const auto& tt = p["paired_t_oa"];
    o << "| `" << p["run"].get<std::string>() << "` | " << d << " | " << m["b_reference_right_other_wrong"].get<std::int64_t>()
      << " / " << m["c_reference_wrong_other_right"].get<std::int64_t>() << " | " << fixed(m["p_chi2"]) << ", "
      << fixed(m["p_exact"]) << " | " << fixed(w["statistic"], 1) << " (" << fixed(w["p"]) << (w["exact"].get<bool>() ? ", exact" : ", normal")
      << ") | " << fixed(tt["t"], 3) << " (" << fixed(tt["p"]) << ") |\n";
  }
  o << "\nWith n folds the exact two-sided Wilcoxon p cannot fall below 2 / 2^n (0.0625 for 5 folds).\n";
  return o.str();
}

}  // namespace

void draw_oa_chart(const std::string& path, const json& table);  // compare_chart.cpp

json compare_runs(const CompareOptions& o, std::ostream& log) {
  if (o.runs.size() < 2) throw ConfigError("compare: needs at least two runs (RUN_A RUN_B ...)");
  if (o.out.empty()) throw ConfigError("compare: --out PREFIX is required (writes PREFIX.md, PREFIX.json, PREFIX.png)");
  for (const char* ext : {".md", ".json", ".png"}) outputs::check_output_file(o.out + ext, o.force, "compare --out");
  std::vector<Run> runs;
  for (const auto& a : o.runs) runs.push_back(read_run(a));
  check_same_folds(runs);
  json t = {{"cache_checksum", runs[0].info.cache_checksum}, {"folds_fingerprint", runs[0].info.folds_fingerprint},
            {"n_folds", runs[0].info.n_folds}, {"folds", json::array()}, {"runs", json::array()}, {"paired", json::array()}};
  for (const auto& [k, f] : runs[0].folds) t["folds"].push_back(k);
  for (const auto& r : runs) t["runs"].push_back(run_json(r));
  for (std::size_t i = 1; i < runs.size(); ++i) {
    json p = paired_json(runs[0], runs[i]);
    p["run"] = runs[i].arg;
    t["paired"].push_back(p);
  }
  const std::string md = markdown(t) + markdown_tests(t);
  fs::write_text_atomic(o.out + ".json", t.dump(2) + "\n");
  fs::write_text_atomic(o.out + ".md", md);
  draw_oa_chart(o.out + ".png", t);
  if (!o.quiet) log << md << "\nhsipipe compare: wrote " << o.out << ".md, " << o.out << ".json, " << o.out << ".png\n";
  return t;
}

}  // namespace hsipipe::train

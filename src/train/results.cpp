// train/results: fold result files and the run summary (the PNG files: results_png.cpp).
#include "train/results.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "core/fs.hpp"

namespace hsipipe::train {

namespace stdfs = std::filesystem;
using nlohmann::json;

// ---------------------------------------------------------------------------------------------
// RunInfo

json to_json(const RunInfo& r) {
  return json{{"config", r.config},
              {"cache_dir", r.cache_dir},
              {"cache_checksum", r.cache_checksum},
              {"folds_fingerprint", r.folds_fingerprint},
              {"n_folds", r.n_folds}};
}

RunInfo run_info_from_json(const json& j, const std::string& file) {
  if (!j.is_object()) throw FormatError(file, "run", "expected an object");
  RunInfo r;
  auto str = [&](const char* f) {
    if (!j.contains(f) || !j.at(f).is_string()) throw FormatError(file, std::string("run.") + f, "missing or not a string");
    return j.at(f).get<std::string>();
  };
  r.cache_checksum = str("cache_checksum");
  r.folds_fingerprint = str("folds_fingerprint");
  if (j.contains("cache_dir") && j.at("cache_dir").is_string()) r.cache_dir = j.at("cache_dir").get<std::string>();
  if (!j.contains("n_folds") || !j.at("n_folds").is_number_integer() || j.at("n_folds").get<int>() < 1)
    throw FormatError(file, "run.n_folds", "missing or not a positive integer");
  r.n_folds = j.at("n_folds").get<int>();
  if (j.contains("config")) r.config = j.at("config");
  return r;
}


namespace {
std::string fmt(double v, int prec = 6) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(prec) << v;
  return s.str();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Fold results

void write_fold_results(const std::string& run_dir, const RunInfo& run, const FoldResult& fold,
                        const std::vector<cache::SceneDims>& scenes) {
  const stdfs::path dir = stdfs::path(run_dir) / ("fold-" + std::to_string(fold.fold));
  std::error_code ec;
  stdfs::create_directories(dir, ec);
  if (ec) throw IoError(dir.string(), "create_directories", ec.value());
  const Metrics& m = fold.metrics;

  auto preds = fold.predictions;
  std::sort(preds.begin(), preds.end(), [](const Prediction& a, const Prediction& b) { return a.id < b.id; });
  for (std::size_t i = 1; i < preds.size(); ++i)
    if (preds[i].id == preds[i - 1].id)
      throw ConfigError("fold " + std::to_string(fold.fold) + ": sample " + std::to_string(preds[i].id) + " predicted twice");
  std::string csv = "sample_id,scene,row,col,true,predicted\n";
  csv.reserve(csv.size() + preds.size() * 32);
  for (const auto& p : preds) {
    csv += std::to_string(p.id) + ',' + std::to_string(p.scene) + ',' + std::to_string(p.row) + ',' +
           std::to_string(p.col) + ',' + std::to_string(p.true_label) + ',' + std::to_string(p.pred_label) + '\n';
  }
  fs::write_text_atomic((dir / "predictions.csv").string(), csv);

  const int c = m.confusion.n_classes();
  std::string cm = "true\\pred";
  for (auto v : m.label_values) cm += ',' + std::to_string(v);
  cm += '\n';
  for (int i = 0; i < c; ++i) {
    cm += std::to_string(m.label_values[static_cast<std::size_t>(i)]);
    for (int j = 0; j < c; ++j) cm += ',' + std::to_string(m.confusion.at(i, j));
    cm += '\n';
  }
  fs::write_text_atomic((dir / "confusion.csv").string(), cm);
  write_confusion_png((dir / "confusion.png").string(), m, fold.fold);
  write_map_png((dir / "map.png").string(), fold, scenes, m.label_values);

  json j;
  j["fold"] = fold.fold;
  j["n_folds"] = run.n_folds;
  j["run"] = to_json(run);
  j["metrics"] = to_json(m);
  j["train"] = fold.extra;
  // metrics.json last: its presence marks a complete fold for `hsipipe report`.
  fs::write_text_atomic((dir / "metrics.json").string(), j.dump(2) + "\n");
}

// ---------------------------------------------------------------------------------------------
// Summary

namespace {

struct FoldFile {
  int fold;
  std::string file;
  RunInfo run;
  Metrics metrics;
};

FoldFile read_fold(const stdfs::path& file, int dir_fold) {
  FoldFile f;
  f.file = file.string();
  json j;
  try {
    j = json::parse(fs::read_text(f.file));
  } catch (const json::parse_error& e) {
    throw FormatError(f.file, "json", e.what());
  }
  if (!j.is_object() || !j.contains("fold") || !j["fold"].is_number_integer())
    throw FormatError(f.file, "fold", "missing or not an integer");
  f.fold = j["fold"].get<int>();
  if (f.fold != dir_fold)
    throw FormatError(f.file, "fold", "says fold " + std::to_string(f.fold) + " but lies in fold-" + std::to_string(dir_fold));
  if (!j.contains("run")) throw FormatError(f.file, "run", "missing");
  f.run = run_info_from_json(j["run"], f.file);
  if (!j.contains("n_folds") || j["n_folds"] != f.run.n_folds)
    throw FormatError(f.file, "n_folds", "missing or different from run.n_folds");
  if (f.fold < 0 || f.fold >= f.run.n_folds)
    throw FormatError(f.file, "fold", std::to_string(f.fold) + " outside 0.." + std::to_string(f.run.n_folds - 1));
  if (!j.contains("metrics")) throw FormatError(f.file, "metrics", "missing");
  f.metrics = metrics_from_json(j["metrics"], f.file);
  return f;
}

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0.0 : s / static_cast<double>(v.size());
}
json sample_std(const std::vector<double>& v) {
  if (v.size() < 2) return nullptr;
  const double m = mean_of(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

}  // namespace

namespace {
/// For every key whose value differs between the folds' run.config: {key: {"fold K": value, ...}}.
json config_differences(const std::map<int, FoldFile>& folds) {
  std::set<std::string> keys;
  for (const auto& [k, f] : folds)
    if (f.run.config.is_object())
      for (const auto& [key, v] : f.run.config.items()) keys.insert(key);
  json diff = json::object();
  for (const auto& key : keys) {
    json values = json::object();
    std::set<std::string> distinct;
    for (const auto& [k, f] : folds) {
      const json v = f.run.config.is_object() && f.run.config.contains(key) ? f.run.config[key] : json(nullptr);
      values["fold " + std::to_string(k)] = v;
      distinct.insert(v.dump());
    }
    if (distinct.size() > 1) diff[key] = values;
  }
  return diff;
}
}  // namespace

namespace {

using FoldMap = std::map<int, FoldFile>;
using PathMap = std::map<int, stdfs::path>;

// The run's fold-K/ folders: requested folds with metrics.json are read into `folds`, requested ones
// without it (failed or still running) go to `unfinished`, the metrics.json of folds not requested to
// `others` (read later only for the fold count).
void scan_fold_dirs(const std::string& run_dir, const std::vector<int>& expect_folds, FoldMap& folds, PathMap& unfinished,
                    PathMap& others) {
  const auto requested = [&](int k) {
    return expect_folds.empty() || std::find(expect_folds.begin(), expect_folds.end(), k) != expect_folds.end();
  };
  for (const auto& e : stdfs::directory_iterator(run_dir)) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || name.rfind("fold-", 0) != 0) continue;
    const std::string num = name.substr(5);
    if (num.empty() || num.size() > 9 ||
        !std::all_of(num.begin(), num.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
      continue;
    const int k = std::stoi(num);
    const auto file = e.path() / "metrics.json";
    const bool done = stdfs::exists(file);
    if (!requested(k)) {
      if (done) others.emplace(k, file);
    } else if (done) {
      folds.emplace(k, read_fold(file, k));
    } else {
      unfinished.emplace(k, file);
    }
  }
}

// Every requested result must come from the same run (same cache, folds file, k and model).
void check_same_run(const FoldMap& folds) {
  if (folds.empty()) return;
  const FoldFile& ref = folds.begin()->second;
  for (const auto& [k, f] : folds) {
    auto differ = [&](const char* field, const std::string& a, const std::string& b) {
      if (a != b)
        throw StaleError(f.file + ": field '" + field + "' is '" + b + "' but " + ref.file + " has '" + a +
                         "': folds from different runs cannot be summarised together");
    };
    differ("run.cache_checksum", ref.run.cache_checksum, f.run.cache_checksum);
    differ("run.folds_fingerprint", ref.run.folds_fingerprint, f.run.folds_fingerprint);
    differ("run.n_folds", std::to_string(ref.run.n_folds), std::to_string(f.run.n_folds));
    const auto model = [](const RunInfo& r) {
      return r.config.is_object() && r.config.contains("model") ? r.config["model"].dump() : std::string("null");
    };
    differ("run.config.model", model(ref.run), model(f.run));
    if (f.metrics.label_values != ref.metrics.label_values)
      throw StaleError(f.file + ": field 'metrics.label_values' differs from " + ref.file);
  }
}

// The fold count comes from the results themselves (the requested ones agree, checked above), so a
// requested fold the run cannot have is named as such, not as a fold whose training is missing. Every
// wanted fold must have its results.
void check_folds_present(const std::string& run_dir, const std::vector<int>& expect_folds, const FoldMap& folds,
                         const PathMap& unfinished, const PathMap& others) {
  int n_folds = -1;
  if (!folds.empty())
    n_folds = folds.begin()->second.run.n_folds;
  else if (!others.empty())
    n_folds = read_fold(others.begin()->second, others.begin()->first).run.n_folds;
  else
    throw IoError(run_dir, "no fold-*/metrics.json found (nothing to summarise)");
  for (int k : expect_folds)
    if (k >= n_folds)
      throw ConfigError("--folds: fold " + std::to_string(k) + " is out of range: the run in " + run_dir + " has " +
                        std::to_string(n_folds) + " folds (0-" + std::to_string(n_folds - 1) + ")");
  std::vector<int> want = expect_folds;
  if (want.empty())
    for (int k = 0; k < n_folds; ++k) want.push_back(k);
  for (int k : want)
    if (!folds.count(k)) {
      const auto u = unfinished.find(k);
      if (u != unfinished.end())
        throw IoError(u->second.string(), "missing: fold " + std::to_string(k) +
                                              " has no metrics.json (its training task did not finish; "
                                              "rerun hsipipe train --fold " +
                                              std::to_string(k) + ")");
      throw IoError((stdfs::path(run_dir) / ("fold-" + std::to_string(k)) / "metrics.json").string(),
                    "missing: fold " + std::to_string(k) + " of " + std::to_string(n_folds) +
                        " has no results (run hsipipe train --fold " + std::to_string(k) + ")");
    }
}

// Per-fold rows, mean and sample std over the folds, and the pooled confusion's metrics.
void add_fold_statistics(const FoldMap& folds, json& s) {
  const FoldFile& ref = folds.begin()->second;
  json rows = json::array();
  std::vector<double> oa, aa, kappa;
  ConfusionMatrix pooled(static_cast<int>(ref.metrics.label_values.size()));
  for (const auto& [k, f] : folds) {
    rows.push_back({{"fold", k}, {"oa", f.metrics.oa}, {"aa", f.metrics.aa}, {"kappa", f.metrics.kappa}, {"n", f.metrics.n}});
    oa.push_back(f.metrics.oa);
    aa.push_back(f.metrics.aa);
    kappa.push_back(f.metrics.kappa);
    const int c = pooled.n_classes();
    for (int i = 0; i < c; ++i)
      for (int j = 0; j < c; ++j) pooled.add(i, j, f.metrics.confusion.at(i, j));
  }
  const Metrics pm = compute_metrics(pooled, ClassIndex(ref.metrics.label_values));
  s["folds"] = rows;
  s["mean"] = {{"oa", mean_of(oa)}, {"aa", mean_of(aa)}, {"kappa", mean_of(kappa)}};
  s["std"] = {{"oa", sample_std(oa)}, {"aa", sample_std(aa)}, {"kappa", sample_std(kappa)}};
  s["std_kind"] = "sample standard deviation (n-1); null with one fold";
  s["pooled"] = {{"oa", pm.oa}, {"aa", pm.aa}, {"kappa", pm.kappa}, {"n", pm.n}};
}

}  // namespace

json summarize_run(const std::string& run_dir, const std::vector<int>& expect_folds, bool allow_mixed) {
  std::error_code ec;
  if (!stdfs::is_directory(run_dir, ec)) throw IoError(run_dir, "not a directory (RUN_DIR of hsipipe train --out)");
  FoldMap folds;
  PathMap unfinished, others;
  scan_fold_dirs(run_dir, expect_folds, folds, unfinished, others);
  check_same_run(folds);
  check_folds_present(run_dir, expect_folds, folds, unfinished, others);

  const FoldFile& ref = folds.begin()->second;
  const json mixed = config_differences(folds);
  if (!mixed.empty() && !allow_mixed) {
    std::string what;
    for (const auto& [key, values] : mixed.items()) what += (what.empty() ? "" : "; ") + key + " " + values.dump();
    throw ConfigError(run_dir + ": its folds were trained with different settings (" + what +
                      "): one summary would describe none of them; train them alike, or report --allow-mixed to "
                      "summarise them anyway with the differences listed");
  }
  json s;
  if (!mixed.empty()) s["config_differences"] = mixed;
  add_fold_statistics(folds, s);
  s["n_folds"] = ref.run.n_folds;
  s["folds_summarised"] = static_cast<int>(folds.size());
  s["label_values"] = ref.metrics.label_values;
  s["run"] = to_json(ref.run);
  fs::write_text_atomic((stdfs::path(run_dir) / "summary.json").string(), s.dump(2) + "\n");
  fs::write_text_atomic((stdfs::path(run_dir) / "summary.md").string(), summary_markdown(s));
  return s;
}

std::string summary_markdown(const json& s) {
  std::ostringstream o;
  const json& run = s.at("run");
  o << "# Run summary\n\n";
  if (run.contains("config") && run["config"].is_object() && run["config"].contains("model"))
    o << "Model: `" << run["config"]["model"].dump() << "`  \n";
  o << "Cache checksum: `" << run.value("cache_checksum", "") << "`  \n";
  o << "Folds fingerprint: `" << run.value("folds_fingerprint", "") << "`  \n";
  o << "Folds: " << s.at("folds_summarised").get<int>() << " of " << s.at("n_folds").get<int>() << "\n\n";
  o << "| fold | n | OA | AA | kappa |\n|---:|---:|---:|---:|---:|\n";
  for (const auto& r : s.at("folds"))
    o << "| " << r.at("fold").get<int>() << " | " << r.at("n").get<std::int64_t>() << " | " << fmt(r.at("oa").get<double>(), 4)
      << " | " << fmt(r.at("aa").get<double>(), 4) << " | " << fmt(r.at("kappa").get<double>(), 4) << " |\n";
  auto pm = [&](const char* k) {
    const json& sd = s.at("std").at(k);
    return fmt(s.at("mean").at(k).get<double>(), 4) + " +- " + (sd.is_null() ? std::string("n/a") : fmt(sd.get<double>(), 4));
  };
  o << "| **mean +- std** | | " << pm("oa") << " | " << pm("aa") << " | " << pm("kappa") << " |\n\n";
  const json& p = s.at("pooled");
  o << "Pooled over all validation samples (n = " << p.at("n").get<std::int64_t>() << "): OA " << fmt(p.at("oa").get<double>(), 4)
    << ", AA " << fmt(p.at("aa").get<double>(), 4) << ", kappa " << fmt(p.at("kappa").get<double>(), 4) << ".\n\n";
  o << "Accuracies are fractions (1 = 100%). OA = overall accuracy, AA = mean per-class accuracy, kappa = Cohen's "
       "kappa. std is the sample standard deviation over folds (divisor n-1).\n\n";
  if (s.contains("config_differences")) {
    o << "**The folds were trained with different settings** (`report --allow-mixed`); the configuration below is "
         "fold " << s.at("folds").at(0).at("fold").get<int>() << "'s. Differences:\n\n";
    for (const auto& [key, values] : s["config_differences"].items()) o << "- `" << key << "`: " << values.dump() << "\n";
    o << "\n";
  }
  o << "Configuration:\n\n```json\n" << run.value("config", json::object()).dump(2) << "\n```\n";
  return o.str();
}

}  // namespace hsipipe::train

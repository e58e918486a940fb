// folds/folds_file: the folds file (docs/FOLDS.md, "The folds file"): writing it (to_json, save_folds),
// reading it with every field checked (load_folds: FormatError naming the file and field), and checking
// a file against a cache's sample table (check_folds, require_folds_match). The split algorithms are in
// folds.cpp; nothing here changes what they compute.
#include <algorithm>
#include <limits>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "folds/folds.hpp"

namespace hsipipe::folds {

nlohmann::ordered_json to_json(const Folds& f) {
  nlohmann::ordered_json j;
  j["format"] = "hsipipe-folds";
  j["format_version"] = f.format_version;
  j["algorithm_version"] = f.algorithm_version;
  j["k"] = f.k;
  j["seed"] = f.seed;
  j["strategy"] = strategy_name(f.strategy);
  nlohmann::ordered_json par;
  par["patch"] = f.patch;
  if (f.strategy == Strategy::spatial) {
    par["block"] = f.block;
    par["block_default"] = f.block_default;
    par["buffer"] = f.buffer;
    par["grid_offset"] = {f.grid_offset_row, f.grid_offset_col};
  }
  j["parameters"] = par;
  j["n_samples"] = f.n_samples;
  j["data_checksum"] = f.data_checksum;
  j["samples_checksum"] = f.samples_checksum;
  j["fingerprint"] = f.fingerprint;
  j["classes"] = f.classes;
  j["counts"] = f.counts;
  std::vector<std::uint64_t> n_ex;
  for (const auto& e : f.excluded) n_ex.push_back(e.size());
  j["excluded_counts"] = n_ex;
  j["leakage"] = {{"radius", f.leakage_radius}, {"fraction", f.leakage}, {"leaky_per_fold", f.leaky}};
  j["warnings"] = f.warnings;
  j["excluded"] = f.excluded;
  j["fold"] = f.fold;
  return j;
}

std::string to_json_text(const Folds& f) {
  const auto j = to_json(f);
  std::string out = "{\n";
  bool first = true;
  for (const auto& [key, value] : j.items()) {
    if (!first) out += ",\n";
    first = false;
    out += "  " + nlohmann::ordered_json(key).dump() + ": " + value.dump();
  }
  out += "\n}\n";
  return out;
}

void save_folds(const Folds& f, const std::string& path) { fs::write_text_atomic(path, to_json_text(f)); }

namespace {

const nlohmann::json& field(const nlohmann::json& j, const char* key, const std::string& path) {
  const auto it = j.find(key);
  if (it == j.end()) throw FormatError(path, key, "missing");
  return *it;
}

template <class T>
T as_int(const nlohmann::json& j, const char* key, const std::string& path, T lo, T hi) {
  const auto& v = field(j, key, path);
  if (!v.is_number_integer()) throw FormatError(path, key, "expected an integer, got " + v.dump().substr(0, 40));
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(hi) || (lo > T{0} && u < static_cast<std::uint64_t>(lo))) throw FormatError(path, key, "value " + v.dump() + " out of range");
    return static_cast<T>(u);
  }
  const auto s = v.get<std::int64_t>();
  if (s < static_cast<std::int64_t>(lo) || (s >= 0 && static_cast<std::uint64_t>(s) > static_cast<std::uint64_t>(hi))) {
    throw FormatError(path, key, "value " + v.dump() + " out of range");
  }
  return static_cast<T>(s);
}

std::string as_string(const nlohmann::json& j, const char* key, const std::string& path) {
  const auto& v = field(j, key, path);
  if (!v.is_string()) throw FormatError(path, key, "expected a string");
  return v.get<std::string>();
}

bool is_hex64(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// The identity of the split: format and algorithm versions, k, seed, strategy and its parameters,
// n_samples and the checksums.
void read_header(const nlohmann::json& j, const std::string& path, Folds& f) {
  if (as_string(j, "format", path) != "hsipipe-folds") throw FormatError(path, "format", "expected \"hsipipe-folds\"");
  f.format_version = as_int<int>(j, "format_version", path, 0, 1 << 30);
  if (f.format_version != kFormatVersion) {
    throw FormatError(path, "format_version", "file has " + std::to_string(f.format_version) + ", this hsipipe reads " +
                                                  std::to_string(kFormatVersion));
  }
  f.algorithm_version = as_int<int>(j, "algorithm_version", path, 0, 1 << 30);
  if (f.algorithm_version != kAlgorithmVersion) {
    throw FormatError(path, "algorithm_version", "file has " + std::to_string(f.algorithm_version) +
                                                     ", this hsipipe implements " + std::to_string(kAlgorithmVersion));
  }
  f.k = as_int<int>(j, "k", path, 2, 1 << 30);
  f.seed = as_int<std::uint64_t>(j, "seed", path, 0, std::numeric_limits<std::uint64_t>::max());
  try {
    f.strategy = strategy_from_name(as_string(j, "strategy", path));
  } catch (const ConfigError&) {
    throw FormatError(path, "strategy", "unknown strategy \"" + as_string(j, "strategy", path) + "\"");
  }
  const auto& par = field(j, "parameters", path);
  if (!par.is_object()) throw FormatError(path, "parameters", "expected an object");
  f.patch = as_int<int>(par, "patch", path + ": parameters", 1, 1 << 20);
  if (f.strategy == Strategy::spatial) {
    const std::string pp = path + ": parameters";
    f.block = as_int<int>(par, "block", pp, 1, 1 << 30);
    f.buffer = as_int<int>(par, "buffer", pp, 0, 1 << 20);
    const auto& bd = field(par, "block_default", pp);
    if (!bd.is_boolean()) throw FormatError(pp, "block_default", "expected true or false");
    f.block_default = bd.get<bool>();
    const auto& go = field(par, "grid_offset", pp);
    if (!go.is_array() || go.size() != 2 || !go[0].is_number_integer() || !go[1].is_number_integer()) {
      throw FormatError(pp, "grid_offset", "expected [row, col]");
    }
    f.grid_offset_row = go[0].get<std::int64_t>();
    f.grid_offset_col = go[1].get<std::int64_t>();
  }
  f.n_samples = as_int<std::uint64_t>(j, "n_samples", path, 0, std::numeric_limits<std::int32_t>::max());
  if (j.contains("data_checksum")) f.data_checksum = as_string(j, "data_checksum", path);  // informational
  f.samples_checksum = as_string(j, "samples_checksum", path);
  if (!is_hex64(f.samples_checksum)) throw FormatError(path, "samples_checksum", "expected 64 lower-case hex digits");
  f.fingerprint = as_string(j, "fingerprint", path);
  if (!is_hex64(f.fingerprint)) throw FormatError(path, "fingerprint", "expected 64 lower-case hex digits");
}

// The split itself: one fold id per sample, and per fold the excluded (buffer) training ids.
void read_assignment(const nlohmann::json& j, const std::string& path, Folds& f) {
  const auto& fold = field(j, "fold", path);
  if (!fold.is_array()) throw FormatError(path, "fold", "expected an array of integers");
  if (fold.size() != f.n_samples) {
    throw FormatError(path, "fold", "has " + std::to_string(fold.size()) + " entries, n_samples is " + std::to_string(f.n_samples));
  }
  f.fold.resize(fold.size());
  for (std::size_t i = 0; i < fold.size(); ++i) {
    const auto& v = fold[i];
    if (!v.is_number_integer() || v.get<std::int64_t>() < -1 || v.get<std::int64_t>() >= f.k) {
      throw FormatError(path, "fold", "entry " + std::to_string(i) + " is " + v.dump() + ", expected -1 .. " + std::to_string(f.k - 1));
    }
    f.fold[i] = v.get<std::int32_t>();
  }
  const auto& ex = field(j, "excluded", path);
  if (!ex.is_array() || ex.size() != static_cast<std::size_t>(f.k)) {
    throw FormatError(path, "excluded", "expected k = " + std::to_string(f.k) + " arrays of sample ids");
  }
  f.excluded.resize(static_cast<std::size_t>(f.k));
  for (std::size_t g = 0; g < ex.size(); ++g) {
    if (!ex[g].is_array()) throw FormatError(path, "excluded", "entry " + std::to_string(g) + " is not an array");
    for (const auto& v : ex[g]) {
      if (!v.is_number_unsigned() || v.get<std::uint64_t>() >= f.n_samples) {
        throw FormatError(path, "excluded", "fold " + std::to_string(g) + ": " + v.dump() + " is not a sample id");
      }
      const auto id = v.get<std::uint64_t>();
      if (!f.excluded[g].empty() && f.excluded[g].back() >= id) {
        throw FormatError(path, "excluded", "fold " + std::to_string(g) + ": ids not strictly ascending at " + v.dump());
      }
      if (f.fold[id] < 0 || static_cast<std::size_t>(f.fold[id]) == g) {
        throw FormatError(path, "excluded", "fold " + std::to_string(g) + ": sample " + v.dump() +
                                                " is not a training sample of that fold");
      }
      f.excluded[g].push_back(id);
    }
  }
  if (f.strategy != Strategy::spatial) {
    for (const auto& e : f.excluded)
      if (!e.empty()) throw FormatError(path, "excluded", "non-empty for strategy " + strategy_name(f.strategy));
  }
}

// Informational fields (docs/FOLDS.md section 10: readers must not rely on them): read when present,
// and then well-formed; absent, complete_informational() computes them from the sample table.
void read_informational(const nlohmann::json& j, const std::string& path, Folds& f) {
  const char* const info[] = {"classes", "counts", "leakage"};
  const auto present = std::count_if(std::begin(info), std::end(info), [&](const char* k) { return j.contains(k); });
  if (present != 0 && present != 3) throw FormatError(path, "classes/counts/leakage", "give all three or none");
  try {
    if (present == 3) {
      f.classes = field(j, "classes", path).get<std::vector<std::int32_t>>();
      f.counts = field(j, "counts", path).get<std::vector<std::vector<std::uint64_t>>>();
      const auto& lk = field(j, "leakage", path);
      f.leakage_radius = lk.at("radius").get<int>();
      f.leakage = lk.at("fraction").get<double>();
      f.leaky = lk.at("leaky_per_fold").get<std::vector<std::uint64_t>>();
      f.has_informational = true;
    }
    if (j.contains("warnings")) f.warnings = j["warnings"].get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(path, "classes/counts/leakage/warnings", e.what());
  }
  if (f.has_informational) {
    if (f.counts.size() != static_cast<std::size_t>(f.k)) throw FormatError(path, "counts", "expected k rows");
    for (const auto& row : f.counts)
      if (row.size() != f.classes.size()) throw FormatError(path, "counts", "row length differs from the number of classes");
  }
}

}  // namespace

Folds load_folds(const std::string& path) {
  const std::string text = fs::read_text(path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw FormatError(path, "json", std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw FormatError(path, "json", "top level is not an object");
  Folds f;
  read_header(j, path, f);
  read_assignment(j, path, f);
  read_informational(j, path, f);
  return f;
}

CheckReport check_folds(const Folds& f, const SampleTableView& t, const std::string& data_checksum) {
  CheckReport r;
  auto problem = [&](std::string s) {
    r.ok = false;
    r.problems.push_back(std::move(s));
  };
  if (f.n_samples != t.size()) {
    problem("the folds are for " + std::to_string(f.n_samples) + " samples, the cache has " + std::to_string(t.size()));
    return r;
  }
  const std::string sc = samples_checksum(t);
  if (sc != f.samples_checksum) {
    problem("the sample table differs (samples_checksum " + f.samples_checksum.substr(0, 16) + "... in the file, " +
            sc.substr(0, 16) + "... in the cache): other scene, labels or sample order");
  }
  std::uint64_t bad_fold = 0, first_bad = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if ((t.label[i] < 0) != (f.fold[i] < 0)) {
      if (!bad_fold) first_bad = i;
      ++bad_fold;
    }
  }
  if (bad_fold) {
    problem(std::to_string(bad_fold) + " sample(s) with a fold id that contradicts their label (first: sample " +
            std::to_string(first_bad) + ")");
  }
  r.recomputed_fingerprint = fingerprint(t, f.fold, f.excluded);
  if (r.recomputed_fingerprint != f.fingerprint) {
    problem("fingerprint " + r.recomputed_fingerprint + " recomputed from the fold array and this cache's samples differs from " +
            f.fingerprint + " in the file");
  }
  if (!data_checksum.empty() && !f.data_checksum.empty() && data_checksum != f.data_checksum) {
    r.notes.push_back("data_checksum differs (file " + f.data_checksum + ", cache " + data_checksum +
                      "): another dtype, backend or preprocessing of the same sample table");
  }
  if (t.patch != f.patch) {
    r.notes.push_back("the folds were made for patch " + std::to_string(f.patch) + ", the cache has patch " +
                      std::to_string(t.patch) + ": leakage and the spatial buffer refer to the file's patch");
  }
  if (r.ok) {
    // Regenerate from the recorded parameters: tells whether this implementation produced the same split.
    FoldParams p;
    p.k = f.k;
    p.seed = f.seed;
    p.strategy = f.strategy;
    if (f.strategy == Strategy::spatial) {
      p.block = f.block_default ? 0 : f.block;
      p.buffer = f.buffer;
    }
    SampleTableView tv = t;
    tv.patch = f.patch;
    try {
      const Folds g = make_folds(tv, p);
      if (g.fingerprint == f.fingerprint) {
        r.notes.push_back("regenerated from k, seed, strategy and parameters: identical (algorithm version " +
                          std::to_string(kAlgorithmVersion) + ")");
      } else {
        std::uint64_t diff = 0;
        for (std::size_t i = 0; i < t.size(); ++i) diff += g.fold[i] != f.fold[i];
        r.notes.push_back("regenerating from k, seed, strategy and parameters gives other folds (" + std::to_string(diff) +
                          " samples differ): the file was not made by this algorithm version with those parameters");
      }
    } catch (const Error& e) {
      r.notes.push_back(std::string("could not regenerate from the recorded parameters: ") + e.what());
    }
  }
  return r;
}

void require_folds_match(const Folds& f, const SampleTableView& t, const std::string& data_checksum, const std::string& what) {
  const auto r = check_folds(f, t, data_checksum);
  if (r.ok) return;
  std::string msg = what + ": folds do not match this cache:";
  for (const auto& p : r.problems) msg += "\n  - " + p;
  throw StaleError(msg);
}

}  // namespace hsipipe::folds

// hsipipe folds: k-fold splits of a cache's sample table (docs/FOLDS.md), their check against a
// cache received from elsewhere, and the sample table export other teams' tools read.
// Rank-local: reads only labels and coordinates, never the samples.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "cache/cache.hpp"
#include "cli/command.hpp"
#include "core/error.hpp"
#include "core/outputs.hpp"
#include "core/fs.hpp"
#include "folds/folds.hpp"

namespace hsipipe::cli {
namespace {

/// A sample table with its owner: the view handed to the folds library points into it.
struct LoadedTable {
  std::vector<std::int32_t> scene, row, col, label;
  std::vector<folds::SceneSize> sizes;
  std::vector<std::string> names;
  int patch = 1;
  std::string data_checksum;  ///< empty for a CSV table
  std::string source;
  folds::SampleTableView view() const {
    return {scene, row, col, label, sizes, patch};
  }
};

LoadedTable load_cache(const std::string& dir) {
  const auto reader = cache::CacheReader::open(dir);
  cache::require_current_sources(reader, &std::cerr);  // folds of a stale cache would train on old data
  cache::SampleTable t = reader.read_sample_table();
  LoadedTable out;
  out.scene = std::move(t.scene);
  out.row = std::move(t.row);
  out.col = std::move(t.col);
  out.label = std::move(t.label);
  for (const auto& s : t.scenes) {
    out.sizes.push_back({s.rows, s.cols});
    out.names.push_back(s.name);
  }
  out.patch = reader.patch();
  out.data_checksum = reader.data_checksum();
  out.source = dir;
  return out;
}

std::int64_t parse_int(const std::string& s, const std::string& path, std::size_t line, const char* field) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || errno || *end != '\0' || v < std::numeric_limits<std::int32_t>::min() ||
      v > std::numeric_limits<std::int32_t>::max()) {
    throw FormatError(path + ":" + std::to_string(line), field, "expected an integer, got '" + s + "'");
  }
  return v;
}

/// Reads the CSV of docs/FOLDS.md section 11.
LoadedTable load_csv(const std::string& path) {
  std::istringstream in(fs::read_text(path));
  LoadedTable out;
  out.source = path;
  std::string line;
  std::size_t lineno = 0;
  bool header = false;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (line[0] == '#') {
      auto parts = split_list(line.substr(1));
      if (parts.size() >= 2 && parts[0] == "patch") {
        out.patch = static_cast<int>(parse_int(parts[1], path, lineno, "patch"));
      } else if (parts.size() >= 5 && parts[0] == "scene") {
        const auto idx = parse_int(parts[1], path, lineno, "scene index");
        if (idx != static_cast<std::int64_t>(out.sizes.size())) {
          throw FormatError(path + ":" + std::to_string(lineno), "scene", "scenes must be listed in index order");
        }
        out.sizes.push_back({static_cast<std::uint32_t>(parse_int(parts[2], path, lineno, "scene rows")),
                             static_cast<std::uint32_t>(parse_int(parts[3], path, lineno, "scene cols"))});
        out.names.push_back(parts[4]);
      }
      continue;
    }
    const auto cells = split_list(line);
    if (!header) {
      if (cells != std::vector<std::string>{"sample", "scene", "row", "col", "label"}) {
        throw FormatError(path + ":" + std::to_string(lineno), "header", "expected 'sample,scene,row,col,label'");
      }
      header = true;
      continue;
    }
    if (cells.size() != 5) throw FormatError(path + ":" + std::to_string(lineno), "row", "expected 5 columns");
    if (parse_int(cells[0], path, lineno, "sample") != static_cast<std::int64_t>(out.label.size())) {
      throw FormatError(path + ":" + std::to_string(lineno), "sample", "samples must be numbered 0, 1, ... in order");
    }
    out.scene.push_back(static_cast<std::int32_t>(parse_int(cells[1], path, lineno, "scene")));
    out.row.push_back(static_cast<std::int32_t>(parse_int(cells[2], path, lineno, "row")));
    out.col.push_back(static_cast<std::int32_t>(parse_int(cells[3], path, lineno, "col")));
    out.label.push_back(static_cast<std::int32_t>(parse_int(cells[4], path, lineno, "label")));
  }
  if (!header) throw FormatError(path, "header", "no 'sample,scene,row,col,label' line");
  return out;
}

void export_csv(const LoadedTable& t, const std::string& path, bool force) {
  std::string s = "# hsipipe-samples 1\n# patch," + std::to_string(t.patch) + "\n";
  for (std::size_t i = 0; i < t.sizes.size(); ++i) {
    s += "# scene," + std::to_string(i) + "," + std::to_string(t.sizes[i].rows) + "," + std::to_string(t.sizes[i].cols) +
         "," + t.names[i] + "\n";
  }
  s += "sample,scene,row,col,label\n";
  for (std::size_t i = 0; i < t.label.size(); ++i) {
    s += std::to_string(i) + "," + std::to_string(t.scene[i]) + "," + std::to_string(t.row[i]) + "," +
         std::to_string(t.col[i]) + "," + std::to_string(t.label[i]) + "\n";
  }
  outputs::check_output_file(path, force, "folds --export-samples", &s);
  fs::write_text_atomic(path, s);
}

std::uint64_t parse_seed(const std::string& s) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (s.empty() || s[0] == '-' || s[0] == '+' || errno || *end != '\0') {
    throw ConfigError("--seed: expected an unsigned 64-bit integer, got '" + s + "'");
  }
  return v;
}

void print_table(const folds::Folds& f, std::ostream& os) {
  std::vector<std::string> head = {"fold"};
  for (const auto c : f.classes) head.push_back(std::string(1, 'c').append(std::to_string(c)));
  head.insert(head.end(), {"total", "excluded", "leaky"});
  std::vector<std::vector<std::string>> rows;
  std::vector<std::uint64_t> col_tot(f.classes.size(), 0);
  std::uint64_t all = 0, all_ex = 0, all_leaky = 0;
  for (int g = 0; g < f.k; ++g) {
    std::vector<std::string> r = {std::to_string(g)};
    std::uint64_t tot = 0;
    for (std::size_t c = 0; c < f.classes.size(); ++c) {
      const auto n = f.counts[static_cast<std::size_t>(g)][c];
      r.push_back(std::to_string(n));
      tot += n;
      col_tot[c] += n;
    }
    const auto ex = f.excluded.empty() ? 0 : f.excluded[static_cast<std::size_t>(g)].size();
    const auto lk = f.leaky.empty() ? 0 : f.leaky[static_cast<std::size_t>(g)];
    r.insert(r.end(), {std::to_string(tot), std::to_string(ex), std::to_string(lk)});
    all += tot;
    all_ex += ex;
    all_leaky += lk;
    rows.push_back(std::move(r));
  }
  std::vector<std::string> last = {"all"};
  for (const auto n : col_tot) last.push_back(std::to_string(n));
  last.insert(last.end(), {std::to_string(all), std::to_string(all_ex), std::to_string(all_leaky)});
  rows.push_back(std::move(last));
  std::vector<std::size_t> w(head.size());
  for (std::size_t c = 0; c < head.size(); ++c) {
    w[c] = head[c].size();
    for (const auto& r : rows) w[c] = std::max(w[c], r[c].size());
  }
  auto line = [&](const std::vector<std::string>& r) {
    os << " ";
    for (std::size_t c = 0; c < r.size(); ++c) os << " " << std::setw(static_cast<int>(w[c])) << r[c];
    os << "\n";
  };
  os << "validation samples per fold x class (c<label>), training samples excluded by the buffer, leaky validation samples:\n";
  line(head);
  for (const auto& r : rows) line(r);
}

void print_summary(const folds::Folds& f, std::ostream& os) {
  os << "folds: " << folds::strategy_name(f.strategy) << ", k = " << f.k << ", seed = " << f.seed << ", "
     << f.n_samples << " samples, patch " << f.patch << "\n";
  if (f.strategy == folds::Strategy::spatial) {
    os << "spatial: blocks of " << f.block << " x " << f.block << " pixels"
       << (f.block_default ? " (default: max(8, 4 x patch), reduced until >= 4k non-empty blocks)" : " (--block)")
       << ", grid offset (" << f.grid_offset_row << ", " << f.grid_offset_col << "), buffer radius " << f.buffer
       << (f.buffer == f.patch / 2 ? " (patch / 2)" : "") << "\n";
  }
  print_table(f, os);
  os << "leakage: " << std::fixed << std::setprecision(4) << f.leakage << std::defaultfloat
     << " of validation samples have a training pixel within their patch (radius " << f.leakage_radius << ")\n";
  os << "fingerprint: " << f.fingerprint << "\n";
}

// The split's parameters from the options, each validated before anything is read.
folds::FoldParams fold_params(const po::variables_map& vm) {
  folds::FoldParams p;
  p.k = vm["k"].as<int>();
  if (p.k < 2) throw ConfigError("--k: need at least 2 folds, got " + std::to_string(p.k));
  p.seed = parse_seed(vm["seed"].as<std::string>());
  p.strategy = folds::strategy_from_name(vm["strategy"].as<std::string>());
  if ((vm.count("block") || vm.count("buffer")) && p.strategy != folds::Strategy::spatial) {
    throw ConfigError("--block/--buffer: only for --strategy spatial");
  }
  if (vm.count("block")) {
    p.block = vm["block"].as<int>();
    if (p.block < 1) throw ConfigError("--block: expected a side >= 1, got " + std::to_string(p.block));
  }
  if (vm.count("buffer")) {
    p.buffer = vm["buffer"].as<int>();
    if (p.buffer < 0) throw ConfigError("--buffer: expected a radius >= 0, got " + std::to_string(p.buffer));
  }
  return p;
}

// --check FILE: the folds file against the table; prints the report, StaleError when refused.
void check_file(const po::variables_map& vm, const LoadedTable& table, const folds::SampleTableView& view) {
  const std::string path = vm["check"].as<std::string>();
  folds::Folds f = folds::load_folds(path);
  const auto r = folds::check_folds(f, view, table.data_checksum);
  if (f.n_samples == view.size()) folds::complete_informational(view, f);  // a file may omit them
  std::cout << "check " << path << " against " << table.source << ": " << (r.ok ? "OK" : "REFUSED") << "\n";
  print_summary(f, std::cout);
  std::cout << "recomputed fingerprint: " << r.recomputed_fingerprint << "\n";
  for (const auto& n : r.notes) std::cout << "note: " << n << "\n";
  for (const auto& w : f.warnings) std::cout << "warning (from the file): " << w << "\n";
  if (!r.ok) {
    std::string msg = path + ": refused for " + table.source + ":";
    for (const auto& pr : r.problems) msg += "\n  - " + pr;
    throw StaleError(msg);
  }
}

// --out FILE: makes the folds and writes them (the same bytes again are no loss; other content needs --force).
void write_folds(const po::variables_map& vm, const LoadedTable& table, const folds::SampleTableView& view,
                 const folds::FoldParams& p, bool force) {
  const std::string out = vm["out"].as<std::string>();
  folds::Folds f = folds::make_folds(view, p);
  f.data_checksum = table.data_checksum;
  print_summary(f, std::cout);
  for (const auto& w : f.warnings) std::cerr << "hsipipe folds: warning: " << w << "\n";
  const std::string text = folds::to_json_text(f);
  outputs::check_output_file(out, force, "folds --out", &text);
  fs::write_text_atomic(out, text);
  std::cout << "wrote " << out << "\n";
}

int run_folds(int argc, char** argv) {
  po::options_description desc("folds options");
  desc.add_options()
      ("cache", po::value<std::string>(), "cache directory whose sample table is split")
      ("samples", po::value<std::string>(), "sample table CSV (from --export-samples) instead of a cache")
      ("k", po::value<int>()->default_value(5), "number of folds (>= 2)")
      ("seed", po::value<std::string>()->default_value("42"), "seed, unsigned 64-bit")
      ("strategy", po::value<std::string>()->default_value("stratified"), folds::strategy_names(" | ").c_str())
      ("block", po::value<int>(), "spatial: block side in pixels (default from patch and scene, printed)")
      ("buffer", po::value<int>(), "spatial: exclusion radius in pixels (default patch / 2)")
      ("out", po::value<std::string>(), "write the folds file (JSON) here")
      ("check", po::value<std::string>(), "verify this folds file against --cache (or --samples)")
      ("export-samples", po::value<std::string>(), "write the sample table as CSV (docs/FOLDS.md section 11)")
      ("force", po::bool_switch(), "replace an existing --out / --export-samples file that holds other content");
  const Parsed a = parse(argc, argv, "folds",
                         "--cache DIR --k 5 --seed 42 --strategy " + folds::strategy_names("|") + " --out FOLDS.json\n"
                         "       hsipipe folds --check FOLDS.json --cache DIR\n"
                         "       hsipipe folds --cache DIR --export-samples SAMPLES.csv",
                         desc);
  if (a.help) return 0;
  const auto& vm = a.vm;
  if (vm.count("cache") == vm.count("samples")) throw ConfigError("hsipipe folds: give exactly one of --cache DIR or --samples CSV");
  if (!vm.count("out") && !vm.count("check") && !vm.count("export-samples")) {
    throw ConfigError("hsipipe folds: nothing to do: give --out FOLDS.json, --check FOLDS.json or --export-samples CSV");
  }
  if (vm.count("check") && vm.count("out")) throw ConfigError("hsipipe folds: --check and --out exclude each other");
  // Where the files go, before reading anything (core/outputs.hpp: never into a cache or a run's own folders);
  // an existing file is checked again against the bytes to write: a rerun that writes the same is no loss
  for (const char* opt : {"out", "export-samples"})
    if (vm.count(opt)) outputs::check_output_file(vm[opt].as<std::string>(), true, std::string("folds --") + opt);
  const bool force = vm["force"].as<bool>();

  // Validate every option before reading anything.
  const folds::FoldParams p = fold_params(vm);

  const LoadedTable table = vm.count("cache") ? load_cache(vm["cache"].as<std::string>())
                                              : load_csv(vm["samples"].as<std::string>());
  const auto view = table.view();

  if (vm.count("export-samples")) {
    const std::string out = vm["export-samples"].as<std::string>();
    export_csv(table, out, force);
    std::cout << "wrote " << out << " (" << table.label.size() << " samples, samples_checksum "
              << folds::samples_checksum(view) << ")\n";
  }

  if (vm.count("check")) {
    check_file(vm, table, view);
    return 0;
  }
  if (vm.count("out")) write_folds(vm, table, view, p, force);
  return 0;
}

}  // namespace

HSIPIPE_COMMAND("folds", "k-fold splits (stratified, spatial, random) of a cache's samples, check, export", run_folds);

}  // namespace hsipipe::cli

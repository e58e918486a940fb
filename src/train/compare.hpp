#pragma once
// train/compare: `hsipipe compare RUN_A RUN_B [...]`, runs of different networks or recipes on the same cache
// and the same folds file, side by side with paired statistics. Rank-local, reads only the runs' fold-I/
// metrics.json and predictions.csv (written by train, results.hpp), never writes into a run or a cache.
//
// A RUN argument is a run directory, or several joined by ',' (folds trained as separate `--fold I` tasks,
// e.g. Slurm array tasks, into separate --out directories); a run may also hold only some folds. Contracts:
//   - every fold of every run names the same cache data_checksum and folds fingerprint (StaleError, exit 5,
//     naming both runs and both fingerprints otherwise), and within one run the same training config
//     (ConfigError naming the key); all runs hold the same set of folds (ConfigError naming them);
//   - a fold's predictions.csv holds the same validation sample ids in every run (FormatError otherwise);
//   - statistics, against the first run: per fold the differences of OA, AA and kappa; McNemar on the
//     pooled validation predictions (b = first right and other wrong, c = the reverse; chi-square with
//     continuity correction and the exact binomial two-sided p); over the folds' OA differences the
//     Wilcoxon signed-rank test (zeros dropped, as scipy's zero_method "wilcox"; exact distribution when
//     n <= 50 without ties, else the normal approximation with tie correction, as scipy.stats.wilcoxon)
//     and the paired t-test (two-sided). Distributions from Boost.Math.
//   - outputs OUT.md, OUT.json and OUT.png (per-fold OA, one line per run), each through
//     core/outputs.hpp's check_output_file before anything is written (--force to replace).
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hsipipe::train {

struct CompareOptions {
  std::vector<std::string> runs;  ///< RUN arguments (a directory or DIR,DIR,...); the first is the reference
  std::string out;                ///< output prefix: OUT.md, OUT.json, OUT.png
  bool force = false;
  bool quiet = false;
};

struct McNemarResult {
  std::int64_t b = 0, c = 0;  ///< b: reference right, other wrong; c: reference wrong, other right
  double chi2 = 0, p_chi2 = 1, p_exact = 1;
};
McNemarResult mcnemar(std::int64_t b, std::int64_t c);

struct WilcoxonResult {
  int n = 0;                    ///< non-zero differences
  double w_plus = 0, w_minus = 0;
  double statistic = 0;         ///< min(w_plus, w_minus), scipy's statistic
  std::optional<double> p;      ///< two-sided; none when n == 0
  bool exact = false;
};
WilcoxonResult wilcoxon_signed_rank(const std::vector<double>& d);

struct TTestResult {
  int df = 0;
  std::optional<double> t, p;   ///< none when n < 2 or the differences have zero spread
};
TTestResult paired_t_test(const std::vector<double>& d);

/// Reads the runs, checks them, computes the table and writes OUT.md / OUT.json / OUT.png; returns the JSON.
nlohmann::json compare_runs(const CompareOptions& o, std::ostream& log);

}  // namespace hsipipe::train

// hsipipe report RUN_DIR: aggregates RUN_DIR/fold-*/metrics.json (written by separate Slurm array
// tasks, `hsipipe train --fold I`) into RUN_DIR/summary.json and summary.md. It calls the same
// train::summarize_run as `hsipipe train --fold all` does at its end, so both give identical
// summaries. Rank-local; refuses missing folds and folds of other caches / folds files.
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>

#include "cli/command.hpp"
#include "core/error.hpp"
#include "train/predict.hpp"
#include "train/results.hpp"

namespace hsipipe::cli {
namespace {

int run_report(int argc, char** argv) {
  po::options_description desc("Options");
  desc.add_options()("run-dir", po::value<std::string>()->required(), "RUN_DIR: the --out directory of hsipipe train (positional)")(
      "folds", po::value<std::string>()->default_value(""),
      "only these folds, e.g. 0,2 (default: all folds of the folds file, each required)")(
      "quiet,q", po::bool_switch(), "do not print the summary")(
      "allow-mixed", po::bool_switch(), "summarise folds trained with different settings, listing the differences (refused otherwise)");
  po::positional_options_description pos;
  pos.add("run-dir", 1);
  const Parsed p = parse(argc, argv, "report", "RUN_DIR [--folds 0,1,...]", desc, &pos);
  if (p.help) return 0;

  std::vector<int> folds;
  for (const auto& s : split_list(p.vm["folds"].as<std::string>())) {
    std::size_t used = 0;
    int k = -1;
    try {
      k = std::stoi(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != s.size() || k < 0) throw ConfigError("--folds: '" + s + "' is not a fold number");
    folds.push_back(k);
  }
  const std::string dir = p.vm["run-dir"].as<std::string>();
  train::check_fold_checkpoints(dir);
  const auto summary = train::summarize_run(dir, folds, p.vm["allow-mixed"].as<bool>());
  if (!p.vm["quiet"].as<bool>()) std::cout << train::summary_markdown(summary);
  std::cout << "report: wrote " << dir << "/summary.json and " << dir << "/summary.md ("
            << summary["folds_summarised"].get<int>() << " of " << summary["n_folds"].get<int>() << " folds)" << std::endl;
  return 0;
}

}  // namespace

HSIPIPE_COMMAND("report", "summarise the fold results of a training run (mean +- std of OA, AA, kappa)", run_report);

}  // namespace hsipipe::cli

// hsipipe compare: runs of different networks or recipes on the same cache and folds, side by side with paired
// tests (train/compare.hpp). No MPI. Exit codes as every command: 2 bad option, an output that exists without
// --force, runs with different fold sets; 3 a damaged fold file; 4 I/O; 5 runs on different caches or folds.
#include <iostream>

#include "cli/command.hpp"
#include "core/error.hpp"
#include "train/compare.hpp"

namespace hsipipe::cli {
namespace {

int run_compare(int argc, char** argv) {
  po::options_description desc("compare options");
  desc.add_options()
      ("runs", po::value<std::vector<std::string>>()->multitoken(),
       "RUN_A RUN_B ... (positional): run directories of hsipipe train; DIR1,DIR2 joins folds trained into separate "
       "--out directories (--fold I tasks) into one run. The first run is the reference of the paired tests")
      ("out", po::value<std::string>(), "output prefix: writes PREFIX.md, PREFIX.json and PREFIX.png")
      ("force", po::bool_switch(), "replace the outputs when they exist (never a file of a run or a cache)")
      ("quiet", po::bool_switch(), "do not print the table");
  po::positional_options_description pos;
  pos.add("runs", -1);
  const Parsed a = parse(argc, argv, "compare", "RUN_A RUN_B [RUN ...] --out PREFIX [--force]", desc, &pos);
  if (a.help) return 0;
  train::CompareOptions o;
  if (a.vm.count("runs")) o.runs = a.vm["runs"].as<std::vector<std::string>>();
  if (a.vm.count("out")) o.out = a.vm["out"].as<std::string>();
  o.force = a.vm["force"].as<bool>();
  o.quiet = a.vm["quiet"].as<bool>();
  train::compare_runs(o, std::cout);
  return 0;
}

}  // namespace

HSIPIPE_COMMAND("compare", "compare runs on the same cache and folds: OA/AA/kappa per fold, McNemar, Wilcoxon, paired t, a chart",
                run_compare);

}  // namespace hsipipe::cli

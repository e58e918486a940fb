// hsipipe export: one fold's final model as a file PyTorch loads (train/export.hpp). No MPI. Exit codes as
// every command: 2 bad option, a run without the fold's finished checkpoint or a wrong --fold; 3 a damaged
// checkpoint; 4 I/O; 5 a checkpoint of another cache.
#include <iostream>

#include "cli/command.hpp"
#include "core/error.hpp"
#include "train/export.hpp"

namespace hsipipe::cli {
namespace {

int run_export(int argc, char** argv) {
  train::ExportOptions d;
  po::options_description desc("export options");
  desc.add_options()
      ("run", po::value<std::string>(), "run directory of hsipipe train (its --out)")
      ("fold", po::value<int>(), "the fold whose final model is written")
      ("out", po::value<std::string>(), "file to write (model.pt): torch.load gives the state_dict, the input shape, "
                                        "label values, preprocessing and example logits")
      ("examples", po::value<int>()->default_value(d.examples), "random example inputs stored with hsipipe's logits for them")
      ("force", po::bool_switch(), "replace --out when it exists (never a file of a run or a cache)")
      ("quiet", po::bool_switch(), "no summary line");
  const Parsed a = parse(argc, argv, "export", "--run RUN_DIR --fold I --out model.pt [options]", desc);
  if (a.help) return 0;
  const auto& vm = a.vm;
  for (const char* req : {"run", "fold", "out"})
    if (!vm.count(req)) throw ConfigError(std::string("hsipipe export: --") + req + " is required");
  train::ExportOptions o;
  o.run = vm["run"].as<std::string>();
  o.fold = vm["fold"].as<int>();
  o.out = vm["out"].as<std::string>();
  o.examples = vm["examples"].as<int>();
  o.quiet = vm["quiet"].as<bool>();
  o.force = vm["force"].as<bool>();
  train::export_model(o, std::cout);
  return 0;
}

}  // namespace

HSIPIPE_COMMAND("export", "write one fold's final model as a file PyTorch loads (state_dict with documented layer names)", run_export);

}  // namespace hsipipe::cli

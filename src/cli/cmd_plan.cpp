// hsipipe plan: memory budget of one training step (parameters, gradients, optimizer state,
// activations per layer, workspace), cache sizes per layout, and which lever brings a budget within
// reach. Rank-local; builds the model on the CPU for a batch-1 shape trace, trains nothing unless
// --measure is given (then it runs real fp32 CPU steps and reports the peak RSS increase beside the estimate).
#include <cmath>
#include <iostream>

#include "cli/command.hpp"
#include "core/error.hpp"
#include "train/models.hpp"
#include "train/planner.hpp"

namespace hsipipe::cli {
namespace {

int run_plan(int argc, char** argv) {
  po::options_description desc("Options");
  desc.add_options()("model", po::value<std::string>()->required(), (train::model_names(", ", " or ") + ", or a TorchScript file").c_str())(
      "bands", po::value<int>()->required(), "spectral bands B of the input (after band removal / PCA)")(
      "patch", po::value<int>()->default_value(1), "patch side p (1: pixel spectra)")(
      "batch", po::value<int>()->required(), "global batch size")(
      "classes", po::value<int>()->default_value(16), "number of classes")(
      "precision", po::value<std::string>()->default_value("fp32"), "fp32 or bf16 (autocast-style, fp32 master weights)")(
      "optimizer", po::value<std::string>()->default_value("adam"), "adam, adamw or sgd")(
      "momentum", po::value<double>()->default_value(0.9), "sgd momentum (0: no momentum buffer)")(
      "ranks", po::value<int>()->default_value(1), "data-parallel ranks sharing the global batch")(
      "device", po::value<std::string>()->default_value("cuda"),
      "cuda (device memory: adds the CUDA runtime's fixed costs, M_runtime) or cpu")(
      "budget", po::value<std::string>()->default_value(""), "memory per rank, e.g. 24GiB, 80GB: say which lever fits")(
      "rows", po::value<std::uint64_t>()->default_value(0), "scene rows (for the cache sizes)")(
      "cols", po::value<std::uint64_t>()->default_value(0), "scene columns (for the cache sizes)")(
      "samples", po::value<std::uint64_t>()->default_value(0), "labeled samples (for the cache sizes)")(
      "prefetch", po::value<int>()->default_value(4), "train's --prefetch: the loader's ring slots (host memory per rank)")(
      "cache-dtype", po::value<std::string>()->default_value("float16"), "cache element type: float16 or float32")(
      "json", po::bool_switch(), "print the plan as JSON")(
      "measure", po::bool_switch(), "also run two real fp32 training steps on the CPU and report the peak RSS increase");
  const Parsed p = parse(argc, argv, "plan", "--model M --bands B --patch P --batch N [--precision fp32|bf16] [--budget 24GiB]", desc);
  if (p.help) return 0;

  train::PlanRequest r;
  r.model = p.vm["model"].as<std::string>();
  r.bands = p.vm["bands"].as<int>();
  r.patch = p.vm["patch"].as<int>();
  r.batch = p.vm["batch"].as<int>();
  r.classes = p.vm["classes"].as<int>();
  r.precision = p.vm["precision"].as<std::string>();
  r.optimizer = p.vm["optimizer"].as<std::string>();
  r.momentum = p.vm["momentum"].as<double>();
  r.ranks = p.vm["ranks"].as<int>();
  r.prefetch = p.vm["prefetch"].as<int>();
  r.device = p.vm["device"].as<std::string>();
  if (p.vm["measure"].as<bool>() && !p.vm["device"].defaulted() && r.device != "cpu")
    throw ConfigError("--measure runs CPU steps: it compares with the --device cpu estimate");
  if (p.vm["measure"].as<bool>()) r.device = "cpu";
  const std::string budget = p.vm["budget"].as<std::string>();
  if (!budget.empty()) r.budget = train::parse_bytes(budget, "--budget");
  r.rows = p.vm["rows"].as<std::uint64_t>();
  r.cols = p.vm["cols"].as<std::uint64_t>();
  r.samples = p.vm["samples"].as<std::uint64_t>();
  const std::string dt = p.vm["cache-dtype"].as<std::string>();
  if (dt != "float16" && dt != "float32") throw ConfigError("--cache-dtype: '" + dt + "' (expected float16 or float32)");
  r.cache_dtype_bytes = dt == "float16" ? 2 : 4;
  if ((r.rows || r.cols || r.samples) && !(r.rows && r.cols && r.samples))
    throw ConfigError("--rows, --cols and --samples: give all three for the cache sizes");

  const auto plan = train::make_plan(r);
  auto j = train::to_json(plan);
  std::string measured;
  if (p.vm["measure"].as<bool>()) {
    const auto m = train::measure_cpu_step(r);
    const double rel = plan.total ? (static_cast<double>(plan.total) - static_cast<double>(m.peak_rss_increase)) /
                                        static_cast<double>(m.peak_rss_increase ? m.peak_rss_increase : 1)
                                  : 0.0;
    j["measured"] = {{"peak_rss_increase_bytes", m.peak_rss_increase}, {"peak_reset", m.peak_reset},
                     {"estimate_over_measured", rel}};
    measured = "\nMeasured (2 fp32 CPU steps, peak RSS increase): " + train::format_bytes(m.peak_rss_increase) +
               " (estimate " + (rel >= 0 ? "+" : "") + std::to_string(static_cast<int>(std::lround(rel * 100))) + "%)" +
               (m.peak_reset ? "" : " [peak RSS could not be reset: upper bound]") + "\n";
  }
  if (p.vm["json"].as<bool>()) std::cout << j.dump(2) << std::endl;
  else std::cout << train::plan_text(plan) << measured;
  return 0;
}

}  // namespace

HSIPIPE_COMMAND("plan", "estimate the memory of a training step and which lever fits a budget", run_plan);

}  // namespace hsipipe::cli

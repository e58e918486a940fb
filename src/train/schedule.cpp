// train/schedule: learning rate per epoch and balanced class weights (see schedule.hpp).
#include "train/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.hpp"
#include "train/trainer.hpp"

namespace hsipipe::train {

void check_schedule_options(const TrainOptions& opt) {
  if (opt.schedule != "none" && opt.schedule != "step" && opt.schedule != "cosine")
    throw ConfigError("--schedule: unknown '" + opt.schedule + "' (expected none, step or cosine)");
  if (opt.warmup_epochs < 0) throw ConfigError("--warmup-epochs must be >= 0");
  if (opt.schedule_epochs < 0) throw ConfigError("--schedule-epochs must be >= 0 (0: --epochs)");
  const int horizon = opt.schedule_epochs > 0 ? opt.schedule_epochs : opt.epochs;
  if (opt.schedule != "none" && opt.warmup_epochs >= horizon)
    throw ConfigError("--warmup-epochs " + std::to_string(opt.warmup_epochs) + ": the warm-up must end before the schedule's horizon of " +
                      std::to_string(horizon) + " epochs (--schedule-epochs, default --epochs)");
  if (opt.schedule == "none" && opt.schedule_epochs > 0)
    throw ConfigError("--schedule-epochs: only with --schedule step or cosine");
}

double scheduled_lr(const std::string& schedule, double base_lr, int warmup_epochs, int horizon, int epoch) {
  if (epoch < warmup_epochs) return base_lr * static_cast<double>(epoch + 1) / static_cast<double>(warmup_epochs);
  if (schedule == "none") return base_lr;
  const double span = static_cast<double>(std::max(1, horizon - warmup_epochs));
  if (schedule == "step") {
    const double m1 = std::round(warmup_epochs + span / 2), m2 = std::round(warmup_epochs + 3 * span / 4);
    return base_lr * std::pow(0.1, (epoch >= m1 ? 1 : 0) + (epoch >= m2 ? 1 : 0));
  }
  const double t = static_cast<double>(std::min(epoch, horizon - 1) - warmup_epochs) / span;  // cosine
  return base_lr * 0.5 * (1.0 + std::cos(M_PI * t));
}

std::vector<double> balanced_class_weights(const std::vector<std::uint64_t>& counts) {
  const double n = static_cast<double>(std::accumulate(counts.begin(), counts.end(), std::uint64_t{0}));
  const double c = static_cast<double>(counts.size());
  std::vector<double> w(counts.size(), 0.0);
  for (std::size_t i = 0; i < counts.size(); ++i)
    if (counts[i]) w[i] = n / (c * static_cast<double>(counts[i]));
  return w;
}

}  // namespace hsipipe::train

#pragma once
// train/schedule: the training recipe's pure pieces, the same on every rank: the learning rate of each
// epoch and the balanced class weights. Rank-local; no libtorch state.
//
// Learning rate of epoch e (0-based) for base rate L, warm-up W epochs and horizon H (schedule_epochs):
//   e < W            L * (e + 1) / W                     (linear warm-up, every schedule)
//   none             L
//   step             L * 0.1^k, k = the milestones e has reached: round(W + (H - W) / 2) and
//                    round(W + 3 (H - W) / 4)
//   cosine           L * (1 + cos(pi * t)) / 2, t = (min(e, H - 1) - W) / (H - W)
// Past the horizon (a run extended with --resume --epochs N) the rate stays where the schedule ended.
// Balanced class weights (scikit-learn's "balanced"): w_c = n / (C * n_c) over the fold's training samples
// of all ranks (n of them, n_c of class c, C classes); a class without training samples gets 0.
#include <cstdint>
#include <string>
#include <vector>

namespace hsipipe::train {

struct TrainOptions;

/// ConfigError naming --schedule, --warmup-epochs or --schedule-epochs for values that cannot work.
void check_schedule_options(const TrainOptions& opt);

/// The learning rate of epoch `epoch` (see above). `horizon` is the resolved schedule_epochs.
double scheduled_lr(const std::string& schedule, double base_lr, int warmup_epochs, int horizon, int epoch);

/// Balanced weights from the global per-class training counts (see above).
std::vector<double> balanced_class_weights(const std::vector<std::uint64_t>& counts);

}  // namespace hsipipe::train

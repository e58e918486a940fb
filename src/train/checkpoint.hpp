#pragma once
// train/checkpoint: one file per fold, RUN_DIR/fold-I/checkpoint.pt (a torch archive):
//   "meta"       JSON text: fold, epoch (the epoch in progress or next), step (next step of that
//                epoch), finished, world_size, config (options that must match on resume), provenance
//                (the cache's data_checksum, the folds file's fingerprint and k: --resume refuses any
//                other), weights_xxh3 (XXH3-64 of the model's parameters and buffers as saved, checked on
//                load), and the trainer's partial-epoch accumulators and epoch history, so a resumed
//                epoch reports the same numbers as an uninterrupted one.
//   "model"      parameters and buffers (Module::save), identical on every rank.
//   "optimizer"  optimizer state (Optimizer::save).
//   "rng/<r>"    torch's CPU generator state of rank r (dropout masks), uint8.
// Written by rank 0 only: serialised in memory first (libtorch's file writer aborts the process when
// the disk fills), then PATH.tmp-<pid>, fsync, rename; any failure is an IoError naming the file and
// leaves no temporary file. Read by every rank.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

namespace hsipipe::train {

struct CheckpointState {
  int fold = 0;
  int epoch = 0;
  std::int64_t step = 0;
  bool finished = false;
  int world_size = 1;
  nlohmann::json config = nlohmann::json::object();
  nlohmann::json provenance = nlohmann::json::object();  ///< data_checksum, folds_fingerprint, n_folds
  nlohmann::json progress = nlohmann::json::object();  ///< trainer-defined (accumulators, history)
};

/// Rank-local (call on one rank). `rng_states[r]` is rank r's generator state.
void save_checkpoint(const std::string& path, const CheckpointState& st, torch::nn::Module& model,
                     torch::optim::Optimizer& opt, const std::vector<torch::Tensor>& rng_states);

/// Rank-local. Loads into `model` and `opt` (which must have the same structure) and returns the
/// state; fills rng_states (one per rank of the writing run). Throws FormatError naming the file, also
/// when the loaded weights do not match the checksum they were saved with.
/// XXH3-64 of a module's parameters and buffers (float bytes, registration order), as 16 hex digits.
std::string weights_checksum(torch::nn::Module& model);
CheckpointState load_checkpoint(const std::string& path, torch::nn::Module& model, torch::optim::Optimizer& opt,
                                std::vector<torch::Tensor>& rng_states);

/// Rank-local. Loads only the weights into `model` (same structure), for inference (hsipipe predict), and
/// returns the state. Throws FormatError naming the file when it does not fit the model, when the weights
/// do not match their checksum, or when the checkpoint is not a finished fold's (`finished` false).
CheckpointState load_final_weights(const std::string& path, torch::nn::Module& model);

/// Only the "meta" entry (cheap: no tensors are applied). Throws FormatError naming the file.
CheckpointState peek_checkpoint(const std::string& path);

/// torch's default CPU generator state, and setting it back.
torch::Tensor cpu_rng_state();
void set_cpu_rng_state(const torch::Tensor& state);

}  // namespace hsipipe::train

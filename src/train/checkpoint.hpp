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
#include <optional>
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

/// The identity every checkpoint of one run shares (issue 43 item 2): its training options but `epochs` (which
/// `--resume --epochs N` may extend fold by fold) and its provenance (data_checksum, folds_fingerprint, n_folds).
/// The provenance's manifest_xxh3 (the cache manifest's seal) is recorded, not compared: a cache decoded again
/// from the same sources has the same data_checksum and statistics but another seal (its creation time).
/// RUN/preprocessing.json keeps the identity as "run"; every reader of a checkpoint (resume, predict, export,
/// report) compares the checkpoint's against it.
nlohmann::json run_identity(const nlohmann::json& config, const nlohmann::json& provenance);

/// The first field where two identities differ ("config.seed", "data_checksum", ...), with both values (null:
/// not recorded).
struct IdentityDiff {
  std::string field;
  nlohmann::json have, want;
};
std::optional<IdentityDiff> identity_difference(const nlohmann::json& have, const nlohmann::json& want);

/// Throws naming PATH and the first field where the identity `have` (of the checkpoint at PATH) differs from
/// `want` (of `want_source`, e.g. "the run's preprocessing.json"): StaleError for data_checksum (another
/// cache), FormatError ("meta.config.seed") for the others.
void check_identity(const std::string& path, const nlohmann::json& have, const nlohmann::json& want, const std::string& want_source);

/// Throws FormatError when the checkpoint at PATH is not fold `fold`'s (meta.fold): a checkpoint copied from
/// another fold's folder.
void check_fold(const std::string& path, const CheckpointState& st, int fold);

/// torch's default CPU generator state, and setting it back.
torch::Tensor cpu_rng_state();
void set_cpu_rng_state(const torch::Tensor& state);

}  // namespace hsipipe::train

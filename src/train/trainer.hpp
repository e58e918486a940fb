#pragma once
// train/trainer: `hsipipe train`, data-parallel training of one model over the k folds of a cache.
//
// COLLECTIVE: train() must be called by every rank of `world` with the same options. Each rank
// loads ONLY its contiguous shard of the cache (split_range over n_samples, the rule decode used),
// once for all folds; filters each fold's global train/validation ids to its range; trains with
// gradients summed over ranks after every step (train/step.hpp: one step == single-process training
// on the same global batch); and all-gathers (sample id, predicted class, scores) of its validation
// samples, so the metrics cover exactly the fold's validation set (checked at run time, each sample
// once). Rank 0 writes the results (train/results.hpp), RUN_DIR/fold-I/epochs.jsonl (one JSON
// record per epoch) and one log line per epoch.
//
// Batches come from a BatchSource: on CPU the loader ring (train/loader.hpp: float16 -> float32, patch
// cutting, flips/rotations in producer threads); on a GPU the shard copied to the device once
// (train/resident.hpp: each batch one gather whose offsets carry the flips/rotations, so the host never
// waits for the device within an epoch). Steps are timed by a PhaseClock (train/cuda_streams.hpp): host
// intervals on CPU, CUDA events read once per epoch on a GPU. The shard hashes the data checksum's items it
// owns as it loads them; the ranks' hashes together must give the manifest's data_checksum or every rank
// stops before training. --fold all reuses the loaded shard for all k folds.
//
// Everything that can be refused is checked before any training, identically on every rank: the
// model against the cache layout/patch/bands (check_model_fits), the folds file against the cache
// (sample count and sample table; StaleError naming both files), option values (ConfigError).
// A rank-local failure during set-up (a file one rank cannot read) becomes an error on every rank
// instead of a deadlock (dist::collective_step), with the failing rank's exit code on every rank.
//
// Preemption: SIGTERM or SIGUSR1 sets core/signals' flag (installed by main for `train` before anything
// else, and by train() itself, never restored); between steps the ranks agree on it (one allreduce:
// the largest signal number any rank got), write a checkpoint at the current step and train() returns kExitPreempted after
// rank 0 printed "checkpoint written, exiting for requeue". --resume continues from
// RUN_DIR/fold-I/checkpoint.pt (same rank count, same cache data_checksum, folds fingerprint and options;
// a checkpoint past --epochs is refused); folds whose results exist are skipped. Without --resume, a fold
// directory that holds an earlier run's files is refused unless --force (which removes it first).
// A fold's files are written scores.npy, checkpoint (finished), then metrics.json last: metrics.json
// marks a complete fold.
#include <cstdint>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "dist/mpi.hpp"

namespace hsipipe::train {

/// Exit code of a run stopped by SIGTERM/SIGUSR1 after writing its checkpoint (EX_TEMPFAIL): the
/// Slurm script requeues on it. Distinct from every hsipipe::Error exit code.
inline constexpr int kExitPreempted = 75;

struct TrainOptions {
  std::string cache, folds, out;
  std::string model;               ///< a registry name (train/models.hpp) or a TorchScript file (train/models/torchscript.hpp)
  std::string fold = "all";        ///< "all" or a fold index
  int epochs = 20;
  std::int64_t batch = 64;         ///< global batch (split over ranks in proportion to their training samples)
  double lr = 1e-3;
  std::string optimizer = "adam";  ///< adam | adamw (decoupled weight decay) | sgd (momentum 0.9)
  double weight_decay = 0.0;
  /// The learning rate per epoch (train/schedule.hpp): none | step | cosine, after a linear warm-up of
  /// warmup_epochs; the decay runs over schedule_epochs (0: --epochs), its own horizon that --resume compares,
  /// so that `--resume --epochs N` extends a run without changing its schedule.
  std::string schedule = "none";
  int warmup_epochs = 0;
  int schedule_epochs = 0;
  std::string class_weights = "none";  ///< none | balanced (inverse class frequency of the fold's training samples)
  double label_smoothing = 0.0;        ///< cross-entropy label smoothing in [0, 1)
  /// Set by train() when `model` names a TorchScript file: its SHA-256 (the run identity holds it, not the path).
  std::string model_sha256;
  std::uint64_t seed = 42;
  std::string device = "auto";     ///< auto | cpu | cuda
  std::string backend = "auto";    ///< auto | nccl | mpi
  int threads = 1;                 ///< loader producer threads per rank
  int prefetch = 4;                ///< loader ring depth
  /// Host memory per rank in MiB (-1: the node's available memory / its ranks) and the shard limit in MiB
  /// (-1: what the budget leaves after the ring, the streaming window and the model; train/host_memory.hpp).
  /// A larger shard is streamed from the cache file: same results, so neither is part of the identity.
  std::int64_t host_memory_mb = -1;
  std::int64_t shard_memory_mb = -1;
  std::string loader = "auto";     ///< auto | ring | resident (train/loader.hpp, train/resident.hpp)
  std::string augment = "none";    ///< flip,rot90 | flip | rot90 | none
  bool deterministic = false;
  int checkpoint_every = 0;        ///< epochs; 0 = only on SIGTERM/SIGUSR1
  bool resume = false;
  bool force = false;              ///< replace the results of an earlier run in the folds trained here
  std::string precision = "fp32";  ///< fp32 | bf16
  bool log_epochs = true;          ///< one log line per epoch on rank 0

  /// The options that define the training (written into results and checkpoints); excludes
  /// fold, out and resume so that `--fold I` tasks and `--fold all` produce the same run identity.
  nlohmann::json identity() const;
};

/// COLLECTIVE. Returns 0, or kExitPreempted after a signal. Throws hsipipe::Error subclasses.
int train(const TrainOptions& opt, const dist::Comm& world, std::ostream& log);

}  // namespace hsipipe::train

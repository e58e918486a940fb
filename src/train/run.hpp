#pragma once
// train/run: the pieces of train() (trainer.cpp: the job's set-up, the shard, the summary; fold.cpp:
// one fold's model, epochs, validation and record). Internal to src/train.
//
// The one loop, for every device:
//   Job            set up once per job on every rank: options checked, cache + folds opened and matched,
//                  the rank's shard loaded, its batch source (host ring or device-resident), the
//                  gradient communicator, the run's identity.
//   FoldRun        one fold: resume decision, ids of this rank, model + optimiser (+ checkpoint), then
//                  for each epoch: train_epoch (the steps, timed by a PhaseClock: CUDA events on a GPU,
//                  the host clock on CPU), validate (all-gathered), record (epochs.jsonl, log line),
//                  and at the end the fold's results and its "finished" checkpoint.
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "cache/cache.hpp"
#include "cache/publish.hpp"
#include "core/fs.hpp"
#include "core/error.hpp"
#include "core/range.hpp"
#include "dist/comm.hpp"
#include "dist/mpi.hpp"
#include "folds/folds.hpp"
#include "train/checkpoint.hpp"
#include "train/cuda_streams.hpp"
#include "train/host_memory.hpp"
#include "train/loader.hpp"
#include "train/metrics.hpp"
#include "train/models.hpp"
#include "train/results.hpp"
#include "train/step.hpp"
#include "train/trainer.hpp"

namespace hsipipe::train::detail {

double now_s();
std::string fold_dir(const std::string& out, int f);
/// --device auto | cpu | cuda for this process: cuda picks the GPU of its local rank. ConfigError naming
/// --device for another value, or for cuda where libtorch sees none.
torch::Device choose_device(const std::string& device, const dist::Comm& local);

/// Runs fn. A failure on this rank alone while the other ranks may wait in a collective of the step it
/// will not reach ends the whole job, message first, instead of leaving them hanging. On one rank the
/// error propagates as usual.
template <class F>
void abort_on_local_error(const dist::Comm& world, F&& fn);

/// Seconds of one epoch (or of the part of it before a preemption), by phase.
struct Timing {
  double data = 0, compute = 0, comm = 0, idle = 0, eval = 0, checkpoint = 0;
  double train() const noexcept { return data + compute + comm + idle; }
  void add_steps(const PhaseTimes& p) noexcept {
    data += p.data;
    compute += p.compute;
    comm += p.comm;
    idle += p.idle;
  }
  nlohmann::json to_json(double total) const;
  static Timing from_json(const nlohmann::json& j);
};

/// Rank 0: RUN when this job made it (removed again when the job leaves it empty: a refused train leaves no
/// folder) and the locks of the folds it trains (RUN/fold-I.lock, released first).
struct RunLock {
  fs::MadeDirs made;
  std::vector<std::unique_ptr<cache::LockFile>> locks;
};

struct Job {
  Job(const TrainOptions& o, const dist::Comm& w, std::ostream& l)
      : opt(o), world(w), log(l), rank(w.rank()), R(w.size()), root(rank == 0) {}
  TrainOptions opt;  ///< the options, with what set_up resolves (model_sha256, schedule_epochs)
  const dist::Comm& world;
  const dist::Comm* local = nullptr;  ///< the ranks of this node
  std::ostream& log;
  int rank, R;
  bool root;
  double t0 = 0;  ///< train() entry

  std::optional<cache::CacheReader> cache;
  folds::Folds folds;
  cache::SampleTable table;
  const ModelInfo* info = nullptr;
  std::vector<int> fold_list;
  torch::Device device = torch::kCPU;
  Precision precision = Precision::fp32;
  Augment augment;
  int patch = 1, bands = 0;
  ClassIndex classes;
  dist::Backend backend = dist::Backend::mpi;

  Range range;
  std::optional<cache::Shard> shard;
  std::vector<std::int64_t> class_of;  ///< class index of each shard sample, -1 if unlabeled
  std::unique_ptr<BatchSource> batches;
  std::unique_ptr<dist::Communicator> comm;
  std::unique_ptr<PhaseClock> clock;
  RunInfo run;
  nlohmann::json provenance;  ///< what a checkpoint must have been trained on: cache checksum, folds fingerprint, k
  nlohmann::json io;
  /// Rank 0: what `hsipipe predict` needs to transform a scene as this cache was decoded, without the cache
  /// (RUN_DIR/preprocessing.json, see write_preprocessing).
  nlohmann::json preprocessing;
  RunLock run_lock;
  std::vector<std::uint64_t> bytes_per_rank;
  HostMemory host;  ///< this rank's host memory split, decided before the shard is loaded

  int classes_n() const noexcept { return classes.size(); }
};

/// COLLECTIVE. Everything that can be refused, checked identically on every rank (trainer.cpp).
void set_up(Job& job);
/// COLLECTIVE. The shard, the batch source, the communicator (trainer.cpp).
void load_inputs(Job& job);
/// Rank 0, when a fold starts: RUN_DIR/preprocessing.json, {"format": "hsipipe-preprocessing", "version": 1,
/// "manifest": the cache's manifest, "wavelengths": the kept bands' wavelengths}: the run then maps scenes
/// (`hsipipe predict`) on a node without its cache. Written atomically, and only when it differs.
void write_preprocessing(const Job& job);

struct Validation {
  std::vector<std::uint64_t> ids;  ///< sorted, the fold's validation set
  std::vector<int> pred;           ///< class index, aligned with ids
  std::vector<float> scores;       ///< [ids.size(), C] softmax, aligned with ids
  Metrics metrics;
};

/// One fold on every rank (fold.cpp). run() returns 0, or kExitPreempted after a signal.
class FoldRun {
 public:
  FoldRun(Job& job, int fold);
  int run(nlohmann::json& fold_wall);

 private:
  struct EpochSums {
    double loss = 0, correct = 0, count = 0;
  };
  bool resume_decision();  ///< true: results exist, skip
  void check_resumable(const CheckpointState& st) const;
  void split_ids();
  void build_model();
  void load_resume_state();
  void set_loss_options();
  double set_epoch_lr(int epoch);
  void save(int epoch, std::int64_t step, bool finished, const EpochSums& part, const Timing& t);
  bool train_epoch(int epoch, EpochSums& sums, Timing& t);  ///< false: preempted (checkpoint written)
  Validation validate();
  nlohmann::json epoch_record(int epoch, const EpochSums& sums, const Timing& t, double total);
  void log_epoch(int epoch, const nlohmann::json& rec, const Timing& t, double total);
  void check_replicas(int epoch);
  void write_scores();
  void write_results();

  Job& job_;
  const int f_;
  const std::string fdir_, ckpt_path_;
  std::optional<CheckpointState> resume_state_;
  std::vector<std::uint64_t> train_ids_, val_ids_, val_all_;
  std::uint64_t n_train_ = 0;
  std::int64_t G_ = 0, steps_ = 0, my_b_ = 0;
  std::shared_ptr<Model> model_;
  std::unique_ptr<torch::optim::Optimizer> optim_;
  std::unique_ptr<GradSync> sync_;
  std::unique_ptr<BufferSync> buffer_sync_;  ///< BatchNorm statistics alike on every rank (step.hpp)
  LossOptions loss_;
  double epoch_lr_ = 0;  ///< the learning rate of the epoch being trained (epochs.jsonl "lr")  ///< class weights (--class-weights) and label smoothing of this fold
  int start_epoch_ = 0;
  std::int64_t start_step_ = 0;
  nlohmann::json history_ = nlohmann::json::array();
  EpochSums part_;  ///< global partial sums of a resumed epoch (rank 0)
  Timing part_time_;
  Validation last_val_;
  double train_s_ = 0;
  std::uint64_t last_hash_ = 0;
};

// ---------------------------------------------------------------------------------------------
template <class F>
void abort_on_local_error(const dist::Comm& world, F&& fn) {
  if (world.size() == 1) return fn();
  int code = 1;
  std::string what;
  try {
    return fn();
  } catch (const Error& e) {
    code = e.exit_code();
    what = e.what();
  } catch (const std::exception& e) {
    what = e.what();
  }
  print_error_line("hsipipe train: rank " + std::to_string(world.rank()) + ": error: " + what +
                   "\n(ending every rank: the others wait in a collective this rank cannot join)");
  world.abort_job(code);
}

}  // namespace hsipipe::train::detail

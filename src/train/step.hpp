#pragma once
// train/step: the pieces of one data-parallel training step, separated so tests can check them
// against single-process training.
//
// The rule that makes R ranks equal one process: the global batch of G samples is split over ranks
// (rank r contributes b_r, sum b_r = G); each rank computes the SUM of its per-sample losses divided
// by G, so after backward its gradient is (b_r / G) * (mean gradient of its b_r samples); GradSync
// sums these over ranks, which gives exactly the mean gradient over the G samples (up to float
// summation order). Every rank then applies the same optimizer step to the same parameters.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "dist/comm.hpp"
#include "train/cuda_streams.hpp"
#include "train/models.hpp"

namespace hsipipe::train {

/// Largest-remainder split of `global` samples over ranks in proportion to `counts` (each rank's
/// training samples): sum of the result == min(global, sum counts); a rank with count 0 gets 0.
/// Pure; every rank computes the same from the same all-gathered counts.
std::vector<std::int64_t> split_batch(std::int64_t global, const std::vector<std::uint64_t>& counts);

/// Rank-local plan of one epoch: `steps` batches of `local_batch` ids drawn from `local_ids` in a
/// shuffled order; when the list runs out it is reshuffled and drawing continues (a rank whose shard
/// is short keeps contributing its share). Shuffles come from SplitMix64 seeded by
/// derive_seed(seed, fold, epoch) and the rank, so the plan is a pure function of its arguments.
std::vector<std::vector<std::uint64_t>> epoch_plan(const std::vector<std::uint64_t>& local_ids, std::int64_t local_batch,
                                                   std::int64_t steps, std::uint64_t seed, int fold, int epoch, int rank);

/// Sums the gradients of `params` over all ranks in flat buckets of at most `bucket_bytes` (one
/// allreduce per bucket). Works on CPU or CUDA tensors; when the communicator wants host memory and
/// the parameters live on CUDA the bucket is staged through host memory. COLLECTIVE (allreduce()).
class GradSync {
 public:
  GradSync(std::vector<torch::Tensor> params, dist::Communicator& comm, std::size_t bucket_bytes = 4u << 20);
  /// COLLECTIVE. Undefined gradients count as zeros (a rank with an empty batch) and are defined after.
  /// On one rank the gradients are already the sums: nothing is copied.
  void allreduce();
  std::size_t buckets() const noexcept { return buckets_.size(); }

 private:
  struct Bucket {
    std::vector<std::size_t> params;
    torch::Tensor flat;  ///< on the parameters' device
    torch::Tensor host;  ///< staging when needed
  };
  std::vector<torch::Tensor> params_;
  dist::Communicator& comm_;
  std::vector<Bucket> buckets_;
};

/// Keeps a model's buffers (BatchNorm's running mean and variance, its batch counter) the same on every rank:
/// each rank's forward updates them from its local batch (as PyTorch DDP without SyncBatchNorm), and average()
/// then replaces them by their mean over the ranks (integer buffers: the mean rounded down), in one allreduce
/// of float64 values. So the checkpoint rank 0 writes holds every rank's buffers, validation on any rank uses
/// the same statistics, and a resumed run continues exactly. A model without buffers costs nothing.
/// COLLECTIVE (average()).
class BufferSync {
 public:
  BufferSync(std::vector<torch::Tensor> buffers, dist::Communicator& comm);
  void average();
  bool empty() const noexcept { return buffers_.empty(); }

 private:
  std::vector<torch::Tensor> buffers_;
  dist::Communicator& comm_;
  torch::Tensor flat_;  ///< float64, on the buffers' device, or on the host when the communicator wants it
};

enum class Precision { fp32, bf16 };
Precision precision_from_name(const std::string& s);  ///< throws ConfigError naming --precision
std::string precision_name(Precision p);

/// RAII: bf16 autocast on `device` for the scope (forward passes), restoring the previous state.
/// fp32 master weights stay fp32: autocast only casts the inputs of matmul/conv ops. No-op for fp32.
class AutocastScope {
 public:
  AutocastScope(Precision p, torch::Device device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;
  bool cuda_ = false;
  bool prev_enabled_ = false;
  c10::ScalarType prev_dtype_{};
};

struct StepResult {
  torch::Tensor loss_sum;  ///< sum of per-sample losses of the local batch (0-dim, on device, detached)
  torch::Tensor correct;   ///< number of correct local predictions (0-dim int64, on device)
  double compute_s = 0, comm_s = 0;
};

/// The loss's recipe: per-class weights (float32 [C] on the parameters' device; undefined: all 1) and label
/// smoothing. The loss stays a sum over the batch divided by the global batch, so R ranks still equal one
/// process: sum_i w_{y_i} l_i / G (PyTorch's weighted "mean" would divide by sum_i w_{y_i} instead).
struct LossOptions {
  torch::Tensor class_weights;
  double label_smoothing = 0.0;
};

/// One step: zero grads, forward (autocast if bf16), loss = sum CE / global_batch, backward,
/// GradSync::allreduce (COLLECTIVE), optimizer step. x/y may hold zero samples (the rank then
/// contributes zero gradients but still takes part in the reduction). With a `clock`, the step marks
/// its phases there (compute, comm, compute) and compute_s/comm_s stay 0; without one they are host
/// intervals. Nothing here waits for the device.
StepResult train_step(Model& model, torch::optim::Optimizer& opt, GradSync& sync, const torch::Tensor& x,
                      const torch::Tensor& y, std::int64_t global_batch, Precision precision, PhaseClock* clock = nullptr,
                      const LossOptions* loss = nullptr);

}  // namespace hsipipe::train

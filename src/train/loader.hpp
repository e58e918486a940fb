#pragma once
// train/loader: a bounded ring of prepared batches. Producer threads gather samples from the rank's
// shard (float16 -> float32, patch cut for cube caches: Shard::gather), apply augmentations and put
// the batch into one of `prefetch` pre-allocated slots; the training loop drains the slots in plan
// order. A producer only claims batch i once batch i - prefetch has been handed back, so memory is
// bounded (prefetch slots, allocated once) and a slow consumer stalls the producers (backpressure).
// On CUDA the slots are pinned host memory; next() copies its batch into a device slot on a side stream
// and makes the current stream wait for that copy's event, and a producer refills a host slot only
// after its copy's event completed: no device-wide synchronisation, so the host queues steps ahead.
//
// Everything here is rank-local; producer threads never call MPI or torch autograd (they write into
// preallocated host memory only). One consumer thread calls start()/next()/stop().
// Augmentation is a pure function of (aug_seed, batch index, position in batch), so the same plan
// and seed give the same batches whatever the number of threads or their scheduling.
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include "cache/cache.hpp"

namespace hsipipe::train {

struct Augment {
  bool flip = false;   ///< random horizontal and vertical flips of the patch
  bool rot90 = false;  ///< random rotation by 0, 90, 180 or 270 degrees
  bool any() const noexcept { return flip || rot90; }
};
/// "flip,rot90", "flip", "" or "none"; throws ConfigError naming --augment.
Augment parse_augment(const std::string& s);

/// The augmentation of sample k of batch `batch`: bit 0 horizontal flip, bit 1 vertical flip, bits 2-3
/// quarter turns (counter-clockwise, as np.rot90), applied in that order. A pure function of its
/// arguments (SplitMix64 of derive_seed(aug_seed, batch, k)): every batch source gives the same.
int augment_code(const Augment& a, std::uint64_t aug_seed, std::size_t batch, std::size_t k);
/// For each of the 16 codes, where each output position of a p x p plane comes from: out[i*p + j] =
/// in[table[code * p*p + i*p + j]]. Derived from the transform the host ring applies, so a gather
/// through it gives the ring's values exactly.
std::vector<std::int64_t> augment_source_table(int p);

/// Bounds of --threads and --prefetch (train refuses others before any work; more helps no node: a ring of
/// 1024 prepared batches is seconds of training, 256 producers outnumber any node's cores).
inline constexpr int kMaxLoaderThreads = 256;
inline constexpr int kMaxPrefetch = 1024;

struct LoaderOptions {
  int threads = 1;      ///< producer threads (1 .. kMaxLoaderThreads)
  int prefetch = 4;     ///< ring slots (1 .. kMaxPrefetch)
  Augment augment;
  torch::Device device = torch::kCPU;  ///< CUDA: pinned slots + non_blocking copies
};

struct Batch {
  torch::Tensor x;      ///< [n, B] or [n, B, p, p] float32 on the loader's device
  torch::Tensor y;      ///< [n] int64 class indices on the loader's device
  std::size_t index = 0;  ///< position in the plan
  std::size_t size = 0;   ///< n
};

/// Where a training loop takes its batches from: the host ring below (BatchLoader) or batches cut
/// on the device from a device-resident copy of the shard (train/resident.hpp). Both deliver the
/// same values for the same plan and seed.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  /// Starts delivering `plan` (each entry: the global ids of one batch, inside the shard), from batch
  /// `first` on. Cancels what is left of a previous plan. `augment` false disables augmentation
  /// (validation).
  virtual void start(std::vector<std::vector<std::uint64_t>> plan, std::uint64_t aug_seed, bool augment,
                     std::size_t first = 0) = 0;
  /// The next batch of the plan, or nullopt after the last. The tensors stay valid until the next
  /// call of next(), start() or stop(); work on them is ordered after their preparation on the
  /// device's current stream (no host synchronisation).
  virtual std::optional<Batch> next() = 0;
  /// Cancels the current plan.
  virtual void stop() = 0;
  /// "ring" or "resident", for logs and records.
  virtual const char* kind() const noexcept = 0;
};

class DeviceStaging;  // train/cuda_streams.hpp

class BatchLoader final : public BatchSource {
 public:
  /// `class_of`: class index of every sample of the shard's range (index id - range.begin), -1 if
  /// unlabeled (such samples must not be in a plan). The shard must outlive the loader.
  BatchLoader(const cache::Shard& shard, std::vector<std::int64_t> class_of, LoaderOptions opt);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  void start(std::vector<std::vector<std::uint64_t>> plan, std::uint64_t aug_seed, bool augment,
             std::size_t first = 0) override;
  /// Blocks while the batch is prepared. On CPU the tensors view a ring slot; on CUDA they are the
  /// slot's device copy, made on a side stream that the current stream waits for (one event per slot).
  std::optional<Batch> next() override;
  /// Cancels the current plan and waits for in-flight producers.
  void stop() override;
  const char* kind() const noexcept override { return "ring"; }

  const LoaderOptions& options() const noexcept { return opt_; }

 private:
  void worker();
  void fill(std::size_t batch, std::size_t slot);
  void release_current();
  void cancel_locked(std::unique_lock<std::mutex>& lk);

  const cache::Shard& shard_;
  std::vector<std::int64_t> class_of_;
  LoaderOptions opt_;
  std::size_t sample_floats_ = 0;
  int patch_ = 1, bands_ = 0;

  std::mutex mu_;
  std::condition_variable cv_work_, cv_ready_, cv_idle_;
  std::vector<std::vector<std::uint64_t>> plan_;
  std::uint64_t aug_seed_ = 0;
  bool augment_ = false;
  std::size_t next_claim_ = 0;    ///< next batch a producer may claim
  std::size_t consumed_ = 0;      ///< batches handed back by the consumer (all below are free)
  std::size_t next_deliver_ = 0;  ///< next batch next() returns
  bool holding_ = false;          ///< the consumer holds batch next_deliver_ - 1
  int in_flight_ = 0;
  std::string error_;             ///< first producer exception, rethrown by next()
  bool stop_threads_ = false;

  struct Slot {
    torch::Tensor x, y;           ///< host (pinned on CUDA), capacity rows
    std::size_t capacity = 0;
    std::size_t ready = SIZE_MAX; ///< batch index held when filled
    std::size_t size = 0;
  };
  std::vector<Slot> slots_;
  std::unique_ptr<DeviceStaging> staging_;  ///< CUDA: side stream, device slots, per-slot events
  std::vector<std::thread> threads_;
  void start_threads();
};

}  // namespace hsipipe::train

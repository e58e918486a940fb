#pragma once
// train/resident: batches cut on the device from a device-resident copy of the rank's shard, with no
// host work per step beyond queuing a few tensor operations.
//
// At construction the shard's stored values (float16 or float32, as in the cache) go to the device
// once: pixel and patch layouts as [n, B * sp * sp]; the cube layout as each scene's held rows padded
// by p/2 on every side by the manifest's border rule (numpy 'reflect', or 0), NaN set to 0, all scenes'
// pixels in one [pixels, B] table. start() sends the epoch's plan (local sample indices and one
// augmentation code per sample, train/loader.hpp's augment_code) to the device in one copy. next()
// then queues, on the current stream:
//   pixel   x = rows[ids]                                        -> float32 [n, B]
//   patch   x = rows[ids] cropped to p x p, positions permuted by the augmentation table
//   cube    idx[n, p*p] = base[ids] + src_row[code] * width[ids] + src_col[code]; x = table[idx]
//           (one gather: the p x p window and its flips/rotation at once) -> [n, p, p, B] -> [n, B, p, p]
// and converts to float32 [n, B, p, p] in the same copy. The values are BatchLoader's exactly (same
// widening, border, NaN rule and augmentation), which tests/train/test_loader.cpp checks on CPU, where
// this class runs the same code on CPU tensors.
//
// Device memory: the shard's stored bytes (cube: plus the halo's), the plan (16 bytes a sample), and
// one batch. Rank-local; one thread.
#include <cstdint>
#include <optional>
#include <vector>

#include <torch/torch.h>

#include "cache/cache.hpp"
#include "train/loader.hpp"

namespace hsipipe::train {

/// Bytes a ResidentBatches of this shard keeps on its device (the stored values, padded for cube).
std::uint64_t resident_bytes(const cache::Shard& shard);

class ResidentBatches final : public BatchSource {
 public:
  /// `class_of` as for BatchLoader. The shard may be dropped after construction on a CUDA device (the
  /// values are copied); on CPU the pixel and patch layouts view its memory, so it must outlive this.
  ResidentBatches(const cache::Shard& shard, const std::vector<std::int64_t>& class_of, LoaderOptions opt);

  void start(std::vector<std::vector<std::uint64_t>> plan, std::uint64_t aug_seed, bool augment,
             std::size_t first = 0) override;
  std::optional<Batch> next() override;
  void stop() override;
  const char* kind() const noexcept override { return "resident"; }

 private:
  torch::Tensor cut(const torch::Tensor& local, const torch::Tensor& codes) const;

  LoaderOptions opt_;
  cache::Layout layout_;
  std::uint64_t begin_ = 0;            ///< the shard's first global id
  int bands_ = 0, patch_ = 1, stored_patch_ = 1;
  std::vector<std::int64_t> class_of_; ///< host copy, for the plan's checks
  torch::Tensor values_;               ///< pixel/patch: [n, B*sp*sp]; cube: [pixels, B] (stored dtype)
  torch::Tensor labels_;               ///< [n] int64 class index
  torch::Tensor base_, width_;         ///< cube: per local sample, its window's first pixel and its row stride
  torch::Tensor src_row_, src_col_;    ///< cube: [16, p*p] row / column offset of each output position
  torch::Tensor src_pos_;              ///< patch: [16, p*p] position inside the p x p crop
  // the current plan
  torch::Tensor plan_ids_, plan_codes_;                 ///< on the device, all batches concatenated
  std::vector<std::pair<std::int64_t, std::int64_t>> batches_;  ///< (offset, size) of each batch
  std::size_t next_ = 0;
};

}  // namespace hsipipe::train

#include "train/resident.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

#include "core/error.hpp"

namespace hsipipe::train {

namespace {

using cache::Layout;

bool is_nan_half(std::uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x03ffu) != 0; }

/// Sets NaN values (stored as float16 or float32) to +0, as Shard::gather does for patches.
void zero_nans(char* data, std::size_t values, bool f16) {
  if (f16) {
    auto* v = reinterpret_cast<std::uint16_t*>(data);
    for (std::size_t i = 0; i < values; ++i)
      if (is_nan_half(v[i])) v[i] = 0;
  } else {
    auto* v = reinterpret_cast<float*>(data);
    for (std::size_t i = 0; i < values; ++i)
      if (v[i] != v[i]) v[i] = 0.0f;
  }
}

/// Scene `sr`'s held rows padded by h on every side: [nrows + 2h, cols + 2h, B] stored values. Positions
/// outside the scene follow the border rule; rows of the scene that the shard does not hold are never
/// read by its samples' windows and stay 0.
void pad_scene(const cache::Shard::Raw::SceneRows& sr, int h, std::size_t value_bytes, bool zero_border, char* out) {
  const long H = sr.rows, W = sr.cols, Wp = W + 2L * h;
  for (long pr = 0; pr < static_cast<long>(sr.nrows) + 2L * h; ++pr) {
    char* dst = out + static_cast<std::size_t>(pr * Wp) * value_bytes;
    long rr = static_cast<long>(sr.row0) - h + pr;
    if (rr < 0 || rr >= H) {
      if (zero_border) continue;
      rr = cache::reflect_index(rr, H);
    }
    if (rr < static_cast<long>(sr.row0) || rr >= static_cast<long>(sr.row0 + sr.nrows)) continue;
    const char* row = sr.data + static_cast<std::size_t>((rr - static_cast<long>(sr.row0)) * W) * value_bytes;
    std::memcpy(dst + static_cast<std::size_t>(h) * value_bytes, row, static_cast<std::size_t>(W) * value_bytes);
    if (zero_border) continue;  // the column halo stays 0
    for (long pc = 0; pc < h; ++pc) {  // the column halo on both sides, reflected
      for (const long c : {pc, W + h + pc}) {
        std::memcpy(dst + static_cast<std::size_t>(c) * value_bytes,
                    row + static_cast<std::size_t>(cache::reflect_index(c - h, W)) * value_bytes, value_bytes);
      }
    }
  }
}

/// A plain (blocking) copy: the shard once per job, the plan once per epoch, both when the stream is idle
/// (after the previous epoch's last event). Pinning them first would hold a second host copy of the shard.
torch::Tensor to_device(const torch::Tensor& host, torch::Device device) { return device.is_cuda() ? host.to(device) : host; }

}  // namespace

std::uint64_t resident_bytes(const cache::Shard& shard) {
  const auto raw = shard.raw();
  const std::uint64_t elem = raw.f16 ? 2 : 4, B = static_cast<std::uint64_t>(raw.bands);
  if (raw.layout != Layout::cube) {
    const auto sp = static_cast<std::uint64_t>(raw.stored_patch);
    return shard.range().size() * B * sp * sp * elem;
  }
  const std::uint64_t h = static_cast<std::uint64_t>(raw.patch / 2);
  std::uint64_t pixels = 0;
  for (const auto& sr : raw.scenes)
    if (sr.nrows) pixels += (sr.nrows + 2 * h) * (sr.cols + 2 * h);
  return pixels * B * elem;
}

ResidentBatches::ResidentBatches(const cache::Shard& shard, const std::vector<std::int64_t>& class_of, LoaderOptions opt)
    : opt_(std::move(opt)), class_of_(class_of) {
  const auto raw = shard.raw();
  if (class_of_.size() != shard.range().size()) throw std::invalid_argument("ResidentBatches: class_of must have one entry per shard sample");
  layout_ = raw.layout;
  begin_ = shard.range().begin;
  bands_ = raw.bands;
  patch_ = raw.patch;
  stored_patch_ = raw.stored_patch;
  const auto n = static_cast<std::int64_t>(shard.range().size());
  const auto dtype = raw.f16 ? torch::kFloat16 : torch::kFloat32;
  const std::size_t value_bytes = static_cast<std::size_t>(bands_) * (raw.f16 ? 2 : 4);
  const auto dev = opt_.device;
  const auto i64 = torch::TensorOptions().dtype(torch::kInt64);
  labels_ = to_device(torch::from_blob(class_of_.data(), {n}, i64).clone(), dev);

  const std::int64_t p = patch_, pp = p * p;
  const auto table = augment_source_table(patch_);
  const auto codes = torch::from_blob(const_cast<std::int64_t*>(table.data()), {16, pp}, i64);
  if (layout_ != Layout::cube) {
    const std::int64_t sp = stored_patch_;
    values_ = to_device(torch::from_blob(const_cast<char*>(raw.samples), {n, bands_ * sp * sp}, dtype), dev);
    const std::int64_t off = (sp - p) / 2;  // centre crop
    src_pos_ = to_device(((codes.div(p, "floor") + off) * sp + codes.remainder(p) + off).contiguous(), dev);
    return;
  }
  const int h = patch_ / 2;
  std::vector<std::int64_t> scene_off(raw.scenes.size(), 0), scene_w(raw.scenes.size(), 0);
  std::int64_t pixels = 0;
  for (std::size_t s = 0; s < raw.scenes.size(); ++s) {
    const auto& sr = raw.scenes[s];
    scene_off[s] = pixels;
    scene_w[s] = static_cast<std::int64_t>(sr.cols) + 2 * h;
    if (sr.nrows) pixels += (static_cast<std::int64_t>(sr.nrows) + 2 * h) * scene_w[s];
  }
  auto host = torch::zeros({pixels, bands_}, torch::TensorOptions().dtype(dtype));
  char* at = static_cast<char*>(host.data_ptr());
  for (std::size_t s = 0; s < raw.scenes.size(); ++s) {
    if (!raw.scenes[s].nrows) continue;
    pad_scene(raw.scenes[s], h, value_bytes, raw.zero_border, at + static_cast<std::size_t>(scene_off[s]) * value_bytes);
  }
  zero_nans(at, static_cast<std::size_t>(pixels) * static_cast<std::size_t>(bands_), raw.f16);
  values_ = to_device(host, dev);
  std::vector<std::int64_t> base(static_cast<std::size_t>(n)), width(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const auto s = static_cast<std::size_t>(raw.scene[i]);
    const auto& sr = raw.scenes[s];
    // the window's top-left corner in the padded rows: (row - h) - (row0 - h), (col - h) + h
    base[static_cast<std::size_t>(i)] = scene_off[s] + (raw.row[i] - static_cast<std::int64_t>(sr.row0)) * scene_w[s] + raw.col[i];
    width[static_cast<std::size_t>(i)] = scene_w[s];
  }
  base_ = to_device(torch::from_blob(base.data(), {n}, i64).clone(), dev);
  width_ = to_device(torch::from_blob(width.data(), {n, 1}, i64).clone(), dev);
  src_row_ = to_device(codes.div(p, "floor").contiguous(), dev);
  src_col_ = to_device(codes.remainder(p).contiguous(), dev);
}

void ResidentBatches::start(std::vector<std::vector<std::uint64_t>> plan, std::uint64_t aug_seed, bool augment,
                            std::size_t first) {
  const bool aug = augment && opt_.augment.any() && patch_ > 1;
  std::vector<std::int64_t> ids, codes;
  batches_.clear();
  for (std::size_t b = 0; b < plan.size(); ++b) {
    batches_.emplace_back(static_cast<std::int64_t>(ids.size()), static_cast<std::int64_t>(plan[b].size()));
    for (std::size_t k = 0; k < plan[b].size(); ++k) {
      const std::uint64_t id = plan[b][k];
      if (id < begin_ || id - begin_ >= class_of_.size()) throw std::out_of_range("ResidentBatches: sample " + std::to_string(id) + " outside the shard");
      if (class_of_[id - begin_] < 0) throw std::invalid_argument("ResidentBatches: sample " + std::to_string(id) + " has no label");
      ids.push_back(static_cast<std::int64_t>(id - begin_));
      codes.push_back(aug ? augment_code(opt_.augment, aug_seed, b, k) : 0);
    }
  }
  const auto n = static_cast<std::int64_t>(ids.size());
  const auto i64 = torch::TensorOptions().dtype(torch::kInt64);
  plan_ids_ = to_device(torch::from_blob(ids.data(), {n}, i64).clone(), opt_.device);
  plan_codes_ = to_device(torch::from_blob(codes.data(), {n}, i64).clone(), opt_.device);
  next_ = std::min(first, batches_.size());
}

void ResidentBatches::stop() {
  batches_.clear();
  next_ = 0;
}

std::optional<Batch> ResidentBatches::next() {
  if (next_ >= batches_.size()) return std::nullopt;
  const auto [off, n] = batches_[next_];
  const auto local = plan_ids_.narrow(0, off, n);
  Batch b;
  b.index = next_++;
  b.size = static_cast<std::size_t>(n);
  b.x = cut(local, plan_codes_.narrow(0, off, n));
  b.y = labels_.index_select(0, local);
  return b;
}

torch::Tensor ResidentBatches::cut(const torch::Tensor& local, const torch::Tensor& codes) const {
  const std::int64_t n = local.size(0), B = bands_, p = patch_, pp = p * p;
  const auto f32 = values_.options().dtype(torch::kFloat32);
  if (layout_ == Layout::pixel) return values_.index_select(0, local).to(torch::kFloat32);
  torch::Tensor x;
  if (layout_ == Layout::patch) {
    const std::int64_t spp = static_cast<std::int64_t>(stored_patch_) * stored_patch_;
    const auto rows = values_.index_select(0, local).view({n, B, spp});
    const auto pos = src_pos_.index_select(0, codes).unsqueeze(1).expand({n, B, pp});
    x = rows.gather(2, pos);  // [n, B, p*p], stored dtype
    if (p == 1) return x.view({n, B}).to(torch::kFloat32);
    return x.to(torch::kFloat32).view({n, B, p, p});
  }
  // cube: every window position of every sample at once, its flips and rotation in the offsets
  const auto idx = base_.index_select(0, local).unsqueeze(1) + src_row_.index_select(0, codes) * width_.index_select(0, local) +
                   src_col_.index_select(0, codes);
  const auto px = values_.index_select(0, idx.reshape({-1}));  // [n * p*p, B]
  if (p == 1) return px.to(torch::kFloat32);
  x = torch::empty({n, B, p, p}, f32);
  x.copy_(px.view({n, p, p, B}).permute({0, 3, 1, 2}));  // transpose and widen in one copy
  return x;
}

}  // namespace hsipipe::train

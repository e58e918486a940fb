#include "train/loader.hpp"

#include <system_error>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <tuple>

#include "core/error.hpp"
#include "folds/rng.hpp"
#include "train/cuda_streams.hpp"

namespace hsipipe::train {

Augment parse_augment(const std::string& s) {
  Augment a;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    const auto next = s.find(',', pos);
    std::string item = s.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item == "flip") a.flip = true;
    else if (item == "rot90") a.rot90 = true;
    else if (!item.empty() && item != "none") {
      throw ConfigError("--augment: unknown augmentation '" + item + "' (expected a list of flip, rot90, or none)");
    }
    if (next == std::string::npos) break;
    pos = next + 1;
  }
  return a;
}

int augment_code(const Augment& a, std::uint64_t aug_seed, std::size_t batch, std::size_t k) {
  folds::SplitMix64 g(folds::derive_seed(aug_seed, batch, k));
  const std::uint64_t r = g.next();
  const int hf = a.flip && (r & 1u) ? 1 : 0, vf = a.flip && (r & 2u) ? 2 : 0;
  const int rot = a.rot90 ? static_cast<int>((r >> 2) & 3u) : 0;
  return hf | vf | rot << 2;
}

namespace {
void transform_plane(float* a, float* tmp, int p, bool hflip, bool vflip, int k);
}  // namespace

std::vector<std::int64_t> augment_source_table(int p) {
  const std::size_t pp = static_cast<std::size_t>(p) * static_cast<std::size_t>(p);
  std::vector<std::int64_t> table(16 * pp);
  std::vector<float> plane(pp), tmp(pp);
  for (int code = 0; code < 16; ++code) {
    for (std::size_t i = 0; i < pp; ++i) plane[i] = static_cast<float>(i);  // exact: p*p < 2^24
    transform_plane(plane.data(), tmp.data(), p, code & 1, code & 2, code >> 2);
    for (std::size_t i = 0; i < pp; ++i) table[static_cast<std::size_t>(code) * pp + i] = static_cast<std::int64_t>(plane[i]);
  }
  return table;
}

BatchLoader::BatchLoader(const cache::Shard& shard, std::vector<std::int64_t> class_of, LoaderOptions opt)
    : shard_(shard), class_of_(std::move(class_of)), opt_(std::move(opt)) {
  if (opt_.threads < 1) throw ConfigError("--threads must be at least 1");
  if (opt_.prefetch < 1) throw ConfigError("--prefetch must be at least 1");
  if (class_of_.size() != shard_.range().size()) throw std::invalid_argument("BatchLoader: class_of must have one entry per shard sample");
  sample_floats_ = shard_.sample_floats();
  patch_ = shard_.patch();
  bands_ = shard_.bands();
  slots_.resize(static_cast<std::size_t>(opt_.prefetch));
  if (opt_.device.is_cuda()) staging_ = std::make_unique<DeviceStaging>(opt_.device, slots_.size());
  start_threads();
}

/// The producers. A thread the system cannot start (a process or memory limit) is a ConfigError naming
/// --threads, after the ones started are stopped: never std::terminate for joinable threads left behind.
void BatchLoader::start_threads() {
  try {
    for (int t = 0; t < opt_.threads; ++t) threads_.emplace_back([this] { worker(); });
  } catch (const std::system_error& e) {
    const std::size_t started = threads_.size();
    {
      std::unique_lock lk(mu_);
      stop_threads_ = true;
    }
    cv_work_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
    throw ConfigError("--threads " + std::to_string(opt_.threads) + ": the system started " + std::to_string(started) +
                      " loader threads and refused the next (" + e.what() + "): give fewer threads, or raise the process limit (ulimit -u)");
  }
}

BatchLoader::~BatchLoader() {
  {
    std::unique_lock lk(mu_);
    cancel_locked(lk);
    stop_threads_ = true;
  }
  cv_work_.notify_all();
  for (auto& t : threads_) t.join();
}

void BatchLoader::cancel_locked(std::unique_lock<std::mutex>& lk) {
  next_claim_ = plan_.size();  // nothing more is claimed
  cv_idle_.wait(lk, [&] { return in_flight_ == 0; });
  holding_ = false;
}

void BatchLoader::stop() {
  std::unique_lock lk(mu_);
  cancel_locked(lk);
  plan_.clear();
  next_claim_ = consumed_ = next_deliver_ = 0;
}

void BatchLoader::start(std::vector<std::vector<std::uint64_t>> plan, std::uint64_t aug_seed, bool augment,
                        std::size_t first) {
  std::unique_lock lk(mu_);
  cancel_locked(lk);
  plan_ = std::move(plan);
  aug_seed_ = aug_seed;
  augment_ = augment && opt_.augment.any() && patch_ > 1;
  first = std::min(first, plan_.size());
  next_claim_ = consumed_ = next_deliver_ = first;
  error_.clear();
  std::size_t need = 0;
  for (const auto& b : plan_) need = std::max(need, b.size());
  const auto rng = shard_.range();
  for (const auto& b : plan_) {
    for (auto id : b) {
      if (!rng.contains(id)) throw std::out_of_range("BatchLoader: sample " + std::to_string(id) + " outside the shard");
      if (class_of_[id - rng.begin] < 0) throw std::invalid_argument("BatchLoader: sample " + std::to_string(id) + " has no label");
    }
  }
  const bool cuda = opt_.device.is_cuda();
  for (auto& s : slots_) {
    s.ready = SIZE_MAX;
    if (s.capacity < need || !s.x.defined()) {  // (defined even when empty: a rank with no sample in its steps)
      auto o = torch::TensorOptions().pinned_memory(cuda);
      std::vector<std::int64_t> xs{static_cast<std::int64_t>(need), bands_};
      if (patch_ > 1) {
        xs.push_back(patch_);
        xs.push_back(patch_);
      }
      s.x = torch::empty(xs, o.dtype(torch::kFloat32));
      s.y = torch::empty({static_cast<std::int64_t>(need)}, o.dtype(torch::kInt64));
      s.capacity = need;
    }
  }
  lk.unlock();
  cv_work_.notify_all();
}

void BatchLoader::release_current() {
  // caller holds mu_
  if (!holding_) return;
  if (staging_) staging_->release((next_deliver_ - 1) % slots_.size());  // the compute stream's last use is queued
  holding_ = false;
  ++consumed_;
  cv_work_.notify_all();
}

std::optional<Batch> BatchLoader::next() {
  std::unique_lock lk(mu_);
  release_current();
  if (next_deliver_ >= plan_.size()) return std::nullopt;
  const std::size_t i = next_deliver_;
  Slot& s = slots_[i % slots_.size()];
  cv_ready_.wait(lk, [&] { return s.ready == i || !error_.empty(); });
  if (!error_.empty()) {
    const std::string e = error_;
    lk.unlock();
    stop();
    throw std::runtime_error("loader: " + e);
  }
  ++next_deliver_;
  holding_ = true;
  Batch b;
  b.index = i;
  b.size = s.size;
  const auto n = static_cast<std::int64_t>(s.size);
  b.x = s.x.narrow(0, 0, n);
  b.y = s.y.narrow(0, 0, n);
  if (staging_) std::tie(b.x, b.y) = staging_->upload(i % slots_.size(), b.x, b.y);
  return b;
}

void BatchLoader::worker() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_work_.wait(lk, [&] {
      return stop_threads_ || (next_claim_ < plan_.size() && next_claim_ < consumed_ + slots_.size());
    });
    if (stop_threads_) return;
    const std::size_t i = next_claim_++;
    const std::size_t slot = i % slots_.size();
    ++in_flight_;
    lk.unlock();
    std::string err;
    try {
      if (staging_) staging_->wait_copied(slot);  // the slot's previous batch has left for the device
      fill(i, slot);
    } catch (const std::exception& e) {
      err = e.what();
    }
    lk.lock();
    --in_flight_;
    if (!err.empty() && error_.empty()) error_ = err;
    else if (err.empty()) slots_[slot].ready = i;
    cv_ready_.notify_all();
    if (in_flight_ == 0) cv_idle_.notify_all();
  }
}

namespace {

/// In place on one band's p x p plane: optional flips then k quarter turns (counter-clockwise, as np.rot90).
void transform_plane(float* a, float* tmp, int p, bool hflip, bool vflip, int k) {
  const auto P = static_cast<std::size_t>(p);
  if (hflip) {
    for (std::size_t i = 0; i < P; ++i) std::reverse(a + i * P, a + (i + 1) * P);
  }
  if (vflip) {
    for (std::size_t i = 0; i < P / 2; ++i) std::swap_ranges(a + i * P, a + (i + 1) * P, a + (P - 1 - i) * P);
  }
  if (k == 0) return;
  for (std::size_t i = 0; i < P; ++i) {
    for (std::size_t j = 0; j < P; ++j) {
      std::size_t si, sj;  // out[i][j] = in[src]
      switch (k) {
        case 1: si = j; sj = P - 1 - i; break;              // rot90:  out[i][j] = in[j][p-1-i]
        case 2: si = P - 1 - i; sj = P - 1 - j; break;      // rot180
        default: si = P - 1 - j; sj = i; break;              // rot270: out[i][j] = in[p-1-j][i]
      }
      tmp[i * P + j] = a[si * P + sj];
    }
  }
  std::memcpy(a, tmp, P * P * sizeof(float));
}

}  // namespace

void BatchLoader::fill(std::size_t batch, std::size_t slot) {
  // plan_, slots_[slot] and aug settings are stable while this batch is in flight (start/stop wait).
  const auto& ids = plan_[batch];
  Slot& s = slots_[slot];
  float* x = s.x.data_ptr<float>();
  std::int64_t* y = s.y.data_ptr<std::int64_t>();
  shard_.gather(ids.data(), ids.size(), x);
  const auto begin = shard_.range().begin;
  for (std::size_t k = 0; k < ids.size(); ++k) y[k] = class_of_[ids[k] - begin];
  if (augment_) {
    const int p = patch_;
    std::vector<float> tmp(static_cast<std::size_t>(p * p));
    for (std::size_t k = 0; k < ids.size(); ++k) {
      const int code = augment_code(opt_.augment, aug_seed_, batch, k);
      if (code == 0) continue;
      float* sample = x + k * sample_floats_;
      for (int b = 0; b < bands_; ++b) {
        transform_plane(sample + static_cast<std::size_t>(b) * p * p, tmp.data(), p, code & 1, code & 2, code >> 2);
      }
    }
  }
  s.size = ids.size();
}

}  // namespace hsipipe::train

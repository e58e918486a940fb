#include "train/step.hpp"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <numeric>

#include "core/error.hpp"
#include "folds/rng.hpp"

namespace hsipipe::train {

namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

std::vector<std::int64_t> split_batch(std::int64_t global, const std::vector<std::uint64_t>& counts) {
  const std::uint64_t total = std::accumulate(counts.begin(), counts.end(), std::uint64_t{0});
  std::vector<std::int64_t> out(counts.size(), 0);
  if (total == 0 || global <= 0) return out;
  const auto g = static_cast<std::uint64_t>(std::min<std::uint64_t>(static_cast<std::uint64_t>(global), total));
  std::vector<std::pair<std::uint64_t, std::size_t>> rem;  // (remainder numerator, rank)
  std::uint64_t assigned = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    // exact integer arithmetic: floor(g * c / total) and its remainder
    __extension__ typedef unsigned __int128 u128;
    const u128 num = static_cast<u128>(g) * counts[r];
    out[r] = static_cast<std::int64_t>(num / total);
    rem.emplace_back(static_cast<std::uint64_t>(num % total), r);
    assigned += static_cast<std::uint64_t>(out[r]);
  }
  // the largest remainders get one more (ties: lower rank first)
  std::stable_sort(rem.begin(), rem.end(), [](auto& a, auto& b) { return a.first > b.first; });
  for (std::size_t i = 0; assigned < g; ++i) {
    const std::size_t r = rem[i].second;
    if (static_cast<std::uint64_t>(out[r]) < counts[r]) {
      ++out[r];
      ++assigned;
    }
  }
  return out;
}

std::vector<std::vector<std::uint64_t>> epoch_plan(const std::vector<std::uint64_t>& local_ids, std::int64_t local_batch,
                                                   std::int64_t steps, std::uint64_t seed, int fold, int epoch, int rank) {
  std::vector<std::vector<std::uint64_t>> plan(static_cast<std::size_t>(std::max<std::int64_t>(steps, 0)));
  if (local_ids.empty() || local_batch <= 0) return plan;
  folds::SplitMix64 g(folds::derive_seed(folds::derive_seed(seed, static_cast<std::uint64_t>(fold), static_cast<std::uint64_t>(epoch)),
                                         static_cast<std::uint64_t>(rank), 0x7261696eULL));
  std::vector<std::uint64_t> order = local_ids;
  folds::shuffle(order, g);
  std::size_t pos = 0;
  for (auto& b : plan) {
    b.reserve(static_cast<std::size_t>(local_batch));
    while (b.size() < static_cast<std::size_t>(local_batch)) {
      if (pos == order.size()) {  // shard ran short: reshuffle and continue
        folds::shuffle(order, g);
        pos = 0;
      }
      b.push_back(order[pos++]);
    }
  }
  return plan;
}

GradSync::GradSync(std::vector<torch::Tensor> params, dist::Communicator& comm, std::size_t bucket_bytes)
    : params_(std::move(params)), comm_(comm) {
  Bucket cur;
  std::size_t bytes = 0;
  auto flush = [&] {
    if (cur.params.empty()) return;
    std::int64_t n = 0;
    for (auto i : cur.params) n += params_[i].numel();
    const auto& p0 = params_[cur.params.front()];
    cur.flat = torch::zeros({n}, torch::TensorOptions().dtype(torch::kFloat32).device(p0.device()));
    const bool stage = p0.is_cuda() && comm_.memory() == dist::Memory::host;
    if (stage) cur.host = torch::zeros({n}, torch::TensorOptions().dtype(torch::kFloat32));
    buckets_.push_back(std::move(cur));
    cur = Bucket{};
    bytes = 0;
  };
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (params_[i].scalar_type() != torch::kFloat32) throw std::invalid_argument("GradSync: parameters must be float32 (master weights)");
    const std::size_t b = static_cast<std::size_t>(params_[i].numel()) * 4;
    if (!cur.params.empty() && (bytes + b > bucket_bytes || params_[i].device() != params_[cur.params.front()].device())) flush();
    cur.params.push_back(i);
    bytes += b;
  }
  flush();
}

void GradSync::allreduce() {
  if (comm_.size() == 1) {
    for (auto& p : params_)
      if (!p.mutable_grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    return;
  }
  for (auto& bk : buckets_) {
    std::int64_t off = 0;
    for (auto i : bk.params) {
      auto& p = params_[i];
      const auto n = p.numel();
      auto dst = bk.flat.narrow(0, off, n);
      if (p.grad().defined()) dst.copy_(p.grad().reshape({n}));
      else dst.zero_();
      off += n;
    }
    if (comm_.size() > 1) {
      if (bk.host.defined()) {
        bk.host.copy_(bk.flat);
        comm_.allreduce_sum(bk.host.data_ptr<float>(), static_cast<std::size_t>(bk.host.numel()));
        bk.flat.copy_(bk.host);
      } else {
        comm_.allreduce_sum(bk.flat.data_ptr<float>(), static_cast<std::size_t>(bk.flat.numel()));
      }
    }
    off = 0;
    for (auto i : bk.params) {
      auto& p = params_[i];
      const auto n = p.numel();
      auto src = bk.flat.narrow(0, off, n).view(p.sizes());
      if (p.mutable_grad().defined()) p.mutable_grad().copy_(src);
      else p.mutable_grad() = src.clone();
      off += n;
    }
  }
}

BufferSync::BufferSync(std::vector<torch::Tensor> buffers, dist::Communicator& comm) : comm_(comm) {
  std::int64_t n = 0;
  for (auto& b : buffers)
    if (b.defined() && b.numel() > 0) {
      n += b.numel();
      buffers_.push_back(b);
    }
  if (buffers_.empty() || comm_.size() == 1) {
    buffers_.clear();
    return;
  }
  const bool host = comm_.memory() == dist::Memory::host;
  flat_ = torch::empty({n}, torch::TensorOptions().dtype(torch::kFloat64).device(host ? torch::kCPU : buffers_.front().device()));
}

void BufferSync::average() {
  if (buffers_.empty()) return;
  torch::NoGradGuard ng;
  std::int64_t off = 0;
  for (auto& b : buffers_) {
    flat_.narrow(0, off, b.numel()).copy_(b.reshape({b.numel()}));
    off += b.numel();
  }
  comm_.allreduce_sum(flat_.data_ptr<double>(), static_cast<std::size_t>(flat_.numel()));
  flat_.div_(static_cast<double>(comm_.size()));
  off = 0;
  for (auto& b : buffers_) {
    auto src = flat_.narrow(0, off, b.numel()).view(b.sizes());
    if (b.is_floating_point()) b.copy_(src);
    else b.copy_(src.floor());
    off += b.numel();
  }
}

Precision precision_from_name(const std::string& s) {
  if (s == "fp32") return Precision::fp32;
  if (s == "bf16") return Precision::bf16;
  throw ConfigError("--precision: unknown value '" + s + "' (expected fp32 or bf16)");
}
std::string precision_name(Precision p) { return p == Precision::bf16 ? "bf16" : "fp32"; }

// at::autocast's C++ API changed in PyTorch 2.4 (per-device-type setters). This is the only place
// that knows; both branches compile against their own libtorch.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define HSIPIPE_AUTOCAST_NEW_API 1
#else
#define HSIPIPE_AUTOCAST_NEW_API 0
#endif

AutocastScope::AutocastScope(Precision p, torch::Device device) {
  if (p != Precision::bf16) return;
  active_ = true;
  cuda_ = device.is_cuda();
#if HSIPIPE_AUTOCAST_NEW_API
  const auto dt = cuda_ ? at::kCUDA : at::kCPU;
  prev_enabled_ = at::autocast::is_autocast_enabled(dt);
  prev_dtype_ = at::autocast::get_autocast_dtype(dt);
  at::autocast::set_autocast_dtype(dt, at::kBFloat16);
  at::autocast::set_autocast_enabled(dt, true);
#else
  if (cuda_) {
    prev_enabled_ = at::autocast::is_enabled();
    prev_dtype_ = at::autocast::get_autocast_gpu_dtype();
    at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
    at::autocast::set_enabled(true);
  } else {
    prev_enabled_ = at::autocast::is_cpu_enabled();
    prev_dtype_ = at::autocast::get_autocast_cpu_dtype();
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    at::autocast::set_cpu_enabled(true);
  }
#endif
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  // leaving the outermost scope drops the cast-weight cache (as torch.autocast's __exit__ does)
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
#if HSIPIPE_AUTOCAST_NEW_API
  const auto dt = cuda_ ? at::kCUDA : at::kCPU;
  at::autocast::set_autocast_enabled(dt, prev_enabled_);
  at::autocast::set_autocast_dtype(dt, prev_dtype_);
#else
  if (cuda_) {
    at::autocast::set_enabled(prev_enabled_);
    at::autocast::set_autocast_gpu_dtype(prev_dtype_);
  } else {
    at::autocast::set_cpu_enabled(prev_enabled_);
    at::autocast::set_autocast_cpu_dtype(prev_dtype_);
  }
#endif
}

StepResult train_step(Model& model, torch::optim::Optimizer& opt, GradSync& sync, const torch::Tensor& x,
                      const torch::Tensor& y, std::int64_t global_batch, Precision precision, PhaseClock* clock,
                      const LossOptions* loss) {
  StepResult r;
  double t0 = now_s();
  opt.zero_grad();
  const auto dev = model.parameters().front().device();
  if (x.size(0) > 0) {
    torch::Tensor logits;
    {
      AutocastScope ac(precision, dev);
      logits = model.forward(x);
    }
    logits = logits.to(torch::kFloat32);  // loss in fp32
    auto ce = torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum);
    if (loss) {
      if (loss->class_weights.defined()) ce.weight(loss->class_weights);
      ce.label_smoothing(loss->label_smoothing);
    }
    auto loss_sum = torch::nn::functional::cross_entropy(logits, y, ce);
    (loss_sum / static_cast<double>(global_batch)).backward();
    r.loss_sum = loss_sum.detach();
    r.correct = logits.detach().argmax(1).eq(y).sum();
  } else {
    r.loss_sum = torch::zeros({}, torch::TensorOptions().device(dev));
    r.correct = torch::zeros({}, torch::TensorOptions().dtype(torch::kInt64).device(dev));
  }
  if (clock) clock->mark(Phase::compute);
  double t1 = now_s();
  sync.allreduce();
  if (clock) clock->mark(Phase::comm);
  double t2 = now_s();
  opt.step();
  if (clock) {
    clock->mark(Phase::compute);
    return r;
  }
  double t3 = now_s();
  r.compute_s = (t1 - t0) + (t3 - t2);
  r.comm_s = t2 - t1;
  return r;
}

}  // namespace hsipipe::train

#include "train/cuda_streams.hpp"

#include <chrono>
#include <stdexcept>

#if HSIPIPE_TORCH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace hsipipe::train {

namespace {
double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

// ------------------------------------------------------------------------------- DeviceStaging
#if HSIPIPE_TORCH_CUDA
struct DeviceStaging::Impl {
  torch::Device device;
  c10::cuda::CUDAStream side;
  struct Slot {
    torch::Tensor x, y;                             ///< device copies, capacity rows
    at::cuda::CUDAEvent copied, released;           ///< timing off: only ordering
  };
  std::vector<Slot> slots;
  Impl(torch::Device d, std::size_t n)
      : device(d), side(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, d.index())), slots(n) {}
};

DeviceStaging::DeviceStaging(torch::Device device, std::size_t slots) : impl_(std::make_unique<Impl>(device, slots)) {
  if (!device.is_cuda()) throw std::invalid_argument("DeviceStaging: a CUDA device is needed");
}
DeviceStaging::~DeviceStaging() = default;

std::pair<torch::Tensor, torch::Tensor> DeviceStaging::upload(std::size_t slot, const torch::Tensor& x, const torch::Tensor& y) {
  auto& s = impl_->slots.at(slot);
  const auto n = x.size(0);
  const auto compute = c10::cuda::getCurrentCUDAStream(impl_->device.index());
  const bool fresh = !s.x.defined() || s.x.size(0) < n || !s.x.sizes().slice(1).equals(x.sizes().slice(1));
  if (fresh) {
    // Allocated on the compute stream (the current one), the only stream that reads them. The block may
    // be one the compute stream still reads through a freed tensor: the side stream writes it only
    // after everything queued on the compute stream so far.
    s.x = torch::empty(x.sizes(), x.options().device(impl_->device).pinned_memory(false));
    s.y = torch::empty(y.sizes(), y.options().device(impl_->device).pinned_memory(false));
  }
  auto dx = s.x.narrow(0, 0, n), dy = s.y.narrow(0, 0, n);
  {
    c10::cuda::CUDAStreamGuard guard(impl_->side);
    if (fresh) {
      at::cuda::CUDAEvent queued;
      queued.record(compute);
      queued.block(impl_->side);
    }
    s.released.block(impl_->side);  // the compute stream's last use of this device slot comes first
    dx.copy_(x, /*non_blocking=*/true);
    dy.copy_(y, /*non_blocking=*/true);
    s.copied.record(impl_->side);
  }
  s.copied.block(compute);
  return {dx, dy};
}

void DeviceStaging::release(std::size_t slot) {
  impl_->slots.at(slot).released.record(c10::cuda::getCurrentCUDAStream(impl_->device.index()));
}

void DeviceStaging::wait_copied(std::size_t slot) { impl_->slots.at(slot).copied.synchronize(); }
#else
struct DeviceStaging::Impl {};
DeviceStaging::DeviceStaging(torch::Device, std::size_t) {
  throw std::invalid_argument("DeviceStaging: this libtorch was built without CUDA");
}
DeviceStaging::~DeviceStaging() = default;
std::pair<torch::Tensor, torch::Tensor> DeviceStaging::upload(std::size_t, const torch::Tensor& x, const torch::Tensor& y) {
  return {x, y};
}
void DeviceStaging::release(std::size_t) {}
void DeviceStaging::wait_copied(std::size_t) {}
#endif

// ------------------------------------------------------------------------------- PhaseClock
constexpr int kStepStart = -1;

#if HSIPIPE_TORCH_CUDA
struct PhaseClock::Events {
  std::vector<std::unique_ptr<at::cuda::CUDAEvent>> pool;  ///< timing events, reused across epochs
  std::vector<int> tag;                                    ///< phase closed by each recorded event
  std::size_t used = 0;
};
#else
struct PhaseClock::Events {};
#endif

PhaseClock::PhaseClock(torch::Device device) : cuda_(device.is_cuda()) {
#if HSIPIPE_TORCH_CUDA
  if (cuda_) events_ = std::make_unique<Events>();
#else
  if (cuda_) throw std::invalid_argument("PhaseClock: this libtorch was built without CUDA");
#endif
}
PhaseClock::~PhaseClock() = default;

void PhaseClock::record(int tag) {
#if HSIPIPE_TORCH_CUDA
  auto& e = *events_;
  if (e.used == e.pool.size()) {
    e.pool.push_back(std::make_unique<at::cuda::CUDAEvent>(cudaEventDefault));  // timing on
    e.tag.push_back(0);
  }
  e.pool[e.used]->record();  // the current stream
  e.tag[e.used] = tag;
  ++e.used;
#else
  (void)tag;
#endif
}

void PhaseClock::begin_step() {
  if (cuda_) return record(kStepStart);
  const double t = now_s();
  if (last_ >= 0) host_.idle += t - last_;
  last_ = t;
}

void PhaseClock::mark(Phase p) {
  if (cuda_) return record(static_cast<int>(p));
  const double t = now_s();
  if (last_ >= 0) {
    const double d = t - last_;
    if (p == Phase::data) host_.data += d;
    else if (p == Phase::compute) host_.compute += d;
    else host_.comm += d;
  }
  last_ = t;
}

PhaseTimes PhaseClock::finish() {
  PhaseTimes out;
  if (!cuda_) {
    out = host_;
    host_ = {};
    last_ = -1;
    return out;
  }
#if HSIPIPE_TORCH_CUDA
  auto& e = *events_;
  if (e.used > 0) e.pool[e.used - 1]->synchronize();  // one event: everything before it on the stream is done
  for (std::size_t i = 1; i < e.used; ++i) {
    const double d = static_cast<double>(e.pool[i - 1]->elapsed_time(*e.pool[i])) / 1e3;
    switch (e.tag[i]) {
      case kStepStart: out.idle += d; break;
      case static_cast<int>(Phase::data): out.data += d; break;
      case static_cast<int>(Phase::compute): out.compute += d; break;
      default: out.comm += d; break;
    }
  }
  e.used = 0;
#endif
  return out;
}

void configure_cudnn(torch::Device device, bool deterministic) {
  if (!device.is_cuda()) return;
  at::globalContext().setBenchmarkCuDNN(!deterministic);
  at::globalContext().setDeterministicCuDNN(deterministic);
}

}  // namespace hsipipe::train

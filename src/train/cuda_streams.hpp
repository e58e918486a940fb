#pragma once
// train/cuda_streams: the only code that talks to CUDA streams and events. It is compiled for real
// against a CUDA libtorch (HSIPIPE_TORCH_CUDA); in a CPU build DeviceStaging cannot be made (nothing
// makes one for a CPU device) and PhaseClock times on the host, where every operation has finished
// when it returns.
//
// Why: the training loop must never make the host wait for the whole device. The host queues step
// i+1 while the GPU runs step i; a wait is only ever for one event (a slot's copy, or the last
// timing event of an epoch).
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace hsipipe::train {

/// CUDA only: device copies of the host ring's slots (BatchLoader), made on a side stream.
///   upload(s):    the side stream waits until the compute stream is done with device slot s (its
///                 `released` event), copies host slot s (pinned) into it, records `copied`; the
///                 current (compute) stream waits for `copied`. Nothing waits on the host.
///   release(s):   records `released` for device slot s on the compute stream (the batch's last use
///                 is queued by then).
///   wait_copied(s): the host waits for host slot s's last copy only, before a producer refills it.
/// Rank-local; upload/release from the consumer thread, wait_copied from producer threads.
class DeviceStaging {
 public:
  DeviceStaging(torch::Device device, std::size_t slots);
  ~DeviceStaging();
  DeviceStaging(const DeviceStaging&) = delete;
  DeviceStaging& operator=(const DeviceStaging&) = delete;

  std::pair<torch::Tensor, torch::Tensor> upload(std::size_t slot, const torch::Tensor& x, const torch::Tensor& y);
  void release(std::size_t slot);
  void wait_copied(std::size_t slot);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// What one epoch's steps spent, in seconds. On CUDA these are intervals of the GPU's own timeline
/// (timing events on the compute stream), so `compute / wall` is the GPU's busy fraction; `idle` is
/// the time the GPU waited for the host between steps (launch overhead, host-side work). On CPU they
/// are host intervals and `idle` is the loop's own overhead.
struct PhaseTimes {
  double data = 0, compute = 0, comm = 0, idle = 0;
  double sum() const noexcept { return data + compute + comm + idle; }
};

enum class Phase { data, compute, comm };

/// Times the phases of a sequence of steps. begin_step() opens a step (the interval since the previous
/// mark is idle); mark(p) closes the interval since the previous mark as phase p. finish() waits for
/// the last event (CUDA: one event, not the device), returns the sums and starts over.
class PhaseClock {
 public:
  explicit PhaseClock(torch::Device device);
  ~PhaseClock();
  PhaseClock(const PhaseClock&) = delete;
  PhaseClock& operator=(const PhaseClock&) = delete;

  void begin_step();
  void mark(Phase p);
  PhaseTimes finish();
  bool on_device() const noexcept { return cuda_; }

 private:
  void record(int tag);
  bool cuda_ = false;
  // host clock
  double last_ = -1;
  PhaseTimes host_;
  // CUDA events (a pool reused across epochs) and the phase each one closes (-1: a step's start)
  struct Events;
  std::unique_ptr<Events> events_;
};

/// Turns on cuDNN's autotuner (as torch.backends.cudnn.benchmark = True) unless `deterministic`.
/// No-op without CUDA.
void configure_cudnn(torch::Device device, bool deterministic);

}  // namespace hsipipe::train

#pragma once
// train/planner: memory budget of one training step, before anything is trained (`hsipipe plan`).
//
//   M_total = M_param + M_grad + M_opt + M_act + M_input + M_workspace [+ M_runtime on CUDA]   (per rank)
//
// How each term is estimated:
//   M_param    parameters x 4 bytes (fp32 master weights in both precisions).
//   M_grad     parameters x 4 bytes (gradients of fp32 parameters are fp32).
//   M_opt      adam: 2 x 4 bytes per parameter (exp_avg, exp_avg_sq); sgd with momentum: 4; without: 0.
//   M_act      what autograd keeps for backward, from a shape trace: the model is built and run ONCE
//              on a real batch-1 zero tensor (no gradient), each layer records its output shape and
//              which tensors its backward needs (conv/linear: input; relu/tanh: output; dropout: mask;
//              max-pool: indices), each tensor counted once; the per-sample sum is multiplied by the
//              per-rank batch. bf16 halves the floating-point part (autocast keeps bf16 copies).
//   M_input    the batch itself (x float32 and int64 labels) held by the training loop.
//   M_workspace transient buffers: the gradient of the largest activation in flight during backward
//              (1 x the largest layer tensor), plus the largest convolution's oneDNN reorder buffers
//              (that layer's input + output in the channel-blocked layout, channels padded to a
//              multiple of 16), and in bf16 the bf16 weight copies (2 bytes per parameter).
//              Checked on CPU against peak RSS (tests/train/test_planner.cpp, 2 threads): li3d (64 bands,
//              p 9, batch 256) +15%; hybridsn (30 bands, p 15, batch 64) +3% in one run and -26% in
//              another (measured 84 vs 116 MiB for the same step: glibc/oneDNN noise on a loaded
//              machine). The CPU test tolerance is 35%; the GPU 25% check has not been run.
//   M_runtime  (--device cuda) what a CUDA process holds in the caching allocator beyond the model's
//              tensors: cuBLAS's workspace (32 MiB on Hopper, PyTorch's default CUBLAS_WORKSPACE_CONFIG)
//              and cuDNN's convolution workspaces and small-block rounding. Set to 64 MiB from the H200
//              run of 2026-12-04 (PyTorch 2.11): hu1d fp32, batch 256, measured 76 MiB peak allocated
//              where the terms above give 16 MiB; the larger models' plans were within 4% before it.
//              docs/BENCHMARKS.md's GPU section compares plan and measurement for every model.
// A TorchScript network (--model FILE, train/models/torchscript.hpp) records no trace: its parameters, gradients
// and optimizer state are counted as above, and M_act + M_workspace is the peak RSS of one measured CPU training
// step (fp32, the per-rank batch) beyond those; the plan says so (Plan::note).
// The estimate is the steady-state upper bound (optimizer state already allocated during the
// activation peak, i.e. the second and later steps). Everything here is rank-local.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hsipipe::train {

struct PlanRequest {
  std::string model;
  int bands = 0, patch = 1, batch = 1;  ///< batch: the GLOBAL batch, split over `ranks`
  int classes = 16;
  std::string precision = "fp32";  ///< fp32 | bf16
  std::string optimizer = "adam";  ///< adam | sgd
  double momentum = 0.9;           ///< sgd only: 0 means no momentum buffer
  int ranks = 1;
  std::uint64_t budget = 0;        ///< bytes per rank (device memory); 0: no budget given
  // Cache sizing (optional): one scene of rows x cols, `samples` labeled pixels, stored as cache_dtype.
  std::uint64_t rows = 0, cols = 0, samples = 0;
  int cache_dtype_bytes = 2;       ///< 2 (float16) or 4 (float32)
  std::string device = "cpu";      ///< cpu | cuda (cuda adds M_runtime)
  int prefetch = 4;                ///< the loader's ring slots (host memory per rank)
};

struct PlanLayer {
  std::string name, kind;
  std::vector<std::int64_t> out;   ///< output shape at the per-rank batch
  std::int64_t params = 0;
  std::uint64_t act_bytes = 0;       ///< saved for backward at the per-rank batch
  std::uint64_t workspace_bytes = 0; ///< this layer's transient need
};

struct CacheEstimate {
  std::string layout;
  std::uint64_t bytes = 0;  ///< sample arrays (+ labels and coords)
  std::string note;
};

/// Host memory of one rank for a cache layout (train/host_memory.hpp): its shard in memory, or, streamed, the
/// pages of the batches in flight (window); the loader's ring either way. The model's own memory is total.
struct HostEstimate {
  std::string layout;
  std::uint64_t shard = 0, ring = 0, window = 0;
};

struct Lever {
  std::string lever;   ///< "precision", "batch", "ranks", "patch", "bands"
  std::string change;  ///< e.g. "--precision bf16", "--batch 64", "PCA to 30 bands (--pca 30)"
  std::uint64_t total = 0;
  bool fits = false;
};

struct Plan {
  PlanRequest req;
  int batch_per_rank = 1;
  std::int64_t params = 0;
  std::vector<PlanLayer> layers;
  std::uint64_t m_param = 0, m_grad = 0, m_opt = 0, m_act = 0, m_input = 0, m_workspace = 0, m_runtime = 0, total = 0;
  std::vector<CacheEstimate> caches;  ///< empty unless rows, cols and samples were given
  std::vector<HostEstimate> host;     ///< per layout of `caches`: host memory per rank
  std::vector<Lever> levers;          ///< empty unless a budget was given and the total exceeds it
  /// How the estimate was made when not by the layer trace: a TorchScript network (--model FILE) has no trace,
  /// so its activations and workspace are one measured CPU training step (fp32) at the per-rank batch.
  std::string note;
};

/// Validates the request (ConfigError naming the option) and estimates. With a budget that the
/// total exceeds, tries each lever alone and reports the mildest change that fits.
Plan make_plan(const PlanRequest& req);
/// M_runtime of a CUDA process (see above).
inline constexpr std::uint64_t kCudaRuntimeBytes = 64ull << 20;
nlohmann::json to_json(const Plan& p);
std::string plan_text(const Plan& p);

/// "24GiB", "512 MiB", "1.5GB", "1000000" (bytes) -> bytes. Throws ConfigError naming `option`.
std::uint64_t parse_bytes(const std::string& s, const std::string& option = "--budget");
std::string format_bytes(std::uint64_t b);  ///< "1.50 GiB"

/// Measures one real CPU training step of the request (random data, the real model and optimizer):
/// the increase of the process's peak RSS (VmHWM, reset through /proc/self/clear_refs) over the RSS
/// before the model was built, across `steps` steps. Rank-local; touches torch's global RNG.
struct Measured {
  std::uint64_t peak_rss_increase = 0;
  bool peak_reset = false;  ///< false: clear_refs unavailable, the peak may predate the measurement
};
Measured measure_cpu_step(const PlanRequest& req, int steps = 2);

}  // namespace hsipipe::train

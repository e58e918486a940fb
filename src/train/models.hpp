#pragma once
// train/models: the classification networks, named as in the literature and in DeepHyperX, and what
// each accepts from a cache. Everything here is rank-local (no communication).
//
// Input contract of Model::forward: float32, either
//   [N, B]        a pixel's spectrum (cache layout pixel), or
//   [N, B, p, p]  a patch centred on the pixel, band-first (cache layouts patch and cube).
// Output: logits [N, n_classes] (no softmax; use cross-entropy on them).
//
// Spectral models (hu1d, mlp) accept all three layouts: given a patch they take its centre pixel
// [:, :, p/2, p/2] themselves, so a patch cache can be reused for a spectral baseline. A trainer that
// reads a cube cache for a spectral model should ask the shard for patch 1 (Shard::load
// patch_override = 1) to avoid gathering p*p values it then ignores; ModelInfo::spatial says which.
// Spatial models (li3d, hamida3d, hybridsn) need a patch: layout patch or cube, odd p within
// [min_patch, max_patch]. check_model_fits() refuses anything else with a ConfigError before training.
//
// Initialisation is deterministic: make_model(..., seed) seeds torch's global generator and then
// initialises every layer in construction order (DeepHyperX's scheme: Kaiming-normal weights, zero
// biases), so the same (name, bands, patch, n_classes, seed) gives bitwise identical parameters.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "cache/cache.hpp"

namespace hsipipe::train {

struct ModelInfo {
  std::string name;                    ///< "hu1d", "li3d", ... (model_registry())
  std::vector<cache::Layout> layouts;  ///< cache layouts accepted
  bool spatial = false;                ///< true: uses the whole p x p patch; false: the centre spectrum only
  int min_patch = 1;                   ///< smallest patch side accepted (spatial models)
  int max_patch = 1;                   ///< largest patch side accepted (spatial models)
  int min_bands = 1;                   ///< fewest bands the layer stack can take
  std::string description;             ///< reference and layer summary, for --help and reports
};

/// All models, in a fixed order.
const std::vector<ModelInfo>& model_registry();
/// The registry's names joined by `sep` ("hu1d | li3d | ..."); with `last` the final separator instead
/// ("hu1d, li3d, ... or mlp"). Help texts and messages are made from it, never typed by hand.
std::string model_names(const std::string& sep, const std::string& last = "");
/// The entry for NAME; throws ConfigError ("--model: unknown model 'x' (expected hu1d, li3d, ...)").
const ModelInfo& model_info(const std::string& name);

/// Throws ConfigError naming the model, the cache layout / patch / bands and what was expected when
/// the model cannot consume samples of this cache. `patch` is the patch side the samples will have
/// (1 for layout pixel). Call before any training (and before any collective work).
void check_model_fits(const std::string& name, cache::Layout layout, int patch, int bands);

/// One step of a forward pass, recorded by Model::trace() for the memory planner.
struct LayerTrace {
  std::string name;                ///< "conv1", "relu1", "fc", ...
  std::string kind;                ///< "conv1d", "conv2d", "conv3d", "linear", "relu", "tanh", "maxpool1d",
                                   ///< "dropout", "reshape", "centre", "batchnorm"
  std::vector<std::int64_t> out;   ///< output shape of this step (batch dimension included)
  std::int64_t params = 0;         ///< parameters owned by this step
  /// Elements autograd keeps for backward at this step, per sample (e.g. a conv keeps its input, a
  /// relu its output, a dropout its mask), and the element size in bytes of what it keeps.
  std::int64_t saved_per_sample = 0;
  int saved_elem_bytes = 4;
  /// Per-sample elements of a transient buffer the op needs while it runs (im2col columns of a
  /// convolution), released afterwards.
  std::int64_t workspace_per_sample = 0;
};

/// A network: torch::nn::Module with a virtual forward. Construct through make_model().
class Model : public torch::nn::Module {
 public:
  explicit Model(std::string name) : name_(std::move(name)) {}
  ~Model() override = default;
  /// x: [N, B] or [N, B, p, p] float32 (see the header comment); returns logits [N, n_classes].
  virtual torch::Tensor forward(torch::Tensor x) = 0;
  /// Runs forward on x (any batch, no gradient recorded) and returns one entry per layer step.
  std::vector<LayerTrace> trace(torch::Tensor x);
  const std::string& model_name() const noexcept { return name_; }

 protected:
  /// Implementations call this after each step when tracing is on (a no-op otherwise). saves_input /
  /// saves_output: whether autograd keeps this op's input / output for backward (a conv or linear
  /// keeps its input, relu and tanh their output); extra: further per-sample elements kept (dropout
  /// mask, max-pool indices) of extra_bytes each; workspace: per-sample transient elements (im2col);
  /// is_view: the output shares the input's storage (reshape, unsqueeze).
  void record(const char* name, const char* kind, const torch::Tensor& out, std::int64_t params, bool saves_input,
              bool saves_output, std::int64_t extra_saved_per_sample, int extra_bytes,
              std::int64_t workspace_per_sample, bool is_view);
  bool tracing() const noexcept { return trace_ != nullptr; }

 private:
  std::string name_;
  std::vector<LayerTrace>* trace_ = nullptr;
  std::int64_t prev_elems_ = 0;  // per-sample elements of the previous step's output (tracing)
  bool prev_counted_ = false;    // whether that output is already counted as saved
};

/// Builds NAME for `bands` input bands, patch side `patch` (1 for pixel input) and n_classes outputs,
/// after check_model_fits(name, <a layout it accepts>, patch, bands). With a seed, calls
/// torch::manual_seed(seed) first so initialisation is reproducible; without, uses the generator's
/// current state. The model is on the CPU in training mode; move it with ->to(device).
std::shared_ptr<Model> make_model(const std::string& name, int bands, int patch, int n_classes,
                                  std::optional<std::uint64_t> seed = std::nullopt);

/// Number of trainable parameters.
std::int64_t count_parameters(const torch::nn::Module& m);

}  // namespace hsipipe::train

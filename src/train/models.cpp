// train/models: the five networks. Layer definitions follow DeepHyperX (Audebert et al. 2019,
// models.py) with the widths it uses in get_model(), except mlp (see below).
#include "train/models.hpp"

#include <cmath>
#include <sstream>

#include <torch/version.h>

#include "core/error.hpp"
#include "train/models/builtin.hpp"
#include "train/models/torchscript.hpp"

namespace hsipipe::train {

namespace nn = torch::nn;
using cache::Layout;

// ---------------------------------------------------------------------------------------------
// Registry and checks

const std::vector<ModelInfo>& model_registry() {
  static const std::vector<ModelInfo> models = {
      {"hu1d", {Layout::pixel, Layout::patch, Layout::cube}, false, 1, 1, 1,
       "Hu et al. 2015, 1-D spectral CNN: conv1d(1->20, k=ceil(B/9)), maxpool(ceil(k/5)), tanh, fc 100, tanh, fc C"},
      {"li3d", {Layout::patch, Layout::cube}, true, 5, 99, 5,
       "Li et al. 2017, 3-D CNN: conv3d(1->16, 7x3x3, pad 1,0,0), relu, conv3d(16->32, 3x3x3, pad 1,0,0), relu, fc C"},
      {"hamida3d", {Layout::patch, Layout::cube}, true, 3, 99, 3,
       "Hamida et al. 2018, 3-D CNN: conv3d(1->20, 3x3x3), spectral-stride conv pooling, conv3d(20->35, 3x3x3), "
       "pooling, conv3d(35->35, 3x1x1), conv3d(35->35, 2x1x1, stride 2), fc C"},
      {"hybridsn", {Layout::patch, Layout::cube}, true, 9, 99, 13,
       "Roy et al. 2019, HybridSN: conv3d 8 (7x3x3), 16 (5x3x3), 32 (3x3x3), conv2d 64 (3x3), fc 256, dropout 0.4, "
       "fc 128, dropout 0.4, fc C (published with 30 PCA bands, patch 25)"},
      {"mlp", {Layout::pixel, Layout::patch, Layout::cube}, false, 1, 1, 1,
       "Multi-layer perceptron on the spectrum (DeepHyperX 'nn' baseline at 1/8 width): fc 256, relu, fc 512, relu, "
       "fc 256, relu, fc C"},
      {"ssftt", {Layout::patch, Layout::cube}, true, 5, 99, 3,
       "Sun et al. 2022, SSFTT (reference code zgr6010/HSI_SSFTT): conv3d 8 (3x3x3)+BN+relu, conv2d 64 (3x3)+BN+relu, "
       "Gaussian-weighted tokenizer to 4 tokens + class token, 1 transformer encoder layer (dim 64, 8 heads, mlp 8, "
       "dropout 0.1), fc C (published with 30 PCA bands, patch 13; decode --pca 30 --patch 13)"},
      {"spectralformer", {Layout::patch, Layout::cube}, true, 1, 99, 3,
       "Hong et al. 2021, SpectralFormer (reference code danfenghong/IEEE_TGRS_SpectralFormer, mode CAF): group-wise "
       "spectral embedding (a token per band: the p x p patch of bands b-1, b, b+1, circularly) to dim 64 + class "
       "token, 5 pre-norm transformer layers (4 heads of 16, mlp 8, dropout 0.1) with cross-layer adaptive fusion "
       "(before layers 3-5 a conv [1, 2] fuses the layer's input with that of two layers back), LayerNorm + fc C (published patch-wise with all bands, patch 7; "
       "departures: band neighbours fixed at 3, inputs z-scored by the cache instead of min-max scaled)"},
  };
  return models;
}

std::string model_names(const std::string& sep, const std::string& last) {
  const auto& all = model_registry();
  std::string out;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (i) out += (i + 1 == all.size() && !last.empty()) ? last : sep;
    out += all[i].name;
  }
  return out;
}

const ModelInfo& model_info(const std::string& name) {
  for (const auto& m : model_registry())
    if (m.name == name) return m;
  // a user's TorchScript network (train/models/torchscript.hpp): every layout, the whole patch; what it
  // accepts is found by a forward pass (check_torchscript), not by these bounds
  static const ModelInfo scripted{kTorchScriptModel, {Layout::pixel, Layout::patch, Layout::cube}, true, 1, 1 << 20, 1,
                                  "a TorchScript network (--model PATH, torch.jit.script(net).save(PATH)): forward [N, B] or "
                                  "[N, B, p, p] -> logits [N, C] (docs/BYO_NETWORK.md)"};
  if (name == kTorchScriptModel || names_model_file(name)) return scripted;
  throw ConfigError("--model: unknown model '" + name + "' (expected one of " + model_names(", ") +
                    ", or a TorchScript file saved with torch.jit.script(net).save(PATH))");
}

void check_model_fits(const std::string& name, Layout layout, int patch, int bands) {
  const ModelInfo& m = model_info(name);
  if (m.name == kTorchScriptModel) return;  // check_torchscript runs the network on the cache's shape instead
  const std::string who = "model " + name;
  bool layout_ok = false;
  for (auto l : m.layouts) layout_ok |= (l == layout);
  if (!layout_ok) {
    std::ostringstream s;
    s << who << " needs a p x p patch around each pixel (cache layout patch or cube, odd p in [" << m.min_patch
      << ", " << m.max_patch << "]), but the cache has layout " << cache::layout_name(layout)
      << ": decode the cache with --layout patch --patch " << std::max(m.min_patch, 5) << " (or --layout cube)";
    throw ConfigError(s.str());
  }
  if (layout == Layout::pixel && patch != 1)
    throw ConfigError(who + ": layout pixel has patch 1, got patch " + std::to_string(patch));
  if (patch < 1) throw ConfigError(who + ": patch must be >= 1, got " + std::to_string(patch));
  if (m.spatial) {
    if (patch % 2 == 0 || patch < m.min_patch || patch > m.max_patch) {
      std::ostringstream s;
      s << who << " needs an odd patch side in [" << m.min_patch << ", " << m.max_patch << "], got patch " << patch
        << (layout == Layout::cube ? " (cube cache: set the patch with --patch)" : " (cache manifest field 'patch')");
      throw ConfigError(s.str());
    }
  } else if (layout != Layout::pixel && patch % 2 == 0) {
    throw ConfigError(who + " takes the centre pixel of the patch, which needs an odd patch side, got " +
                      std::to_string(patch));
  }
  if (bands < m.min_bands)
    throw ConfigError(who + " needs at least " + std::to_string(m.min_bands) + " bands, the cache has " +
                      std::to_string(bands) + " (manifest field 'n_bands')");
}

std::int64_t count_parameters(const torch::nn::Module& m) {
  std::int64_t n = 0;
  for (const auto& p : m.parameters())
    if (p.requires_grad()) n += p.numel();
  return n;
}

// ---------------------------------------------------------------------------------------------
// Tracing (for the memory planner)

std::vector<LayerTrace> Model::trace(torch::Tensor x) {
  std::vector<LayerTrace> out;
  const bool was_training = is_training();
  eval();  // no dropout randomness: tracing must not consume the generator
  torch::NoGradGuard no_grad;
  trace_ = &out;
  prev_elems_ = x.numel() / std::max<std::int64_t>(1, x.size(0));
  prev_counted_ = true;  // the input batch is accounted separately by the planner
  try {
    forward(x);
  } catch (...) {
    trace_ = nullptr;
    train(was_training);
    throw;
  }
  trace_ = nullptr;
  train(was_training);
  return out;
}

void Model::record(const char* name, const char* kind, const torch::Tensor& out, std::int64_t params,
                   bool saves_input, bool saves_output, std::int64_t extra_saved_per_sample, int extra_bytes,
                   std::int64_t workspace_per_sample, bool is_view) {
  if (!trace_) return;
  LayerTrace t;
  t.name = name;
  t.kind = kind;
  t.out = out.sizes().vec();
  t.params = params;
  const std::int64_t n = std::max<std::int64_t>(1, out.size(0));
  const std::int64_t out_elems = out.numel() / n;
  // Bytes autograd keeps: the input if this op needs it and nobody kept it yet, the output if this op
  // needs it, and extras (dropout mask, max-pool indices). A view shares its input's storage.
  std::int64_t saved_bytes = 0;
  if (saves_input && !prev_counted_) saved_bytes += prev_elems_ * 4;
  if (saves_output) saved_bytes += out_elems * 4;
  saved_bytes += extra_saved_per_sample * extra_bytes;
  t.saved_per_sample = saved_bytes / 4;
  t.saved_elem_bytes = 4;
  if (saved_bytes % 4) {
    t.saved_per_sample = saved_bytes;
    t.saved_elem_bytes = 1;
  }
  t.workspace_per_sample = workspace_per_sample;
  trace_->push_back(std::move(t));
  if (is_view) {
    prev_counted_ = prev_counted_ || saves_input;
  } else {
    prev_counted_ = saves_output;
  }
  prev_elems_ = out_elems;
}

namespace {

// Element size of a dropout mask kept for backward: libtorch 1.x multiplies by a float noise tensor,
// 2.x's native_dropout keeps a bool mask.
constexpr int kDropoutMaskBytes = TORCH_VERSION_MAJOR >= 2 ? 1 : 4;

std::int64_t numel_of(const nn::Module& m) { return count_parameters(m); }

std::int64_t per_sample(const torch::Tensor& t) { return t.numel() / std::max<std::int64_t>(1, t.size(0)); }

/// im2col columns of a convolution per sample: C_in * prod(kernel) * prod(output spatial).
std::int64_t conv_columns(std::int64_t c_in, std::initializer_list<std::int64_t> kernel, const torch::Tensor& out) {
  std::int64_t k = c_in;
  for (auto v : kernel) k *= v;
  std::int64_t spatial = 1;
  for (std::int64_t d = 2; d < out.dim(); ++d) spatial *= out.size(d);
  return k * spatial;
}

void init_kaiming(nn::Module& root) {
  for (auto& m : root.modules(/*include_self=*/false)) {
    auto* c1 = m->as<nn::Conv1d>();
    auto* c2 = m->as<nn::Conv2d>();
    auto* c3 = m->as<nn::Conv3d>();
    auto* l = m->as<nn::Linear>();
    torch::Tensor w, b;
    if (c1) w = c1->weight, b = c1->bias;
    if (c2) w = c2->weight, b = c2->bias;
    if (c3) w = c3->weight, b = c3->bias;
    if (l) w = l->weight, b = l->bias;
    if (!w.defined()) continue;
    torch::NoGradGuard g;
    nn::init::kaiming_normal_(w, 0.0, torch::kFanIn, torch::kReLU);
    if (b.defined()) b.zero_();
  }
}

void check_input(const std::string& model, const torch::Tensor& x, int bands, int patch, bool spatial) {
  const bool ok_pixel = !spatial && x.dim() == 2 && x.size(1) == bands;
  const bool ok_patch = x.dim() == 4 && x.size(1) == bands && x.size(2) == x.size(3) && (!spatial || x.size(2) == patch);
  if (!ok_pixel && !ok_patch) {
    std::ostringstream s;
    s << "model " << model << ": input of shape " << x.sizes() << " does not match "
      << (spatial ? "[N, " + std::to_string(bands) + ", " + std::to_string(patch) + ", " + std::to_string(patch) + "]"
                  : "[N, " + std::to_string(bands) + "] or [N, " + std::to_string(bands) + ", p, p]");
    throw std::invalid_argument(s.str());
  }
}

/// The layers every model repeats, run and recorded (for the memory planner) in one call.
class LayeredModel : public Model {
 public:
  using Model::Model;

 protected:
  torch::Tensor linear(const char* name, nn::Linear& fc, torch::Tensor h) {
    h = fc->forward(h);
    record(name, "linear", h, numel_of(*fc), true, false, 0, 4, 0, false);
    return h;
  }
  torch::Tensor flatten(torch::Tensor h, std::int64_t features) {
    h = h.reshape({-1, features});
    record("flatten", "reshape", h, 0, false, false, 0, 4, 0, true);
    return h;
  }
};

// ---------------------------------------------------------------------------------------------
// Spectral models: take [N, B] or the centre pixel of [N, B, p, p].

class SpectralModel : public LayeredModel {
 public:
  SpectralModel(std::string name, int bands) : LayeredModel(std::move(name)), bands_(bands) {}

 protected:
  torch::Tensor spectrum(const torch::Tensor& x) {
    check_input(model_name(), x, bands_, 0, false);
    if (x.dim() == 2) return x;
    const auto c = x.size(2) / 2;
    auto s = x.select(3, c).select(2, c).contiguous();
    record("centre", "centre", s, 0, false, false, 0, 4, 0, false);
    return s;
  }
  int bands_;
};

class Hu1d final : public SpectralModel {
 public:
  Hu1d(int bands, int n_classes) : SpectralModel("hu1d", bands) {
    kernel_ = static_cast<int>(std::ceil(bands / 9.0));
    pool_ = static_cast<int>(std::ceil(kernel_ / 5.0));
    conv_ = register_module("conv", nn::Conv1d(nn::Conv1dOptions(1, 20, kernel_)));
    pool_m_ = register_module("pool", nn::MaxPool1d(nn::MaxPool1dOptions(pool_)));
    features_ = 20 * ((bands - kernel_ + 1) / pool_);
    fc1_ = register_module("fc1", nn::Linear(features_, 100));
    fc2_ = register_module("fc2", nn::Linear(100, n_classes));
    // DeepHyperX initialises this model with U(-0.05, 0.05) weights and zero biases.
    torch::NoGradGuard g;
    for (auto& p : named_parameters()) {
      if (p.key().find("bias") != std::string::npos) p.value().zero_();
      else p.value().uniform_(-0.05, 0.05);
    }
  }
  torch::Tensor forward(torch::Tensor x) override {
    auto s = spectrum(x).unsqueeze(1);  // [N, 1, B]
    record("unsqueeze", "reshape", s, 0, false, false, 0, 4, 0, true);
    auto h = conv_->forward(s);
    record("conv", "conv1d", h, numel_of(*conv_), true, false, 0, 4, conv_columns(1, {kernel_}, h), false);
    auto in_pool = h;
    h = pool_m_->forward(h);
    record("pool", "maxpool1d", h, 0, true, false, pool_ > 1 ? per_sample(h) * 2 : 0, 4, 0, false);
    h = torch::tanh(h);
    record("tanh1", "tanh", h, 0, false, true, 0, 4, 0, false);
    h = flatten(h, features_);
    h = linear("fc1", fc1_, h);
    h = torch::tanh(h);
    record("tanh2", "tanh", h, 0, false, true, 0, 4, 0, false);
    h = linear("fc2", fc2_, h);
    (void)in_pool;
    return h;
  }

 private:
  int kernel_ = 1, pool_ = 1;
  std::int64_t features_ = 0;
  nn::Conv1d conv_{nullptr};
  nn::MaxPool1d pool_m_{nullptr};
  nn::Linear fc1_{nullptr}, fc2_{nullptr};
};

class Mlp final : public SpectralModel {
 public:
  Mlp(int bands, int n_classes) : SpectralModel("mlp", bands) {
    fc1_ = register_module("fc1", nn::Linear(bands, 256));
    fc2_ = register_module("fc2", nn::Linear(256, 512));
    fc3_ = register_module("fc3", nn::Linear(512, 256));
    fc4_ = register_module("fc4", nn::Linear(256, n_classes));
    init_kaiming(*this);
  }
  torch::Tensor forward(torch::Tensor x) override {
    auto h = spectrum(x);
    int i = 0;
    static const char* fc_names[] = {"fc1", "fc2", "fc3", "fc4"};
    static const char* relu_names[] = {"relu1", "relu2", "relu3"};
    for (auto* fc : {&fc1_, &fc2_, &fc3_}) {
      h = linear(fc_names[i], *fc, h);
      h = torch::relu(h);
      record(relu_names[i], "relu", h, 0, false, true, 0, 4, 0, false);
      ++i;
    }
    h = linear(fc_names[3], fc4_, h);
    return h;
  }

 private:
  nn::Linear fc1_{nullptr}, fc2_{nullptr}, fc3_{nullptr}, fc4_{nullptr};
};

// ---------------------------------------------------------------------------------------------
// Spatial models: [N, B, p, p] -> [N, 1, B, p, p] for the 3-D convolutions.

class SpatialModel : public LayeredModel {
 public:
  SpatialModel(std::string name, int bands, int patch) : LayeredModel(std::move(name)), bands_(bands), patch_(patch) {}

 protected:
  torch::Tensor volume(const torch::Tensor& x) {
    check_input(model_name(), x, bands_, patch_, true);
    auto v = x.unsqueeze(1);
    record("unsqueeze", "reshape", v, 0, false, false, 0, 4, 0, true);
    return v;
  }
  /// Runs conv (3-D) then relu (if `relu`), recording both.
  torch::Tensor conv3(const char* name, const char* relu_name, nn::Conv3d& c, torch::Tensor h, bool relu) {
    const auto c_in = h.size(1);
    const auto& k = c->options.kernel_size();
    h = c->forward(h);
    record(name, "conv3d", h, numel_of(*c), true, false, 0, 4, conv_columns(c_in, {k->at(0), k->at(1), k->at(2)}, h), false);
    if (relu) {
      h = torch::relu(h);
      record(relu_name, "relu", h, 0, false, true, 0, 4, 0, false);
    }
    return h;
  }
  int bands_, patch_;
};

class Li3d final : public SpatialModel {
 public:
  Li3d(int bands, int patch, int n_classes, int n_planes = 16) : SpatialModel("li3d", bands, patch) {
    conv1_ = register_module("conv1", nn::Conv3d(nn::Conv3dOptions(1, n_planes, {7, 3, 3}).padding({1, 0, 0})));
    conv2_ = register_module("conv2",
                             nn::Conv3d(nn::Conv3dOptions(n_planes, 2 * n_planes, {3, 3, 3}).padding({1, 0, 0})));
    features_ = static_cast<std::int64_t>(2 * n_planes) * (bands - 4) * (patch - 4) * (patch - 4);
    fc_ = register_module("fc", nn::Linear(features_, n_classes));
    // DeepHyperX: Xavier-uniform weights, zero biases for this model.
    torch::NoGradGuard g;
    for (auto& p : named_parameters()) {
      if (p.key().find("bias") != std::string::npos) p.value().zero_();
      else nn::init::xavier_uniform_(p.value());
    }
  }
  torch::Tensor forward(torch::Tensor x) override {
    auto h = volume(x);
    h = conv3("conv1", "relu1", conv1_, h, true);
    h = conv3("conv2", "relu2", conv2_, h, true);
    h = flatten(h, features_);
    h = linear("fc", fc_, h);
    return h;
  }

 private:
  std::int64_t features_ = 0;
  nn::Conv3d conv1_{nullptr}, conv2_{nullptr};
  nn::Linear fc_{nullptr};
};

class Hamida3d final : public SpatialModel {
 public:
  Hamida3d(int bands, int patch, int n_classes) : SpatialModel("hamida3d", bands, patch) {
    const std::int64_t pad1 = patch == 3 ? 1 : 0;
    conv1_ = register_module("conv1", nn::Conv3d(nn::Conv3dOptions(1, 20, {3, 3, 3}).padding(pad1)));
    pool1_ = register_module("pool1", nn::Conv3d(nn::Conv3dOptions(20, 20, {3, 1, 1}).stride({2, 1, 1}).padding({1, 0, 0})));
    conv2_ = register_module("conv2", nn::Conv3d(nn::Conv3dOptions(20, 35, {3, 3, 3}).padding({1, 0, 0})));
    pool2_ = register_module("pool2", nn::Conv3d(nn::Conv3dOptions(35, 35, {3, 1, 1}).stride({2, 1, 1}).padding({1, 0, 0})));
    conv3_ = register_module("conv3", nn::Conv3d(nn::Conv3dOptions(35, 35, {3, 1, 1}).padding({1, 0, 0})));
    conv4_ = register_module("conv4", nn::Conv3d(nn::Conv3dOptions(35, 35, {2, 1, 1}).stride({2, 1, 1}).padding({1, 0, 0})));
    {
      torch::NoGradGuard g;
      auto probe = torch::zeros({1, 1, bands, patch, patch});
      features_ = features(probe).numel();
    }
    fc_ = register_module("fc", nn::Linear(features_, n_classes));
    init_kaiming(*this);
  }
  torch::Tensor forward(torch::Tensor x) override {
    auto h = volume(x);
    h = conv3("conv1", "relu1", conv1_, h, true);
    h = conv3("pool1", "", pool1_, h, false);
    h = conv3("conv2", "relu2", conv2_, h, true);
    h = conv3("pool2", "", pool2_, h, false);
    h = conv3("conv3", "relu3", conv3_, h, true);
    h = conv3("conv4", "relu4", conv4_, h, true);
    h = flatten(h, features_);
    h = linear("fc", fc_, h);
    return h;
  }

 private:
  torch::Tensor features(torch::Tensor v) {
    v = torch::relu(conv1_->forward(v));
    v = pool1_->forward(v);
    v = torch::relu(conv2_->forward(v));
    v = pool2_->forward(v);
    v = torch::relu(conv3_->forward(v));
    return torch::relu(conv4_->forward(v));
  }
  std::int64_t features_ = 0;
  nn::Conv3d conv1_{nullptr}, pool1_{nullptr}, conv2_{nullptr}, pool2_{nullptr}, conv3_{nullptr}, conv4_{nullptr};
  nn::Linear fc_{nullptr};
};

class HybridSN final : public SpatialModel {
 public:
  HybridSN(int bands, int patch, int n_classes) : SpatialModel("hybridsn", bands, patch) {
    conv1_ = register_module("conv1", nn::Conv3d(nn::Conv3dOptions(1, 8, {7, 3, 3})));
    conv2_ = register_module("conv2", nn::Conv3d(nn::Conv3dOptions(8, 16, {5, 3, 3})));
    conv3_ = register_module("conv3", nn::Conv3d(nn::Conv3dOptions(16, 32, {3, 3, 3})));
    channels2d_ = 32 * (bands - 12);
    conv4_ = register_module("conv4", nn::Conv2d(nn::Conv2dOptions(channels2d_, 64, 3)));
    features_ = 64 * static_cast<std::int64_t>(patch - 8) * (patch - 8);
    fc1_ = register_module("fc1", nn::Linear(features_, 256));
    drop1_ = register_module("drop1", nn::Dropout(0.4));
    fc2_ = register_module("fc2", nn::Linear(256, 128));
    drop2_ = register_module("drop2", nn::Dropout(0.4));
    fc3_ = register_module("fc3", nn::Linear(128, n_classes));
    init_kaiming(*this);
  }
  torch::Tensor forward(torch::Tensor x) override {
    auto h = volume(x);
    h = conv3("conv1", "relu1", conv1_, h, true);
    h = conv3("conv2", "relu2", conv2_, h, true);
    h = conv3("conv3", "relu3", conv3_, h, true);
    const auto s = h.size(3);
    h = h.reshape({-1, channels2d_, s, s});
    record("to2d", "reshape", h, 0, false, false, 0, 4, 0, true);
    h = conv4_->forward(h);
    record("conv4", "conv2d", h, numel_of(*conv4_), true, false, 0, 4, conv_columns(channels2d_, {3, 3}, h), false);
    h = torch::relu(h);
    record("relu4", "relu", h, 0, false, true, 0, 4, 0, false);
    h = flatten(h, features_);
    h = linear("fc1", fc1_, h);
    h = torch::relu(h);
    record("relu5", "relu", h, 0, false, true, 0, 4, 0, false);
    h = drop1_->forward(h);
    record("drop1", "dropout", h, 0, false, false, per_sample(h), kDropoutMaskBytes, 0, false);
    h = linear("fc2", fc2_, h);
    h = torch::relu(h);
    record("relu6", "relu", h, 0, false, true, 0, 4, 0, false);
    h = drop2_->forward(h);
    record("drop2", "dropout", h, 0, false, false, per_sample(h), kDropoutMaskBytes, 0, false);
    h = linear("fc3", fc3_, h);
    return h;
  }

 private:
  std::int64_t channels2d_ = 0, features_ = 0;
  nn::Conv3d conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr};
  nn::Conv2d conv4_{nullptr};
  nn::Linear fc1_{nullptr}, fc2_{nullptr}, fc3_{nullptr};
  nn::Dropout drop1_{nullptr}, drop2_{nullptr};
};

}  // namespace

std::shared_ptr<Model> make_model(const std::string& name, int bands, int patch, int n_classes,
                                  std::optional<std::uint64_t> seed) {
  const ModelInfo& info = model_info(name);
  if (info.name == kTorchScriptModel) return load_torchscript(name);  // the file's weights: no seed applies
  if (n_classes < 2) throw ConfigError("model " + name + ": needs at least 2 classes, got " + std::to_string(n_classes));
  check_model_fits(name, info.spatial ? Layout::patch : (patch == 1 ? Layout::pixel : Layout::patch), patch, bands);
  if (seed) torch::manual_seed(*seed);
  if (name == "hu1d") return std::make_shared<Hu1d>(bands, n_classes);
  if (name == "mlp") return std::make_shared<Mlp>(bands, n_classes);
  if (name == "li3d") return std::make_shared<Li3d>(bands, patch, n_classes);
  if (name == "hamida3d") return std::make_shared<Hamida3d>(bands, patch, n_classes);
  if (name == "hybridsn") return std::make_shared<HybridSN>(bands, patch, n_classes);
  if (name == "ssftt") return make_ssftt(bands, patch, n_classes);
  if (name == "spectralformer") return make_spectralformer(bands, patch, n_classes);
  throw ConfigError("--model: no factory for '" + name + "'");
}

}  // namespace hsipipe::train

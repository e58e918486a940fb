// train/models/spectralformer: SpectralFormer (Hong, Han, Yao, Gao, Zhang, Plaza and Chanussot, IEEE TGRS
// 2021), after the reference code danfenghong/IEEE_TGRS_SpectralFormer (vit_pytorch.py's ViT, mode 'CAF',
// demo.py's settings). Owns the layer stack, its initialisation and its trace for the planner; the PyTorch
// twin with the same parameter names is scripts/hsipipe_models.py's SpectralFormer (export files load into
// it; its from_reference renames the reference's own state_dicts).
//
// Input [N, B, p, p] (the reference's patch-wise setting: all bands, p = 7). Layers:
//   group-wise spectral embedding: band b's token is the p x p patch of bands b-1, b, b+1 (circularly), in
//   that order, each flattened row-major: [N, B, 3 p^2] (demo.py's gain_neighborhood_band, band_patches 3);
//   linear 3p^2 -> 64; class token + B tokens + position embedding, dropout 0.1
//   5 pre-norm layers: x + attn(LN x) (4 heads of 16, qkv linear without bias, scale 16^-0.5, output
//   linear, dropout 0.1); x + mlp(LN x) (64 -> 8, GELU, dropout, 8 -> 64, dropout)
//   cross-layer adaptive fusion: before layer l = 3, 4, 5, x = conv2d(B+1 -> B+1, kernel [1, 2]) over
//   [x, input of layer l-2] stacked on a last axis (the reference's skipcat), tokens as channels
//   LayerNorm + linear head on the class token.
// Initialisation as the reference: PyTorch's defaults for linears, convolutions and layer norms, position
// embedding and class token N(0, 1), all drawn from torch's global generator (make_model seeds it).
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/version.h>

#include "train/models/builtin.hpp"

namespace hsipipe::train {
namespace {

namespace nn = torch::nn;

constexpr int kDepth = 5, kDim = 64, kHeads = 4, kDimHead = 16, kInner = kHeads * kDimHead, kMlp = 8, kNear = 3;
constexpr double kDropout = 0.1;
// Element size of a dropout mask kept for backward (as models.cpp): libtorch 1.x a float, 2.x a bool.
constexpr int kMaskBytes = TORCH_VERSION_MAJOR >= 2 ? 1 : 4;

std::int64_t per_sample(const torch::Tensor& t) { return t.numel() / std::max<std::int64_t>(1, t.size(0)); }
std::size_t ix(int i) { return static_cast<std::size_t>(i); }

class SpectralFormer final : public Model {
 public:
  SpectralFormer(int bands, int patch, int n_classes) : Model("spectralformer"), bands_(bands), patch_(patch) {
    embed_ = register_module("patch_to_embedding", nn::Linear(kNear * patch * patch, kDim));
    pos_ = register_parameter("pos_embedding", torch::randn({1, bands + 1, kDim}));
    cls_ = register_parameter("cls_token", torch::randn({1, 1, kDim}));
    nn::ModuleList norm1, to_qkv, to_out, norm2, ff1, ff2, skipcat;  // the registered names: norm1.0.weight, ...
    for (int i = 0; i < kDepth; ++i) {
      norm1_.push_back(nn::LayerNorm(nn::LayerNormOptions({kDim})));
      to_qkv_.push_back(nn::Linear(nn::LinearOptions(kDim, 3 * kInner).bias(false)));
      to_out_.push_back(nn::Linear(kInner, kDim));
      norm2_.push_back(nn::LayerNorm(nn::LayerNormOptions({kDim})));
      ff1_.push_back(nn::Linear(kDim, kMlp));
      ff2_.push_back(nn::Linear(kMlp, kDim));
      norm1->push_back(norm1_.back());
      to_qkv->push_back(to_qkv_.back());
      to_out->push_back(to_out_.back());
      norm2->push_back(norm2_.back());
      ff1->push_back(ff1_.back());
      ff2->push_back(ff2_.back());
    }
    for (int i = 0; i + 2 < kDepth; ++i) {
      skipcat_.push_back(nn::Conv2d(nn::Conv2dOptions(bands + 1, bands + 1, {1, 2})));
      skipcat->push_back(skipcat_.back());
    }
    register_module("norm1", norm1);
    register_module("to_qkv", to_qkv);
    register_module("to_out", to_out);
    register_module("norm2", norm2);
    register_module("ff1", ff1);
    register_module("ff2", ff2);
    register_module("skipcat", skipcat);
    head_norm_ = register_module("head_norm", nn::LayerNorm(nn::LayerNormOptions({kDim})));
    head_ = register_module("head", nn::Linear(kDim, n_classes));
    drop_ = register_module("drop", nn::Dropout(kDropout));
  }

  torch::Tensor forward(torch::Tensor x) override {
    check(x);
    auto t = embed(x);
    std::vector<torch::Tensor> inputs;  // the input of each layer, for the fusion two layers on
    for (int i = 0; i < kDepth; ++i) {
      inputs.push_back(t);
      if (i > 1) t = fuse(i, t, inputs[ix(i - 2)]);
      t = layer(i, t);
    }
    auto c = t.select(1, 0);
    record("cls", "reshape", c, 0, false, false, 0, 4, 0, true);
    c = head_norm_->forward(c);
    record("head_norm", "layernorm", c, count_parameters(*head_norm_), true, false, 0, 4, 0, false);
    c = head_->forward(c);
    record("head", "linear", c, count_parameters(*head_), true, false, 0, 4, 0, false);
    return c;
  }

 private:
  void check(const torch::Tensor& x) const {
    if (x.dim() == 4 && x.size(1) == bands_ && x.size(2) == patch_ && x.size(3) == patch_) return;
    std::ostringstream s;
    s << "model spectralformer: input of shape " << x.sizes() << " does not match [N, " << bands_ << ", " << patch_
      << ", " << patch_ << "]";
    throw std::invalid_argument(s.str());
  }

  /// [N, B, p, p] -> [N, 1 + B, 64]: group-wise spectral embedding, class token, positions, dropout.
  torch::Tensor embed(const torch::Tensor& x) {
    auto f = x.flatten(2);  // [N, B, p*p]
    auto g = torch::cat({torch::roll(f, {1}, {1}), f, torch::roll(f, {-1}, {1})}, 2);  // bands b-1, b, b+1
    record("group", "reshape", g, 0, false, false, 0, 4, 0, false);
    auto t = embed_->forward(g);
    record("embed", "linear", t, count_parameters(*embed_), true, false, 0, 4, 0, false);
    t = torch::cat({cls_.expand({t.size(0), -1, -1}), t}, 1) + pos_;
    record("tokens", "add", t, cls_.numel() + pos_.numel(), false, false, 0, 4, 0, false);
    t = drop_->forward(t);
    record("drop0", "dropout", t, 0, false, false, per_sample(t), kMaskBytes, 0, false);
    return t;
  }

  /// Cross-layer adaptive fusion before layer i (>= 2): conv [1, 2] over [t, earlier] with tokens as channels.
  torch::Tensor fuse(int i, const torch::Tensor& t, const torch::Tensor& earlier) {
    const std::string l = "l" + std::to_string(i) + ".";
    auto s = torch::stack({t, earlier}, 3);  // [N, B+1, 64, 2]
    record((l + "stack").c_str(), "reshape", s, 0, false, false, 0, 4, 0, false);
    auto conv = skipcat_[ix(i - 2)];
    auto h = conv->forward(s).squeeze(3);
    record((l + "skipcat").c_str(), "conv2d", h, count_parameters(*conv), true, false, 0, 4, per_sample(s), false);
    return h;
  }

  torch::Tensor attention(int i, const std::string& l, const torch::Tensor& x) {
    const auto n = x.size(0), len = x.size(1);
    auto lin = to_qkv_[ix(i)]->forward(x);
    record((l + "to_qkv").c_str(), "linear", lin, count_parameters(*to_qkv_[ix(i)]), true, true, 0, 4, 0, false);
    auto qkv = lin.reshape({n, len, 3, kHeads, kDimHead}).permute({2, 0, 3, 1, 4});
    auto attn = (torch::matmul(qkv[0], qkv[1].transpose(-1, -2)) * std::pow(kDimHead, -0.5)).softmax(-1);
    record((l + "attn").c_str(), "softmax", attn, 0, false, true, 0, 4, 0, false);
    auto out = torch::matmul(attn, qkv[2]).transpose(1, 2).reshape({n, len, kInner});
    record((l + "attn_v").c_str(), "matmul", out, 0, false, false, 0, 4, 0, false);
    out = to_out_[ix(i)]->forward(out);
    record((l + "to_out").c_str(), "linear", out, count_parameters(*to_out_[ix(i)]), true, false, 0, 4, 0, false);
    out = drop_->forward(out);
    record((l + "drop1").c_str(), "dropout", out, 0, false, false, per_sample(out), kMaskBytes, 0, false);
    return out;
  }

  torch::Tensor mlp(int i, const std::string& l, const torch::Tensor& x) {
    auto h = ff1_[ix(i)]->forward(x);
    record((l + "ff1").c_str(), "linear", h, count_parameters(*ff1_[ix(i)]), true, false, 0, 4, 0, false);
    h = torch::gelu(h);
    record((l + "gelu").c_str(), "gelu", h, 0, true, false, 0, 4, 0, false);
    h = drop_->forward(h);
    record((l + "drop2").c_str(), "dropout", h, 0, false, false, per_sample(h), kMaskBytes, 0, false);
    h = ff2_[ix(i)]->forward(h);
    record((l + "ff2").c_str(), "linear", h, count_parameters(*ff2_[ix(i)]), true, false, 0, 4, 0, false);
    h = drop_->forward(h);
    record((l + "drop3").c_str(), "dropout", h, 0, false, false, per_sample(h), kMaskBytes, 0, false);
    return h;
  }

  /// One pre-norm encoder layer: t + attn(LN t), then t + mlp(LN t).
  torch::Tensor layer(int i, torch::Tensor t) {
    const std::string l = "l" + std::to_string(i) + ".";
    auto h = norm1_[ix(i)]->forward(t);
    record((l + "norm1").c_str(), "layernorm", h, count_parameters(*norm1_[ix(i)]), true, false, 0, 4, 0, false);
    t = attention(i, l, h) + t;
    record((l + "res1").c_str(), "add", t, 0, false, false, 0, 4, 0, false);
    h = norm2_[ix(i)]->forward(t);
    record((l + "norm2").c_str(), "layernorm", h, count_parameters(*norm2_[ix(i)]), true, false, 0, 4, 0, false);
    t = mlp(i, l, h) + t;
    record((l + "res2").c_str(), "add", t, 0, false, false, 0, 4, 0, false);
    return t;
  }

  int bands_, patch_;
  nn::Linear embed_{nullptr}, head_{nullptr};
  torch::Tensor pos_, cls_;
  std::vector<nn::LayerNorm> norm1_, norm2_;
  std::vector<nn::Linear> to_qkv_, to_out_, ff1_, ff2_;
  std::vector<nn::Conv2d> skipcat_;
  nn::LayerNorm head_norm_{nullptr};
  nn::Dropout drop_{nullptr};
};

}  // namespace

std::shared_ptr<Model> make_spectralformer(int bands, int patch, int n_classes) {
  return std::make_shared<SpectralFormer>(bands, patch, n_classes);
}

}  // namespace hsipipe::train

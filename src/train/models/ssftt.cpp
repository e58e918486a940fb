// train/models/ssftt: SSFTT, the spectral-spatial feature tokenization transformer (Sun, Zhao, Zheng
// and Wu, IEEE TGRS 2022), after the reference code zgr6010/HSI_SSFTT (SSFTTnet.py). Owns the layer
// stack, its initialisation and its trace for the planner; the PyTorch twin with the same parameter
// names is scripts/hsipipe_models.py's Ssftt (export files load into it).
//
// Input [N, B, p, p] (the reference: B = 30 PCA components, p = 13). Layers:
//   conv3d(1->8, 3x3x3) + BatchNorm3d + ReLU -> [N, 8, B-2, p-2, p-2]
//   reshape to [N, 8(B-2), p-2, p-2]; conv2d(8(B-2)->64, 3x3) + BatchNorm2d + ReLU -> [N, 64, p-4, p-4]
//   tokenizer: X = [N, (p-4)^2, 64]; A = softmax over pixels of (X wA^T)^T [N, 4, (p-4)^2]; T = A (X wV)
//   class token + T (5 tokens) + position embedding, dropout 0.1
//   one encoder layer: x + attn(LN x) (8 heads, qkv linear with bias, scale dim^-0.5 as the reference,
//   output linear, dropout 0.1); x + mlp(LN x) (64 -> 8, GELU, dropout, 8 -> 64, dropout)
//   linear head on the class token.
// Initialisation as the reference: PyTorch's default for convolutions and linears, wA and wV
// Xavier-normal, position embedding N(0, 0.02), class token 0, head Xavier-uniform weights and N(0, 1e-6)
// bias, all drawn from torch's global generator (make_model seeds it), so a seed fixes the weights.
#include <cmath>
#include <sstream>
#include <stdexcept>

#include <torch/version.h>

#include "train/models/builtin.hpp"

namespace hsipipe::train {
namespace {

namespace nn = torch::nn;

constexpr int kTokens = 4, kDim = 64, kHeads = 8, kMlp = 8;
constexpr double kDropout = 0.1;
// Element size of a dropout mask kept for backward (as models.cpp): libtorch 1.x a float, 2.x a bool.
constexpr int kMaskBytes = TORCH_VERSION_MAJOR >= 2 ? 1 : 4;

std::int64_t per_sample(const torch::Tensor& t) { return t.numel() / std::max<std::int64_t>(1, t.size(0)); }

class Ssftt final : public Model {
 public:
  Ssftt(int bands, int patch, int n_classes) : Model("ssftt"), bands_(bands), patch_(patch) {
    conv3d_ = register_module("conv3d", nn::Conv3d(nn::Conv3dOptions(1, 8, 3)));
    bn3d_ = register_module("bn3d", nn::BatchNorm3d(8));
    channels2d_ = 8 * (bands - 2);
    conv2d_ = register_module("conv2d", nn::Conv2d(nn::Conv2dOptions(channels2d_, kDim, 3)));
    bn2d_ = register_module("bn2d", nn::BatchNorm2d(kDim));
    token_wA_ = register_parameter("token_wA", torch::empty({1, kTokens, kDim}));
    token_wV_ = register_parameter("token_wV", torch::empty({1, kDim, kDim}));
    pos_ = register_parameter("pos_embedding", torch::empty({1, kTokens + 1, kDim}));
    cls_ = register_parameter("cls_token", torch::zeros({1, 1, kDim}));
    ln1_ = register_module("ln1", nn::LayerNorm(nn::LayerNormOptions({kDim})));
    qkv_ = register_module("to_qkv", nn::Linear(kDim, 3 * kDim));
    attn_out_ = register_module("attn_out", nn::Linear(kDim, kDim));
    ln2_ = register_module("ln2", nn::LayerNorm(nn::LayerNormOptions({kDim})));
    mlp1_ = register_module("mlp1", nn::Linear(kDim, kMlp));
    mlp2_ = register_module("mlp2", nn::Linear(kMlp, kDim));
    head_ = register_module("head", nn::Linear(kDim, n_classes));
    drop_ = register_module("drop", nn::Dropout(kDropout));
    torch::NoGradGuard g;
    nn::init::xavier_normal_(token_wA_);
    nn::init::xavier_normal_(token_wV_);
    nn::init::normal_(pos_, 0.0, 0.02);
    nn::init::xavier_uniform_(head_->weight);
    nn::init::normal_(head_->bias, 0.0, 1e-6);
  }

  torch::Tensor forward(torch::Tensor x) override {
    check(x);
    auto h = x.unsqueeze(1);
    record("unsqueeze", "reshape", h, 0, false, false, 0, 4, 0, true);
    h = features(h);
    auto t = tokenize(h);
    t = encoder(t);
    auto c = t.select(1, 0);
    record("cls", "reshape", c, 0, false, false, 0, 4, 0, true);
    h = head_->forward(c);
    record("head", "linear", h, count_parameters(*head_), true, false, 0, 4, 0, false);
    return h;
  }

 private:
  void check(const torch::Tensor& x) const {
    if (x.dim() == 4 && x.size(1) == bands_ && x.size(2) == patch_ && x.size(3) == patch_) return;
    std::ostringstream s;
    s << "model ssftt: input of shape " << x.sizes() << " does not match [N, " << bands_ << ", " << patch_ << ", "
      << patch_ << "]";
    throw std::invalid_argument(s.str());
  }

  /// conv3d + BN + ReLU, to 2-D channels, conv2d + BN + ReLU.
  torch::Tensor features(torch::Tensor h) {
    h = conv3d_->forward(h);
    record("conv3d", "conv3d", h, count_parameters(*conv3d_), true, false, 0, 4, 27 * per_sample(h) / 8, false);
    h = bn3d_->forward(h);
    record("bn3d", "batchnorm", h, count_parameters(*bn3d_), true, false, 0, 4, 0, false);
    h = torch::relu(h);
    record("relu1", "relu", h, 0, false, true, 0, 4, 0, false);
    const auto s = h.size(3);
    h = h.reshape({-1, channels2d_, s, s});
    record("to2d", "reshape", h, 0, false, false, 0, 4, 0, true);
    h = conv2d_->forward(h);
    record("conv2d", "conv2d", h, count_parameters(*conv2d_), true, false, 0, 4, channels2d_ * 9 * h.size(2) * h.size(3),
           false);
    h = bn2d_->forward(h);
    record("bn2d", "batchnorm", h, count_parameters(*bn2d_), true, false, 0, 4, 0, false);
    h = torch::relu(h);
    record("relu2", "relu", h, 0, false, true, 0, 4, 0, false);
    return h;
  }

  /// [N, 64, s, s] -> [N, 1 + 4, 64]: the Gaussian-initialised tokenizer, class token, positions, dropout.
  torch::Tensor tokenize(torch::Tensor h) {
    auto xs = h.flatten(2).transpose(1, 2);  // [N, s*s, 64]
    record("pixels", "reshape", xs, 0, false, false, 0, 4, 0, true);
    auto a = torch::matmul(xs, token_wA_.transpose(1, 2)).transpose(1, 2).softmax(-1);  // [N, 4, s*s]
    record("token_A", "matmul", a, token_wA_.numel(), true, true, 0, 4, 0, false);
    auto vv = torch::matmul(xs, token_wV_);  // [N, s*s, 64]
    record("token_V", "matmul", vv, token_wV_.numel(), false, true, 0, 4, 0, false);
    auto t = torch::matmul(a, vv);  // [N, 4, 64]
    record("tokens", "matmul", t, 0, false, false, 0, 4, 0, false);
    t = torch::cat({cls_.expand({t.size(0), -1, -1}), t}, 1) + pos_;
    record("embed", "add", t, cls_.numel() + pos_.numel(), false, false, 0, 4, 0, false);
    t = drop_->forward(t);
    record("drop0", "dropout", t, 0, false, false, per_sample(t), kMaskBytes, 0, false);
    return t;
  }

  torch::Tensor attention(const torch::Tensor& x) {
    const auto n = x.size(0), len = x.size(1);
    auto lin = qkv_->forward(x);
    record("to_qkv", "linear", lin, count_parameters(*qkv_), true, true, 0, 4, 0, false);
    auto qkv = lin.reshape({n, len, 3, kHeads, kDim / kHeads}).permute({2, 0, 3, 1, 4});
    auto attn = (torch::matmul(qkv[0], qkv[1].transpose(-1, -2)) * std::pow(kDim, -0.5)).softmax(-1);
    record("attn", "softmax", attn, 0, false, true, 0, 4, 0, false);
    auto out = torch::matmul(attn, qkv[2]).transpose(1, 2).reshape({n, len, kDim});
    record("attn_v", "matmul", out, 0, false, false, 0, 4, 0, false);
    out = attn_out_->forward(out);
    record("attn_out", "linear", out, count_parameters(*attn_out_), true, false, 0, 4, 0, false);
    out = drop_->forward(out);
    record("drop1", "dropout", out, 0, false, false, per_sample(out), kMaskBytes, 0, false);
    return out;
  }

  torch::Tensor mlp(const torch::Tensor& x) {
    auto h = mlp1_->forward(x);
    record("mlp1", "linear", h, count_parameters(*mlp1_), true, false, 0, 4, 0, false);
    h = torch::gelu(h);
    record("gelu", "gelu", h, 0, true, false, 0, 4, 0, false);
    h = drop_->forward(h);
    record("drop2", "dropout", h, 0, false, false, per_sample(h), kMaskBytes, 0, false);
    h = mlp2_->forward(h);
    record("mlp2", "linear", h, count_parameters(*mlp2_), true, false, 0, 4, 0, false);
    h = drop_->forward(h);
    record("drop3", "dropout", h, 0, false, false, per_sample(h), kMaskBytes, 0, false);
    return h;
  }

  torch::Tensor encoder(torch::Tensor t) {
    auto h = ln1_->forward(t);
    record("ln1", "layernorm", h, count_parameters(*ln1_), true, false, 0, 4, 0, false);
    t = attention(h) + t;
    record("res1", "add", t, 0, false, false, 0, 4, 0, false);
    h = ln2_->forward(t);
    record("ln2", "layernorm", h, count_parameters(*ln2_), true, false, 0, 4, 0, false);
    t = mlp(h) + t;
    record("res2", "add", t, 0, false, false, 0, 4, 0, false);
    return t;
  }

  int bands_, patch_;
  std::int64_t channels2d_ = 0;
  nn::Conv3d conv3d_{nullptr};
  nn::BatchNorm3d bn3d_{nullptr};
  nn::Conv2d conv2d_{nullptr};
  nn::BatchNorm2d bn2d_{nullptr};
  torch::Tensor token_wA_, token_wV_, pos_, cls_;
  nn::LayerNorm ln1_{nullptr}, ln2_{nullptr};
  nn::Linear qkv_{nullptr}, attn_out_{nullptr}, mlp1_{nullptr}, mlp2_{nullptr}, head_{nullptr};
  nn::Dropout drop_{nullptr};
};

}  // namespace

std::shared_ptr<Model> make_ssftt(int bands, int patch, int n_classes) {
  return std::make_shared<Ssftt>(bands, patch, n_classes);
}

}  // namespace hsipipe::train

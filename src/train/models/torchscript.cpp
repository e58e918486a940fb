// train/models/torchscript: the TorchScript adapter (see torchscript.hpp for the contract).
#include "train/models/torchscript.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include <torch/script.h>
#include <torch/version.h>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/hash.hpp"

namespace hsipipe::train {
namespace {

std::string versions_note() {
  return "libtorch " TORCH_VERSION " reads files written by PyTorch " + std::to_string(TORCH_VERSION_MAJOR) + "." +
         std::to_string(TORCH_VERSION_MINOR) + " or older (Debian's python3-torch); save the network with "
         "torch.jit.script(net).save(PATH) (docs/BYO_NETWORK.md)";
}

std::string first_line(const std::string& s) {
  const auto nl = s.find('\n');
  return s.substr(0, std::min<std::size_t>(nl, 400));
}

std::string shape_str(const torch::Tensor& t) {
  std::ostringstream o;
  o << "[";
  for (std::int64_t i = 0; i < t.dim(); ++i) o << (i ? ", " : "") << t.size(i);
  o << "]";
  return o.str();
}

/// A TorchScript module behind Model: its parameters and buffers registered under their names ('.' -> "__").
class ScriptedModel final : public Model {
 public:
  ScriptedModel(torch::jit::Module m, const std::string& path) : Model(kTorchScriptModel), module_(std::move(m)) {
    for (const auto& p : module_.named_parameters(/*recurse=*/true)) register_parameter(key(p.name), p.value, true);
    for (const auto& b : module_.named_buffers(/*recurse=*/true)) register_buffer(key(b.name), b.value);
    if (parameters().empty()) throw ConfigError("--model " + path + ": the TorchScript network has no parameters to train");
    module_.train(true);
  }
  torch::Tensor forward(torch::Tensor x) override { return module_.forward({std::move(x)}).toTensor(); }
  void train(bool on = true) override {
    Model::train(on);
    module_.train(on);
  }
  torch::jit::Module& module() noexcept { return module_; }

 private:
  static std::string key(std::string name) {
    std::string out;
    for (char c : name) out += c == '.' ? std::string("__") : std::string(1, c);
    return out;
  }
  torch::jit::Module module_;
};

}  // namespace

bool names_model_file(const std::string& value) {
  for (const auto& m : model_registry())
    if (m.name == value) return false;
  std::error_code ec;
  return !value.empty() && std::filesystem::is_regular_file(value, ec);
}

std::string model_file_sha256(const std::string& path) {
  const std::string bytes = fs::read_text(path, std::uint64_t{1} << 34);
  Sha256 h;
  h.update(bytes);
  return h.hex_digest();
}

std::shared_ptr<Model> load_torchscript(const std::string& path) {
  torch::jit::Module m;
  try {
    m = torch::jit::load(path, torch::kCPU);
  } catch (const std::exception& e) {
    throw ConfigError("--model " + path + ": not a TorchScript file libtorch can read (" + first_line(e.what()) + "); " +
                      versions_note());
  }
  if (!m.find_method("forward"))
    throw ConfigError("--model " + path + ": the TorchScript module has no forward method (" + versions_note() + ")");
  return std::make_shared<ScriptedModel>(std::move(m), path);
}

void check_torchscript(const std::string& path, int bands, int patch, int n_classes) {
  auto net = load_torchscript(path);
  std::vector<std::int64_t> shape{2, bands};
  if (patch > 1) shape.insert(shape.end(), {patch, patch});
  const std::string need = "the cache gives [2, " + std::to_string(bands) + (patch > 1 ? ", " + std::to_string(patch) + ", " + std::to_string(patch) : "") +
                           "] (" + std::to_string(bands) + " bands" + (patch > 1 ? ", patch " + std::to_string(patch) : ", pixel spectra") +
                           ") and needs logits [2, " + std::to_string(n_classes) + "] (" + std::to_string(n_classes) + " classes)";
  torch::Tensor out;
  try {
    torch::NoGradGuard ng;
    net->eval();
    const auto gen = at::detail::createCPUGenerator(0x62796f6e);  // "byon"
    c10::IValue v = static_cast<ScriptedModel&>(*net).module().forward({at::randn(shape, gen, torch::kFloat32)});
    if (!v.isTensor()) throw ConfigError("--model " + path + ": forward returned a " + v.tagKind() + ", not a tensor of logits; " + need);
    out = v.toTensor();
  } catch (const ConfigError&) {
    throw;
  } catch (const std::exception& e) {
    throw ConfigError("--model " + path + ": forward on a batch of two failed (" + first_line(e.what()) + "); " + need);
  }
  if (out.dim() != 2 || out.size(0) != 2 || out.size(1) != n_classes)
    throw ConfigError("--model " + path + ": forward gave a tensor of shape " + shape_str(out) + "; " + need);
  if (!out.is_floating_point()) throw ConfigError("--model " + path + ": forward gave " + std::string(c10::toString(out.scalar_type())) + " logits; " + need);
}

void save_torchscript(Model& m, const std::string& path, const std::string& extra) {
  auto* s = dynamic_cast<ScriptedModel*>(&m);
  if (!s) throw ConfigError("export: model " + m.model_name() + " is a built-in network, not a TorchScript one");
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  try {
    torch::jit::ExtraFilesMap files{{"hsipipe.json", extra}};
    s->module().save(tmp, files);
  } catch (const std::exception& e) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    throw IoError(path, std::string("cannot write the TorchScript file: ") + first_line(e.what()));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw IoError(path, "rename of " + tmp + " failed: " + ec.message());
  }
}

}  // namespace hsipipe::train

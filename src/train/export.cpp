#include "train/export.hpp"

#include <filesystem>

#include <nlohmann/json.hpp>
#include <torch/serialize.h>
#include <torch/torch.h>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/outputs.hpp"
#include "core/version.hpp"
#include "train/checkpoint.hpp"
#include "train/predict.hpp"
#include "train/models/torchscript.hpp"

namespace hsipipe::train {
namespace {

using json = nlohmann::json;

/// Parameters then buffers, by their dotted module names ("conv1.weight"), as PyTorch's state_dict names them.
c10::Dict<std::string, at::Tensor> state_dict(torch::nn::Module& net) {
  c10::Dict<std::string, at::Tensor> d;
  for (const auto& p : net.named_parameters(true)) d.insert(p.key(), p.value().detach().to(torch::kCPU).contiguous());
  for (const auto& b : net.named_buffers(true)) d.insert(b.key(), b.value().detach().to(torch::kCPU).contiguous());
  return d;
}

/// N standard-normal inputs (their own generator: the same for every export) and the network's logits.
std::pair<at::Tensor, at::Tensor> examples(Model& net, const ModelInput& in, int n) {
  auto gen = at::detail::createCPUGenerator(0x68736970);  // "hsip"
  std::vector<std::int64_t> shape{n, in.bands};
  if (in.patch > 1) shape.insert(shape.end(), {in.patch, in.patch});
  at::Tensor x = at::randn(shape, gen, torch::kFloat32);
  torch::NoGradGuard ng;
  net.eval();
  return {x, net.forward(x).contiguous()};
}

}  // namespace

void export_model(const ExportOptions& o, std::ostream& log) {
  if (o.examples < 1) throw ConfigError("--examples: must be at least 1");
  outputs::check_output_file(o.out, o.force, "export --out");
  const RunSpec r = read_run(o.run, o.fold, false);
  const ModelInput in = model_input(r, o.run);
  auto net = load_fold_model(r, 0, o.run);
  const CheckpointState st = peek_checkpoint(r.checkpoints[0]);
  const auto [x, logits] = examples(*net, in, o.examples);

  json meta = {{"fold", o.fold},
               {"run", std::filesystem::absolute(o.run).lexically_normal().string()},
               {"checkpoint", r.checkpoints[0]},
               {"epoch", st.epoch},
               {"config", st.config},
               {"provenance", st.provenance},
               {"weights_xxh3", weights_checksum(*net)},
               {"preprocessing", {{"manifest", r.manifest}, {"wavelengths", r.wavelengths}}},
               {"input", in.patch > 1 ? "[N, bands, patch, patch] float32, band-first patch centred on the pixel"
                                      : "[N, bands] float32 spectrum"},
               {"hsipipe", {{"version", kVersion}, {"commit", kGitCommit}}}};
  if (r.model == kTorchScriptModel) {
    // the user's network as TorchScript again, with the fold's trained weights; the record as an extra file
    meta["format"] = "hsipipe-model";
    meta["format_version"] = 1;
    meta["model"] = r.model;
    meta["bands"] = in.bands;
    meta["patch"] = in.patch;
    meta["n_classes"] = in.classes;
    meta["label_values"] = r.label_values;
    net->to(torch::kCPU);
    save_torchscript(*net, o.out, meta.dump(2));
    if (!o.quiet)
      log << "hsipipe export: the TorchScript network of fold " << o.fold << " (" << in.bands << " bands, patch " << in.patch << ", "
          << in.classes << " classes) -> " << o.out << " (torch.jit.load it; its record is the extra file hsipipe.json)\n";
    return;
  }
  c10::impl::GenericList labels(c10::IntType::get());
  for (auto v : r.label_values) labels.push_back(static_cast<std::int64_t>(v));
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  d.insert("format", std::string("hsipipe-model"));
  d.insert("format_version", std::int64_t{1});
  d.insert("model", r.model);
  d.insert("bands", static_cast<std::int64_t>(in.bands));
  d.insert("patch", static_cast<std::int64_t>(in.patch));
  d.insert("n_classes", static_cast<std::int64_t>(in.classes));
  d.insert("label_values", labels);
  d.insert("state_dict", state_dict(*net));
  d.insert("meta", meta.dump());
  d.insert("example_input", x);
  d.insert("example_logits", logits);
  const std::vector<char> bytes = torch::pickle_save(c10::IValue(d));
  fs::write_text_atomic(o.out, std::string(bytes.begin(), bytes.end()));
  if (!o.quiet)
    log << "hsipipe export: " << r.model << " of fold " << o.fold << " (" << in.bands << " bands, patch " << in.patch << ", "
        << in.classes << " classes) -> " << o.out << " (" << bytes.size() << " bytes; torch.load it, layers as scripts/hsipipe_models.py)\n";
}

}  // namespace hsipipe::train

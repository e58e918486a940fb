#include "train/checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <optional>
#include <sstream>

#include <ATen/CPUGeneratorImpl.h>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/hash.hpp"

namespace hsipipe::train {

namespace {

nlohmann::json meta_json(const CheckpointState& st) {
  return {{"format", "hsipipe-checkpoint"}, {"version", 1}, {"fold", st.fold}, {"epoch", st.epoch},
          {"step", st.step}, {"finished", st.finished}, {"world_size", st.world_size}, {"config", st.config},
          {"provenance", st.provenance}, {"progress", st.progress}};
}

CheckpointState from_meta(const std::string& text, const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw FormatError(path, "meta", std::string("not JSON: ") + e.what());
  }
  if (j.value("format", "") != "hsipipe-checkpoint") throw FormatError(path, "meta.format", "not an hsipipe checkpoint");
  CheckpointState st;
  try {
    st.fold = j.at("fold").get<int>();
    st.epoch = j.at("epoch").get<int>();
    st.step = j.at("step").get<std::int64_t>();
    st.finished = j.at("finished").get<bool>();
    st.world_size = j.at("world_size").get<int>();
    st.config = j.at("config");
    st.provenance = j.value("provenance", nlohmann::json::object());
    st.progress = j.at("progress");
  } catch (const std::exception& e) {
    throw FormatError(path, "meta", e.what());
  }
  return st;
}

std::string read_meta(torch::serialize::InputArchive& ar, const std::string& path) {
  c10::IValue v;
  if (!ar.try_read("meta", v) || !v.isString()) throw FormatError(path, "meta", "missing");
  return v.toStringRef();
}


}  // namespace

std::string weights_checksum(torch::nn::Module& model);

namespace {
/// The loaded weights against the checksum they were saved with (a checkpoint altered or damaged on disk).
void check_weights(torch::serialize::InputArchive& ar, const std::string& path, torch::nn::Module& model) {
  const nlohmann::json meta = nlohmann::json::parse(read_meta(ar, path));
  if (!meta.contains("weights_xxh3")) throw FormatError(path, "meta.weights_xxh3", "missing (a checkpoint of an older hsipipe: train this fold again)");
  const std::string have = weights_checksum(model);
  if (have != meta["weights_xxh3"].get<std::string>()) {
    throw FormatError(path, "model", "weights do not match their checksum (weights_xxh3 " + meta["weights_xxh3"].get<std::string>() +
                                         ", loaded " + have + "): the file was altered or damaged");
  }
}
}  // namespace

torch::Tensor cpu_rng_state() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_cpu_rng_state(const torch::Tensor& state) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

std::string weights_checksum(torch::nn::Module& model) {
  Xxh3Stream h;
  auto add = [&](const torch::Tensor& t) {
    const auto c = t.detach().to(torch::kCPU).contiguous();
    h.update(c.data_ptr(), static_cast<std::size_t>(c.numel()) * c.element_size());
  };
  for (const auto& p : model.parameters()) add(p);
  for (const auto& b : model.buffers()) add(b);
  return hex64(h.digest());
}

void save_checkpoint(const std::string& path, const CheckpointState& st, torch::nn::Module& model,
                     torch::optim::Optimizer& opt, const std::vector<torch::Tensor>& rng_states) {
  torch::serialize::OutputArchive ar;
  nlohmann::json meta = meta_json(st);
  meta["weights_xxh3"] = weights_checksum(model);
  ar.write("meta", c10::IValue(meta.dump()));
  torch::serialize::OutputArchive m, o;
  model.save(m);
  opt.save(o);
  ar.write("model", m);
  ar.write("optimizer", o);
  for (std::size_t r = 0; r < rng_states.size(); ++r) ar.write("rng/" + std::to_string(r), rng_states[r]);
  // In memory first: libtorch's file writer throws from a destructor when the disk fills (terminate,
  // exit 134, the temporary file left behind). The file itself is written like every other result.
  std::ostringstream bytes;
  try {
    ar.save_to(bytes);
  } catch (const c10::Error& e) {
    throw IoError(path, std::string("serialise checkpoint: ") + e.what_without_backtrace());
  }
  fs::write_text_atomic(path, std::move(bytes).str());
}

CheckpointState load_checkpoint(const std::string& path, torch::nn::Module& model, torch::optim::Optimizer& opt,
                                std::vector<torch::Tensor>& rng_states) {
  torch::serialize::InputArchive ar;
  try {
    ar.load_from(path);
  } catch (const c10::Error& e) {
    throw FormatError(path, "archive", e.what_without_backtrace());
  }
  CheckpointState st = from_meta(read_meta(ar, path), path);
  try {
    torch::serialize::InputArchive m, o;
    ar.read("model", m);
    ar.read("optimizer", o);
    model.load(m);
    opt.load(o);
    rng_states.clear();
    for (int r = 0; r < st.world_size; ++r) {
      torch::Tensor t;
      ar.read("rng/" + std::to_string(r), t);
      rng_states.push_back(t);
    }
  } catch (const c10::Error& e) {
    throw FormatError(path, "model/optimizer", std::string("does not fit this model and optimizer: ") + e.what_without_backtrace());
  }
  check_weights(ar, path, model);
  return st;
}

CheckpointState load_final_weights(const std::string& path, torch::nn::Module& model) {
  torch::serialize::InputArchive ar;
  try {
    ar.load_from(path);
  } catch (const c10::Error& e) {
    throw FormatError(path, "archive", e.what_without_backtrace());
  }
  CheckpointState st = from_meta(read_meta(ar, path), path);
  if (!st.finished)
    throw FormatError(path, "meta.finished", "false: fold " + std::to_string(st.fold) + " stopped in epoch " + std::to_string(st.epoch) +
                                                 " (train --resume finishes it)");
  try {
    torch::serialize::InputArchive m;
    ar.read("model", m);
    model.load(m);
  } catch (const c10::Error& e) {
    throw FormatError(path, "model", std::string("does not fit this model: ") + e.what_without_backtrace());
  }
  check_weights(ar, path, model);
  return st;
}

nlohmann::json run_identity(const nlohmann::json& config, const nlohmann::json& provenance) {
  nlohmann::json id = nlohmann::json::object();
  nlohmann::json c = config.is_object() ? config : nlohmann::json::object();
  c.erase("epochs");
  id["config"] = c;
  for (const char* k : {"data_checksum", "folds_fingerprint", "n_folds"})
    if (provenance.is_object() && provenance.contains(k)) id[k] = provenance[k];
  return id;
}

std::optional<IdentityDiff> identity_difference(const nlohmann::json& have, const nlohmann::json& want) {
  const nlohmann::json none;  // null: not recorded
  const auto at = [&](const nlohmann::json& j, const std::string& k) -> const nlohmann::json& {
    return j.is_object() && j.contains(k) ? j[k] : none;
  };
  for (const auto& [key, w] : want.items()) {
    if (key == "config") {
      const nlohmann::json& hc = at(have, "config");
      for (const auto& [ck, cw] : w.items())
        if (at(hc, ck) != cw) return IdentityDiff{"config." + ck, at(hc, ck), cw};
      if (hc.is_object())
        for (const auto& [ck, cv] : hc.items())
          if (!w.contains(ck)) return IdentityDiff{"config." + ck, cv, none};
      continue;
    }
    if (at(have, key) != w) return IdentityDiff{key, at(have, key), w};
  }
  return std::nullopt;
}

void check_identity(const std::string& path, const nlohmann::json& have, const nlohmann::json& want, const std::string& want_source) {
  const auto d = identity_difference(have, want);
  if (!d) return;
  const std::string what = (d->have.is_null() ? std::string("(not recorded)") : d->have.dump()) + ", but " + want_source + " says " +
                           d->want.dump() + ": not a checkpoint of this run";
  if (d->field == "data_checksum") throw StaleError(path + ": meta.provenance." + d->field + " is " + what);
  throw FormatError(path, d->field.rfind("config.", 0) == 0 ? "meta." + d->field : "meta.provenance." + d->field, what);
}

void check_fold(const std::string& path, const CheckpointState& st, int fold) {
  if (st.fold != fold)
    throw FormatError(path, "meta.fold", "is " + std::to_string(st.fold) + ", but the file lies in fold-" + std::to_string(fold) +
                                             "/: a checkpoint copied from another fold (its model is fold " + std::to_string(st.fold) + "'s)");
}

CheckpointState peek_checkpoint(const std::string& path) {
  torch::serialize::InputArchive ar;
  try {
    ar.load_from(path);
  } catch (const c10::Error& e) {
    throw FormatError(path, "archive", e.what_without_backtrace());
  }
  return from_meta(read_meta(ar, path), path);
}

}  // namespace hsipipe::train

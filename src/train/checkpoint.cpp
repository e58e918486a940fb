#include "train/checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <mutex>

#include <ATen/CPUGeneratorImpl.h>

#include "core/error.hpp"

namespace hsipipe::train {

namespace {

nlohmann::json meta_json(const CheckpointState& st) {
  return {{"format", "hsipipe-checkpoint"}, {"version", 1}, {"fold", st.fold}, {"epoch", st.epoch},
          {"step", st.step}, {"finished", st.finished}, {"world_size", st.world_size}, {"config", st.config},
          {"progress", st.progress}};
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

void fsync_path(const std::string& p) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError(p, "open", errno);
  const int rc = ::fsync(fd);
  const int e = errno;
  ::close(fd);
  if (rc != 0) throw IoError(p, "fsync", e);
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

void save_checkpoint(const std::string& path, const CheckpointState& st, torch::nn::Module& model,
                     torch::optim::Optimizer& opt, const std::vector<torch::Tensor>& rng_states) {
  torch::serialize::OutputArchive ar;
  ar.write("meta", c10::IValue(meta_json(st).dump()));
  torch::serialize::OutputArchive m, o;
  model.save(m);
  opt.save(o);
  ar.write("model", m);
  ar.write("optimizer", o);
  for (std::size_t r = 0; r < rng_states.size(); ++r) ar.write("rng/" + std::to_string(r), rng_states[r]);
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  try {
    ar.save_to(tmp);
    fsync_path(tmp);
  } catch (const c10::Error& e) {
    std::remove(tmp.c_str());
    throw IoError(path, std::string("write checkpoint: ") + e.what_without_backtrace());
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw IoError(path, "rename", ec.value());
  }
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
  return st;
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

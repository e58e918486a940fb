// train/predict_run: what `hsipipe predict` and `hsipipe export` read from a training run: RUN/preprocessing.json
// (or the cache's manifest for an older run), the folds' finished checkpoints, and the model they hold.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/transform.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/seal.hpp"
#include "train/checkpoint.hpp"
#include "train/models.hpp"
#include "train/models/torchscript.hpp"
#include "train/predict.hpp"
#include "train/run.hpp"

namespace hsipipe::train {

namespace stdfs = std::filesystem;
using json = nlohmann::json;

std::uint16_t map_nodata(const std::vector<std::int32_t>& label_values) {
  std::int32_t top = 0;
  bool has_zero = false;
  for (auto v : label_values) {
    if (v < 0 || v > 65534) throw ConfigError("label value " + std::to_string(v) + ": a class map stores labels 0 .. 65534");
    top = std::max(top, v);
    has_zero = has_zero || v == 0;
  }
  return has_zero ? static_cast<std::uint16_t>(top + 1) : std::uint16_t{0};
}


json RunSpec::to_json() const {
  return {{"manifest", manifest}, {"wavelengths", wavelengths}, {"model", model}, {"precision", precision},
          {"model_sha256", model_sha256}, {"folds", folds}, {"checkpoints", checkpoints}, {"label_values", label_values}};
}

RunSpec RunSpec::from_json(const json& j) {
  RunSpec r;
  r.manifest = j.at("manifest");
  r.wavelengths = j.at("wavelengths").get<std::vector<double>>();
  r.model = j.at("model").get<std::string>();
  r.precision = j.at("precision").get<std::string>();
  r.model_sha256 = j.value("model_sha256", "");
  r.folds = j.at("folds").get<std::vector<int>>();
  r.checkpoints = j.at("checkpoints").get<std::vector<std::string>>();
  r.label_values = j.at("label_values").get<std::vector<std::int32_t>>();
  return r;
}

ModelInput model_input(const RunSpec& r, const std::string& run) {
  ModelInput in;
  in.bands = cache::preprocessor_from(r.manifest, run + "/preprocessing.json").out_bands();
  in.classes = static_cast<int>(r.label_values.size());
  const cache::Layout layout = cache::layout_from_name(r.manifest.value("layout", "pixel"));
  const int cache_patch = layout == cache::Layout::pixel ? 1 : r.manifest.value("patch", 1);
  in.patch = model_info(r.model).spatial ? cache_patch : 1;
  return in;
}

std::string scripted_model_path(const RunSpec& r, const std::string& run) {
  const std::string path = run + "/model.pt";
  if (!stdfs::exists(path))
    throw FormatError(path, "file", "missing: the run's TorchScript network (train --model FILE keeps a copy there)");
  const std::string have = model_file_sha256(path);
  if (have != r.model_sha256)
    throw FormatError(path, "sha256", have + ", but the run's checkpoints were trained with the network of SHA-256 " + r.model_sha256 +
                                          " (meta.config.model_sha256): the file was replaced");
  return path;
}

std::shared_ptr<Model> load_fold_model(const RunSpec& r, std::size_t i, const std::string& run) {
  const ModelInput in = model_input(r, run);
  auto net = make_model(r.model == kTorchScriptModel ? scripted_model_path(r, run) : r.model, in.bands, in.patch, in.classes);
  load_final_weights(r.checkpoints.at(i), *net);
  net->eval();
  return net;
}

namespace {

/// RUN/preprocessing.json, or for a run trained before it existed, the manifest of the cache its folds name.
json read_preprocessing(const std::string& run) {
  const std::string path = run + "/preprocessing.json";
  if (stdfs::exists(path)) {
    const std::string text = fs::read_text(path);
    json j;
    try {
      j = json::parse(text);
    } catch (const std::exception& e) {
      throw FormatError(path, "json", e.what());
    }
    if (!j.is_object() || j.value("format", "") != "hsipipe-preprocessing" || !j.contains("manifest"))
      throw FormatError(path, "format", "not an hsipipe preprocessing record");
    check_seal(text, "record_xxh3", path);  // an edited shift or label_values would map silently wrong
    return j;
  }
  std::string cache_dir;
  for (const auto& e : stdfs::directory_iterator(run))
    if (stdfs::exists(e.path() / "metrics.json"))
      cache_dir = json::parse(std::ifstream(e.path() / "metrics.json")).at("run").value("cache_dir", "");
  if (cache_dir.empty() || !stdfs::exists(cache_dir + "/manifest.json"))
    throw FormatError(path, "file", "missing, and no cache of the run to read the preprocessing from (train with this hsipipe writes it)");
  const auto c = cache::CacheReader::open(cache_dir);
  return {{"manifest", c.manifest()}, {"wavelengths", c.wavelengths()}};
}

std::string checkpoint_path(const PredictOptions& o, int f) { return detail::fold_dir(o.run, f) + "/checkpoint.pt"; }

/// k of the run's folds file, from the first fold checkpoint found.
int run_folds(const PredictOptions& o) {
  if (!stdfs::is_directory(o.run)) throw ConfigError("--run " + o.run + ": not a folder");
  for (int f = 0; f < 4096; ++f)
    if (stdfs::exists(checkpoint_path(o, f))) {
      const int k = peek_checkpoint(checkpoint_path(o, f)).provenance.value("n_folds", 0);
      if (k < 2 || k > 4096) throw FormatError(checkpoint_path(o, f), "meta.provenance.n_folds", std::to_string(k) + " (expected 2 .. 4096)");
      return k;
    }
  throw ConfigError("--run " + o.run + ": no fold-I/checkpoint.pt (not the --out folder of a finished hsipipe train)");
}

/// The folds whose final models map (of k), each a finished checkpoint of this run: its own fold's (meta.fold),
/// of the run's identity (preprocessing.json "run": options, cache, folds; for an older run, fold r.folds[0]'s).
void choose_checkpoints(const PredictOptions& o, int k, const std::string& checksum, const json& identity, RunSpec& r) {
  json want = identity;
  const auto ckpt = [&](int f) { return checkpoint_path(o, f); };
  if (o.ensemble) {
    for (int f = 0; f < k; ++f) r.folds.push_back(f);
  } else {
    if (o.fold < 0 || o.fold >= k)
      throw ConfigError("--fold " + std::to_string(o.fold) + ": the run has k = " + std::to_string(k) + " folds (0 .. " + std::to_string(k - 1) + ")");
    r.folds.push_back(o.fold);
  }
  for (int f : r.folds) {
    const std::string p = ckpt(f);
    if (!stdfs::exists(p)) throw ConfigError("--run " + o.run + ": fold " + std::to_string(f) + " has no checkpoint.pt (" + p + "): train it first");
    const CheckpointState st = peek_checkpoint(p);
    check_fold(p, st, f);
    const json id = run_identity(st.config, st.provenance);
    if (want.is_null()) want = id;
    check_identity(p, id, want, identity.is_null() ? "fold " + std::to_string(r.folds[0]) + "'s checkpoint" : o.run + "/preprocessing.json");
    if (!st.finished)
      throw FormatError(p, "meta.finished", "false: fold " + std::to_string(f) + " did not finish training (train --resume finishes it)");
    const std::string have = st.provenance.value("data_checksum", "");
    if (have != checksum)
      throw StaleError(p + ": trained on a cache with data_checksum " + have + ", but the run's preprocessing.json describes " + checksum);
    const std::string model = st.config.value("model", "");
    if (!r.model.empty() && model != r.model)
      throw FormatError(p, "meta.config.model", model + ", but fold " + std::to_string(r.folds[0]) + " is a " + r.model + ": not one run");
    r.model = model;
    r.model_sha256 = st.config.value("model_sha256", "");
    r.precision = st.config.value("precision", "fp32");
    r.checkpoints.push_back(p);
  }
}

}  // namespace

void check_fold_checkpoints(const std::string& run) {
  std::error_code ec;
  if (!stdfs::is_directory(run, ec)) return;  // summarize_run names it
  for (const auto& e : stdfs::directory_iterator(run, ec)) {
    const std::string name = e.path().filename().string();
    const std::string ckpt = (e.path() / "checkpoint.pt").string(), metrics = (e.path() / "metrics.json").string();
    if (name.rfind("fold-", 0) != 0 || !stdfs::exists(ckpt, ec) || !stdfs::exists(metrics, ec)) continue;
    int f = -1;
    try {
      std::size_t used = 0;
      f = std::stoi(name.substr(5), &used);
      if (used != name.size() - 5) continue;
    } catch (const std::exception&) {
      continue;
    }
    const CheckpointState st = peek_checkpoint(ckpt);
    check_fold(ckpt, st, f);
    json m;
    try {
      m = json::parse(fs::read_text(metrics)).at("run");
    } catch (const std::exception& ex) {
      throw FormatError(metrics, "run", ex.what());
    }
    const json recorded = {{"data_checksum", m.value("cache_checksum", "")},
                           {"folds_fingerprint", m.value("folds_fingerprint", "")},
                           {"n_folds", m.value("n_folds", 0)}};
    check_identity(ckpt, run_identity(st.config, st.provenance), run_identity(m.value("config", json::object()), recorded),
                   metrics + " (the fold's results)");
  }
}

RunSpec read_run(const std::string& run, int fold, bool ensemble) {
  PredictOptions o;
  o.run = run;
  o.fold = fold;
  o.ensemble = ensemble;
  const int k = run_folds(o);
  const json pp = read_preprocessing(o.run);
  RunSpec r;
  r.manifest = pp.at("manifest");
  r.wavelengths = pp.value("wavelengths", std::vector<double>{});
  r.label_values = r.manifest.at("label_values").get<std::vector<std::int32_t>>();
  choose_checkpoints(o, k, r.manifest.value("data_checksum", ""), pp.contains("run") ? pp["run"] : json(), r);
  map_nodata(r.label_values);  // refuses labels a map cannot store
  return r;
}

}  // namespace hsipipe::train

// hsipipe predict: a trained run applied to whole scenes (train/predict.hpp), one rank per process under
// mpiexec (ranks split the rows). Exit codes as every command: 2 bad option, a run without finished
// checkpoints or a wrong --fold; 3 a scene that does not fit the run (bands, wavelengths, data type) or a
// damaged checkpoint; 4 I/O; 5 a checkpoint of another cache.
#include <algorithm>
#include <filesystem>
#include <iostream>

#include "cli/collective_errors.hpp"
#include "cli/command.hpp"
#include "cli/scene_list.hpp"
#include "core/error.hpp"
#include "core/outputs.hpp"
#include "dist/mpi.hpp"
#include "train/predict.hpp"

namespace hsipipe::cli {
namespace {

/// The scenes of --scene-list FILE (cli/scene_list.hpp), else of the command line (--scene, with --labels / --name
/// in the same order), else of the config's
/// [scene.NAME] sections (path, labels, variable, axes, image_size; relative paths against the working
/// directory, then the config file's folder).
std::vector<train::PredictScene> scenes_of(const Parsed& p) {
  const auto& vm = p.vm;
  std::vector<train::PredictScene> out;
  const auto list = [&](const char* k) { return vm.count(k) ? vm[k].as<std::vector<std::string>>() : std::vector<std::string>{}; };
  const auto stem = [](const io::SceneSpec& s) { return std::filesystem::path(s.path).stem().string(); };
  if (vm.count("scene-list")) {
    for (auto& l : listed_scenes(p, "predict", {"labels", "name", "only"}))
      out.push_back({std::move(l.scene), std::move(l.name), std::move(l.labels), std::move(l.origin)});
    return out;
  }
  if (vm.count("scene")) {
    const auto scenes = list("scene"), labels = list("labels"), names = list("name");
    if (!labels.empty() && labels.size() != scenes.size())
      throw ConfigError("predict: " + std::to_string(scenes.size()) + " --scene but " + std::to_string(labels.size()) + " --labels (one each, in order)");
    if (!names.empty() && names.size() != scenes.size())
      throw ConfigError("predict: " + std::to_string(scenes.size()) + " --scene but " + std::to_string(names.size()) + " --name (one each, in order)");
    for (std::size_t i = 0; i < scenes.size(); ++i) {
      train::PredictScene s;
      s.scene = io::SceneSpec::parse(scenes[i]);
      s.name = names.empty() ? stem(s.scene) : names[i];
      if (!labels.empty()) s.labels = io::SceneSpec::parse(labels[i]);
      out.push_back(std::move(s));
    }
    return out;
  }
  const std::string base = p.config_path.empty() ? "." : std::filesystem::path(p.config_path).parent_path().string();
  const auto resolve = [&](const std::string& v) {
    return std::filesystem::exists(io::SceneSpec::parse(v).path) || v.find("://") != std::string::npos ? v : (std::filesystem::path(base) / v).string();
  };
  const auto only = list("only");
  for (const auto& name : only)
    if (std::none_of(p.sections.begin(), p.sections.end(), [&](const auto& sec) { return sec.first == "scene." + name; })) throw ConfigError("--only " + name + ": " + p.config_path + " has no [scene." + name + "] section");
  for (const auto& [sec, kv] : p.sections) {
    if (sec.rfind("scene.", 0) != 0) throw ConfigError(p.config_path + ": unknown section [" + sec + "] (scenes are [scene.NAME] sections)");
    if (!only.empty() && std::find(only.begin(), only.end(), sec.substr(6)) == only.end()) continue;
    if (!kv.count("path")) throw ConfigError(p.config_path + ": [" + sec + "] has no path");
    train::PredictScene s;
    s.scene = io::SceneSpec::parse(resolve(kv.at("path")));
    if (kv.count("variable")) s.scene.variable = kv.at("variable");
    if (kv.count("axes")) s.scene.axes = kv.at("axes");
    if (kv.count("image_size")) s.scene.set_image_size(kv.at("image_size"), p.config_path + ": [" + sec + "] image_size");
    s.name = sec.substr(6);
    if (kv.count("labels")) {
      s.labels = io::SceneSpec::parse(resolve(kv.at("labels")));
      if (kv.count("labels_variable")) s.labels->variable = kv.at("labels_variable");
    }
    out.push_back(std::move(s));
  }
  return out;
}

int run_predict(int argc, char** argv) {
  train::PredictOptions d;
  po::options_description desc("predict options");
  desc.add_options()
      ("run", po::value<std::string>(), "run directory of hsipipe train (its --out)")
      ("fold", po::value<int>(), "map with this fold's final model")
      ("ensemble", po::bool_switch(), "map with all k folds' final models, averaging their softmax scores (the default without --fold)")
      ("scene", po::value<std::vector<std::string>>()->multitoken(), "PATH[:VAR] of a scene to map (repeatable); default: the config's [scene.NAME] sections")
      ("scene-list", po::value<std::string>(), "FILE: the scenes to map, one a line, SCENE[:VAR] [LABELS[:VAR]|-] [NAME], # comments, paths relative to FILE (INI: scene_list; as decode's)")
      ("labels", po::value<std::vector<std::string>>()->multitoken(), "reference labels of each --scene, in order: the map's accuracy on them")
      ("name", po::value<std::vector<std::string>>()->multitoken(), "output name of each --scene, in order (default: the file's stem)")
      ("only", po::value<std::vector<std::string>>()->multitoken(), "map only these [scene.NAME] sections of --config (repeatable; default: all)")
      ("out", po::value<std::string>(), "output folder: NAME_class.tif, NAME_class.img/.hdr (ENVI), NAME_preview.png, NAME_predict.json")
      ("probabilities", po::bool_switch(), "also NAME_probabilities.npy: float16 [H, W, C] softmax scores")
      ("device", po::value<std::string>()->default_value(d.device), "auto | cpu | cuda (one GPU per rank: local rank)")
      ("batch", po::value<std::int64_t>()->default_value(d.batch, "auto"), "pixels per forward pass and rank (auto: on a CPU, as many as keep the largest layer output at most 16 MiB, 32 to 1024: larger ones were slower, hybridsn 33 s at 1024 against 17 s at 256; on a GPU 1024)")
      ("force", po::bool_switch(), "replace the earlier maps of a scene of the same name in --out")
      ("quiet", po::bool_switch(), "no summary line per scene");
  const Parsed a = parse(argc, argv, "predict",
                         "--run RUN_DIR [--fold I | --ensemble] (--scene PATH[:VAR] ... | --scene-list FILE) --out DIR [options]\n"
                         "       (under mpiexec -n R: ranks split the rows; the map is the same for any R)",
                         desc);
  if (a.help) return 0;
  const auto& vm = a.vm;
  for (const char* req : {"run", "out"})
    if (!vm.count(req)) throw ConfigError(std::string("hsipipe predict: --") + req + " is required");
  train::PredictOptions o;
  o.ensemble = vm["ensemble"].as<bool>();
  if (o.ensemble && vm.count("fold")) throw ConfigError("hsipipe predict: give one of --fold I and --ensemble");
  if (vm.count("fold")) o.fold = vm["fold"].as<int>();
  else o.ensemble = true;
  if (vm.count("only") && vm.count("scene")) throw ConfigError("hsipipe predict: --only selects [scene.NAME] sections of --config; not with --scene");
  o.run = vm["run"].as<std::string>();
  o.out = vm["out"].as<std::string>();
  o.scenes = scenes_of(a);
  o.device = vm["device"].as<std::string>();
  o.batch = vm["batch"].as<std::int64_t>();
  if (o.batch < 0) throw ConfigError("--batch: must be at least 1 (or 0 / unset: auto)");
  o.probabilities = vm["probabilities"].as<bool>();
  o.quiet = vm["quiet"].as<bool>();
  o.force = vm["force"].as<bool>();
  for (const auto& s : o.scenes) outputs::check_file_stem(s.name, "predict --name (or the INI's [scene.NAME])");
  for (std::size_t i = 0; i < o.scenes.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (o.scenes[i].name == o.scenes[j].name)
        throw ConfigError("predict: two scenes named '" + o.scenes[i].name + "' would write the same files: give --name for each");

  dist::Environment env(&argc, &argv);
  const dist::Comm world(MPI_COMM_WORLD);
  return run_reporting_errors("predict", world, [&] { return train::predict(o, world, std::cout); });
}

}  // namespace

HSIPIPE_COMMAND("predict", "map whole scenes with a trained run's model (one fold or the k-fold ensemble) into GeoTIFF/ENVI class maps", run_predict);

}  // namespace hsipipe::cli

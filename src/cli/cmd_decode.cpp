// hsipipe decode: collective decode of scenes into one cache (src/cache/decode.hpp).
//   mpiexec -n R hsipipe decode --config config/demo.ini
//   mpiexec -n R hsipipe decode --scene a.hdr --labels a_gt.hdr --layout patch --patch 5 --out cache/a
#include <filesystem>
#include <iostream>

#include "cache/decode.hpp"
#include "cache/sink.hpp"
#include "io/scene.hpp"
#include "cli/collective_errors.hpp"
#include "cli/command.hpp"
#include "cli/scene_list.hpp"
#include "core/big_alloc.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "dist/collective.hpp"
#include "dist/mpi.hpp"

namespace hsipipe::cli {
namespace {

/// A scene whose data or labels are an HDF5 dataset: the ones --axes orders
bool uses_axes(const cache::SceneInput& s) {
  return io::opens_as_hdf5(s.scene.path) || (s.labels && io::opens_as_hdf5(s.labels->path));
}

/// The command's options (also the INI keys of its [decode] section).
po::options_description decode_options() {
  po::options_description d("decode options");
  d.add_options()
      ("scene", po::value<std::vector<std::string>>()->composing(), "scene PATH[:VAR] (repeatable, in order)")
      ("labels", po::value<std::vector<std::string>>()->composing(), "labels PATH[:VAR] for each --scene, in order (all or none)")
      ("name", po::value<std::vector<std::string>>()->composing(), "scene names for each --scene (default: file stem)")
      ("scene-list", po::value<std::string>(), "FILE: one scene a line, SCENE[:VAR] [LABELS[:VAR]|-] [NAME], # comments, paths relative to FILE (INI: scene_list)")
      ("axes", po::value<std::string>()->default_value("hwb"), "HDF5 input axis order: hwb | bhw | whb")
      ("image-size", po::value<std::string>(), "ROWSxCOLS of 2-D MATLAB [bands x pixels] scenes, pixels column-major (default: the file's nRow/nCol, lines/cols or nr/nc)")
      ("drop-bands", po::value<std::string>()->default_value(""), "bands to drop, 1-based: 108-112,154-167,224")
      ("bad-bands-from-header", po::bool_switch(), "drop the bands any scene header's bbl marks bad")
      ("ignore-label", po::value<int>()->default_value(0), "label value of unlabeled pixels")
      ("layout", po::value<std::string>()->default_value("pixel"), "pixel | patch | cube")
      ("patch", po::value<int>()->default_value(0), "patch side P (odd); required for --layout patch")
      ("border", po::value<std::string>()->default_value("reflect"), "patch border outside the scene: reflect | zero")
      ("dtype", po::value<std::string>()->default_value("float32"), "float32 | float16")
      ("normalize", po::value<std::string>()->default_value("zscore"), "zscore | minmax | none")
      ("stats-over", po::value<std::string>()->default_value("labeled"), "labeled | all-pixels")
      ("pca", po::value<int>()->default_value(0), "project onto the first K principal components (0: off)")
      ("backend", po::value<std::string>()->default_value("npy"), "h5 | npy")
      ("out", po::value<std::string>(), "cache directory to create")
      ("force", po::bool_switch(), "replace an existing cache built from other sources/parameters (refused without it), or rebuild a current one")
      ("memory-mb", po::value<std::uint64_t>()->default_value(1024), "per rank: decoded samples or row blocks kept between passes (beyond it they are decoded again; an ENVI scene's pixel and cube rows always are)")
      ("huge-pages", po::value<bool>()->default_value(true, "on"), "on | off: transparent huge pages for large buffers (off where memory is fragmented, docs/KNOBS.md)")
      ("no-progress", po::bool_switch(), "no progress lines");
  return d;
}

/// The scenes of the command line's --scene (with --labels and --name paired in order).
std::vector<cache::SceneInput> command_line_scenes(const po::variables_map& vm, const std::string& axes, const std::string& image_size) {
  std::vector<cache::SceneInput> out;
  const auto scenes = vm["scene"].as<std::vector<std::string>>();
  const auto labels = vm.count("labels") ? vm["labels"].as<std::vector<std::string>>() : std::vector<std::string>{};
  const auto names = vm.count("name") ? vm["name"].as<std::vector<std::string>>() : std::vector<std::string>{};
  if (!labels.empty() && labels.size() != scenes.size())
    throw ConfigError("decode: " + std::to_string(scenes.size()) + " --scene but " + std::to_string(labels.size()) +
                      " --labels (give one per scene, or none for prediction caches)");
  if (!names.empty() && names.size() != scenes.size())
    throw ConfigError("decode: --name must be given once per --scene");
  for (std::size_t i = 0; i < scenes.size(); ++i) {
    cache::SceneInput in;
    in.scene = io::SceneSpec::parse(scenes[i]);
    in.scene.axes = axes;
    if (!image_size.empty()) in.scene.set_image_size(image_size, "--image-size");
    in.name = names.empty() ? std::filesystem::path(in.scene.path).stem().string() : names[i];
    if (names.empty() && scenes.size() > 1) in.name += "_" + std::to_string(i);
    if (!labels.empty()) {
      in.labels = io::SceneSpec::parse(labels[i]);
      in.labels->axes = axes;
    }
    out.push_back(in);
  }
  return out;
}

/// The scenes of the config file's [scene.NAME] sections (paths relative to the working directory, else to the file).
std::vector<cache::SceneInput> config_scenes(const Parsed& p, const std::string& axes, const std::string& image_size) {
  const auto& vm = p.vm;
  std::vector<cache::SceneInput> out;
  // --labels and --name pair with the command line's --scene, in order: with scenes from the config
  // they would pair with nothing (they were silently dropped)
  for (const char* opt : {"labels", "name"})
    if (vm.count(opt))
      throw ConfigError(std::string("decode: --") + opt + " needs --scene on the command line" +
                        (p.config_path.empty() ? std::string()
                                               : " (the scenes of " + p.config_path + " are its [scene.NAME] sections: set " +
                                                     (std::string(opt) == "labels" ? "labels = PATH" : "the NAME") + " there)"));
  const std::string base = p.config_path.empty() ? std::string(".")
                                                 : std::filesystem::path(p.config_path).parent_path().string();
  auto resolve = [&](const std::string& v) {
    io::SceneSpec s = io::SceneSpec::parse(v);
    if (!s.path.empty() && std::filesystem::path(s.path).is_relative() && s.path.find("://") == std::string::npos &&
        !std::filesystem::exists(s.path))
      s = io::SceneSpec::parse((std::filesystem::path(base) / v).string());
    return s;
  };
  for (const auto& [sec, kv] : p.sections) {
    if (sec.rfind("scene.", 0) != 0)  // a misspelt [scene.NAME] would lose its scene without a word
      throw ConfigError(p.config_path + ": unknown section [" + sec + "] (scenes are [scene.NAME] sections)");
    cache::SceneInput in;
    in.name = sec.substr(6);
    auto it = kv.find("path");
    if (it == kv.end()) throw ConfigError(p.config_path + ": section [" + sec + "] has no path");
    in.scene = resolve(it->second);
    if (auto v = kv.find("variable"); v != kv.end()) in.scene.variable = v->second;
    in.scene.axes = kv.count("axes") ? kv.at("axes") : axes;
    if (auto v = kv.find("image_size"); v != kv.end() || !image_size.empty())
      in.scene.set_image_size(v != kv.end() ? v->second : image_size,
                              v != kv.end() ? p.config_path + ": [" + sec + "] image_size" : "--image-size");
    if (auto l = kv.find("labels"); l != kv.end() && !l->second.empty()) {
      in.labels = resolve(l->second);
      if (auto v = kv.find("labels_variable"); v != kv.end()) in.labels->variable = v->second;
      in.labels->axes = in.scene.axes;
    }
    if (kv.count("axes") && !uses_axes(in))
      throw ConfigError(p.config_path + ": section [" + sec + "]: axes orders the dimensions of HDF5 datasets (.h5, .hdf5, .he5), and " +
                        "neither " + in.scene.path + " nor its labels is one");
    for (const auto& [k, v] : kv)
      if (k != "path" && k != "labels" && k != "variable" && k != "labels_variable" && k != "axes" && k != "image_size")
        throw ConfigError(p.config_path + ": section [" + sec + "]: unknown key '" + k +
                          "' (expected path, labels, variable, labels_variable, axes, image_size)");
    out.push_back(in);
  }
  return out;
}

/// The scenes from exactly one of: --scene (command line), --scene-list / scene_list, [scene.NAME] sections.
std::vector<cache::SceneInput> choose_scenes(const Parsed& p, const std::string& axes, const std::string& image_size) {
  if (p.vm.count("scene-list")) {  // cli/scene_list.hpp; each scene's errors name its line
    std::vector<cache::SceneInput> out;
    for (auto& l : listed_scenes(p, "decode", {"labels", "name"}, axes, image_size))
      out.push_back({std::move(l.name), std::move(l.scene), std::move(l.labels), std::move(l.origin)});
    return out;
  }
  return p.vm.count("scene") ? command_line_scenes(p.vm, axes, image_size) : config_scenes(p, axes, image_size);
}

/// Every option but the scenes, checked.
void read_parameters(const po::variables_map& vm, const std::string& axes, cache::DecodeOptions& o) {
  // --axes orders an HDF5 dataset's dimensions; for any other scene it would be ignored without a word
  if (!vm["axes"].defaulted() &&
      std::none_of(o.scenes.begin(), o.scenes.end(), uses_axes))
    throw ConfigError("--axes " + axes + ": orders the dimensions of HDF5 datasets (.h5, .hdf5, .he5), and no scene or label file is one");
  o.drop_bands = vm["drop-bands"].as<std::string>();
  o.bad_bands_from_header = vm["bad-bands-from-header"].as<bool>();
  o.ignore_label = vm["ignore-label"].as<int>();
  o.layout = cache::layout_from_name(vm["layout"].as<std::string>());
  o.patch = vm["patch"].as<int>();
  o.border = cache::border_from_name(vm["border"].as<std::string>());
  const std::string dt = vm["dtype"].as<std::string>();
  if (dt == "float32") o.dtype = DType::f32;
  else if (dt == "float16") o.dtype = DType::f16;
  else throw ConfigError("--dtype: unknown value '" + dt + "' (expected float32 or float16)");
  o.normalize = cache::normalize_from_name(vm["normalize"].as<std::string>());
  o.stats_over = cache::stats_over_from_name(vm["stats-over"].as<std::string>());
  o.pca = vm["pca"].as<int>();
  o.backend = vm["backend"].as<std::string>();
  if (!vm.count("out")) throw ConfigError("decode: --out PATH is required");
  o.out = vm["out"].as<std::string>();
  o.force = vm["force"].as<bool>();
  o.memory_bytes = vm["memory-mb"].as<std::uint64_t>() << 20;
  o.progress = !vm["no-progress"].as<bool>();
  set_huge_pages(vm["huge-pages"].as<bool>());  // process-wide, not a parameter of the cache
}

int run_decode(int argc, char** argv) {
  const po::options_description d = decode_options();
  dist::Environment env(&argc, &argv);
  dist::Comm comm;
  return run_reporting_errors("decode", comm, [&] {
    cache::DecodeOptions o;
    bool help = false;
    // every rank reads the options: an error in them is the same on all, and printed once (collective_step)
    dist::collective_step(comm, "reading the options", [&] {
      const Parsed p = parse(argc, argv, "decode", "[--config FILE] --scene PATH[:VAR] [--labels PATH[:VAR]] ... --out PATH", d);
      if (p.help) {
        help = true;
        return;
      }
      const std::string axes = p.vm["axes"].as<std::string>();
      const std::string image_size = p.vm.count("image-size") ? p.vm["image-size"].as<std::string>() : std::string();
      o.scenes = choose_scenes(p, axes, image_size);
      read_parameters(p.vm, axes, o);
    });
    if (help) return 0;
    cache::decode(o, comm);
    return 0;
  });
}

}  // namespace
HSIPIPE_COMMAND("decode", "decode scenes once into a sample-first cache (MPI ranks, h5 or npy)", run_decode);
}  // namespace hsipipe::cli

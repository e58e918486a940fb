// hsipipe synth: writes the synthetic field scene (io/synth.hpp) as ENVI: DIR/scene.hdr + scene.img and
// DIR/labels.hdr + labels.img. Rank-local, no MPI. Deterministic from --seed.
#include <charconv>
#include <chrono>
#include <filesystem>
#include <iomanip>
#include <iostream>

#include "cache/stage.hpp"
#include "cli/command.hpp"
#include "core/error.hpp"
#include "core/outputs.hpp"
#include "io/synth.hpp"

namespace hsipipe::cli {
namespace {

std::size_t positive(const po::variables_map& vm, const char* name, long max) {
  const long v = vm[name].as<long>();
  if (v < 1 || v > max) {
    throw ConfigError(std::string("--") + name + ": expected 1.." + std::to_string(max) + ", got " + std::to_string(v));
  }
  return static_cast<std::size_t>(v);
}

int run_synth(int argc, char** argv) {
  po::options_description desc("synth options");
  desc.add_options()
      ("out", po::value<std::string>(), "output directory (created; scene.hdr/img and labels.hdr/img inside)")
      ("rows", po::value<long>()->default_value(145), "lines")
      ("cols", po::value<long>()->default_value(145), "samples per line")
      ("bands", po::value<long>()->default_value(200), "bands, 400-2500 nm")
      ("classes", po::value<long>()->default_value(8), "labeled classes (1..K; 0 = unlabeled)")
      ("interleave", po::value<std::string>()->default_value("bil"), "bsq | bil | bip")
      ("dtype", po::value<std::string>()->default_value("int16"), "int16 | uint16 (reflectance x 10000) | float32")
      ("byte-order", po::value<int>()->default_value(0), "0 little-endian, 1 big-endian")
      ("seed", po::value<std::string>()->default_value("1"), "seed, unsigned 64-bit")
      ("labeled-fraction", po::value<double>()->default_value(1.0),
       "sparse ground truth: keep labels only in survey plots (a disc in every labeled parcel) covering this "
       "fraction of the scene, in (0, 1]; 1 keeps every labeled pixel")
      ("force", po::bool_switch(), "replace scene.hdr/img and labels.hdr/img when --out already holds them");
  const Parsed a = parse(argc, argv, "synth",
                         "--out DIR [--rows 145 --cols 145 --bands 200 --classes 8 --interleave bil --dtype int16 "
                         "--byte-order 0 --seed 1 --labeled-fraction 1]",
                         desc);
  if (a.help) return 0;
  const auto& vm = a.vm;
  if (!vm.count("out")) throw ConfigError("hsipipe synth: --out DIR is required");
  io::SynthOptions o;
  o.rows = positive(vm, "rows", 100000);
  o.cols = positive(vm, "cols", 100000);
  o.bands = positive(vm, "bands", 10000);
  o.classes = static_cast<int>(positive(vm, "classes", 1000));
  const std::string il = vm["interleave"].as<std::string>();
  const auto inter = io::interleave_from_name(il);
  if (!inter) throw ConfigError("--interleave: expected bsq, bil or bip, got '" + il + "'");
  o.interleave = *inter;
  const std::string dt = vm["dtype"].as<std::string>();
  const auto type = dtype_from_name(dt);
  if (!type || (*type != DType::i16 && *type != DType::u16 && *type != DType::f32)) {
    throw ConfigError("--dtype: expected int16, uint16 or float32, got '" + dt + "'");
  }
  o.dtype = *type;
  o.labeled_fraction = vm["labeled-fraction"].as<double>();  // checked by io::SynthScene
  o.byte_order = vm["byte-order"].as<int>();
  if (o.byte_order != 0 && o.byte_order != 1) throw ConfigError("--byte-order: expected 0 or 1");
  const std::string seed = vm["seed"].as<std::string>();
  const auto [ptr, ec] = std::from_chars(seed.data(), seed.data() + seed.size(), o.seed);
  if (seed.empty() || ec != std::errc() || ptr != seed.data() + seed.size()) {
    throw ConfigError("--seed: expected an unsigned 64-bit integer, got '" + seed + "'");
  }

  // a cache (or staged copy) is not a folder for scenes: the files would join it, and the next decode
  // --force or stage of it would delete them
  const std::string out = vm["out"].as<std::string>();
  for (const std::string f : {"manifest.json", cache::kStageRecord})
    if (std::filesystem::exists(std::filesystem::path(out) / f))
      throw ConfigError("synth --out " + out + ": is a cache (it holds " + f +
                        "); synth writes a scene into a folder of its own: choose another --out (nothing was written)");
  // the four files synth writes: never into a cache or run, an existing one only with --force
  for (const char* f : {"scene.hdr", "scene.img", "labels.hdr", "labels.img"})
    outputs::check_output_file((std::filesystem::path(out) / f).string(), vm["force"].as<bool>(), "synth --out");
  const auto t0 = std::chrono::steady_clock::now();
  const io::SynthFiles f = io::write_synthetic_scene(out, o);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::uint64_t labeled = 0;
  for (std::size_t k = 1; k < f.class_counts.size(); ++k) labeled += f.class_counts[k];
  std::cout << "wrote " << f.scene_header << " (" << o.rows << " x " << o.cols << " x " << o.bands << " "
            << dtype_name(o.dtype) << " " << io::interleave_name(o.interleave) << ", byte order " << o.byte_order
            << ")\nwrote " << f.labels_header << " (" << o.classes << " classes, " << labeled << " of "
            << o.rows * o.cols << " pixels labeled, " << std::fixed << std::setprecision(1)
            << 100.0 * static_cast<double>(labeled) / static_cast<double>(o.rows * o.cols) << "%) in "
            << std::setprecision(2) << secs << " s\n";
  return 0;
}

}  // namespace

HSIPIPE_COMMAND("synth", "write the synthetic field scene (ENVI scene + labels) used by the demo and tests", run_synth);

}  // namespace hsipipe::cli

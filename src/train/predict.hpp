#pragma once
// train/predict: `hsipipe predict`, a trained run applied to whole scenes, every pixel.
//
//   RUN_DIR/preprocessing.json   (written by train) the cache's manifest and kept wavelengths: the
//                                preprocessing is read from there, never recomputed from the new scene
//   RUN_DIR/fold-I/checkpoint.pt the fold's final weights ("finished"); --ensemble averages the softmax
//                                scores of all k folds
//
// COLLECTIVE over `world`. Ranks split each scene's rows in fixed chunks of rows (the same chunks and
// batches for any rank count, so the map is byte-identical for 1, 2 or R ranks); each rank decodes its
// rows plus the patch halo through io::Scene (any reader, remote ones too), transforms them exactly as
// decode did (cache/transform.hpp, values rounded to the cache dtype), and runs the model(s) on its
// valid pixels on its device. Invalid pixels (nodata, NaN, +-Inf in a kept band) get the nodata value.
// Rank 0 gathers the class map and writes, per scene NAME, each file atomically:
//   OUT/NAME_class.tif            single-band GeoTIFF (Byte, or UInt16 when a label or the nodata value
//                                 exceeds 255): original label values, nodata, colour table, the source's
//                                 geotransform and CRS when it has them
//   OUT/NAME_class.img + .hdr     the same as an ENVI Classification file (class lookup, class names)
//   OUT/NAME_preview.png          the map with a legend
//   OUT/NAME_probabilities.npy    (--probabilities) float16 [H, W, C] softmax, 0 where nodata; written by
//                                 every rank in place (its rows), renamed by rank 0 when complete
//   OUT/NAME_predict.json         what was mapped: run, folds, model, preprocessing identity, nodata,
//                                 pixel counts per label, and with --labels the map's accuracy on them
// OUT may hold earlier predict outputs (another scene's; this scene's are replaced only with --force); NAME is
// a file stem (no '/', no '..'); OUT lies in no cache nor run folder (core/outputs.hpp); anything else in OUT is
// refused before any work, as are a run without finished checkpoints, a wrong --fold and a scene that
// does not fit the training data (band count, wavelengths, source data type).
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dist/mpi.hpp"
#include "io/scene.hpp"
#include "train/models.hpp"

namespace hsipipe::train {

struct PredictScene {
  io::SceneSpec scene;
  std::string name;                   ///< output file prefix (default: the file's stem)
  std::optional<io::SceneSpec> labels;  ///< optional reference labels: the map's accuracy on them
  std::string origin;                 ///< " (scene list FILE line N)", appended to errors about it; or empty
};

struct PredictOptions {
  std::string run;           ///< the --out directory of hsipipe train
  int fold = -1;             ///< the fold whose final model maps; -1 with ensemble
  bool ensemble = false;     ///< average the k folds' softmax scores
  std::vector<PredictScene> scenes;
  std::string out;           ///< output folder
  std::string device = "auto";
  std::int64_t batch = 0;  ///< pixels per forward pass; 0: auto (auto_batch)
  bool probabilities = false;
  bool quiet = false;
  bool force = false;  ///< replace the earlier maps of a scene of the same NAME in OUT
};

/// What a run holds for inference: its preprocessing record (RUN/preprocessing.json: the cache's manifest and
/// kept wavelengths), the model, and the chosen folds' finished checkpoints, each checked to be of that cache.
struct RunSpec {
  nlohmann::json manifest;
  std::vector<double> wavelengths;
  std::string model, precision;
  std::string model_sha256;  ///< a TorchScript network's (RUN/model.pt); empty for a built-in one
  std::vector<int> folds;
  std::vector<std::string> checkpoints;
  std::vector<std::int32_t> label_values;  ///< class index -> label value
  nlohmann::json to_json() const;
  static RunSpec from_json(const nlohmann::json& j);
};

/// Rank-local. The run's folds `fold` (or all k with `ensemble`). ConfigError: not a run, no such fold, no
/// checkpoint; FormatError: an unfinished or damaged checkpoint, a missing preprocessing record; StaleError:
/// a checkpoint of another cache.
/// RUN/model.pt, the run's copy of its TorchScript network, checked against r.model_sha256 (FormatError naming
/// the file when it is missing or was replaced).
std::string scripted_model_path(const RunSpec& r, const std::string& run);
RunSpec read_run(const std::string& run, int fold, bool ensemble);

/// What the run's model takes: bands after the cache's band selection / PCA, patch side (1 for a spectral
/// model), classes. `run` names preprocessing.json in errors.
struct ModelInput {
  int bands = 0, patch = 1, classes = 0;
};
ModelInput model_input(const RunSpec& r, const std::string& run);

/// Rank-local, for `hsipipe report`: every fold-I/ of RUN holding both checkpoint.pt and metrics.json has a
/// checkpoint of fold I (meta.fold) with the identity its metrics.json records (options, cache, folds):
/// FormatError / StaleError naming the checkpoint and the field otherwise (a checkpoint copied between folds).
void check_fold_checkpoints(const std::string& run);

/// Rank-local. The model of r.checkpoints[i] with its final weights, on the CPU, in eval mode.
std::shared_ptr<Model> load_fold_model(const RunSpec& r, std::size_t i, const std::string& run);

/// COLLECTIVE. Returns 0; throws hsipipe errors (the same on every rank) naming the file and field.
int predict(const PredictOptions& opts, const dist::Comm& world, std::ostream& log);

/// The nodata value of a map of these label values: 0 when no label is 0, else one above the largest.
/// ConfigError when a label is negative or the value would not fit UInt16.
std::uint16_t map_nodata(const std::vector<std::int32_t>& label_values);

}  // namespace hsipipe::train

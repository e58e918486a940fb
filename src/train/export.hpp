#pragma once
// train/export: `hsipipe export`, one fold's final model as a file PyTorch loads (torch.load), so a PyTorch
// user can fine-tune or serve a model trained with hsipipe. Rank-local; no MPI.
//
// OUT (torch.load(OUT) in Python gives a dict; written by torch::pickle_save, atomically):
//   "format"          "hsipipe-model", "format_version" 1
//   "model"           a name of train::model_registry()
//   "bands", "patch", "n_classes"   the input the network takes: [N, bands] (patch 1) or
//                     [N, bands, patch, patch], float32, after the cache's preprocessing
//   "label_values"    class index -> label value of the scene's label raster
//   "state_dict"      parameter and buffer names -> tensors (float32, CPU), the layer names of
//                     scripts/hsipipe_models.py (module.load_state_dict takes it as is)
//   "meta"            JSON text: fold, the run's preprocessing (RUN/preprocessing.json: kept bands,
//                     shift/scale, PCA, patch, border, dtype), provenance (data_checksum, folds
//                     fingerprint), training config, the checkpoint's weights_xxh3, hsipipe version
//   "example_input", "example_logits"   N random inputs (seeded) and the logits hsipipe's network gives
//                     them (eval mode, fp32): a check that a re-implementation computes the same thing
// A run without the fold's finished checkpoint, or a wrong --fold, is refused as predict refuses it. OUT is
// checked before anything is read (core/outputs.hpp): never a file of a run or a cache, an existing file only
// with --force.
#include <ostream>
#include <string>

namespace hsipipe::train {

struct ExportOptions {
  std::string run;      ///< the --out directory of hsipipe train
  int fold = 0;
  std::string out;      ///< the file to write (model.pt)
  int examples = 100;   ///< rows of example_input / example_logits
  bool quiet = false;
  bool force = false;   ///< replace an existing o.out (outputs::check_output_file: never a run's or cache's file)
};

/// Rank-local. Writes o.out; throws hsipipe errors naming the file and field.
void export_model(const ExportOptions& o, std::ostream& log);

}  // namespace hsipipe::train

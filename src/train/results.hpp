#pragma once
// train/results: what a training run leaves on disk, and the one function that turns fold results
// into the run summary (called by `hsipipe train --fold all` at the end and by `hsipipe report`, so
// both give byte-identical summaries for the same fold files).
//
//   RUN_DIR/fold-I/metrics.json     {"fold", "n_folds", "run": RunInfo, "metrics": to_json(Metrics), "train": extra}
//   RUN_DIR/fold-I/predictions.csv  sample_id,scene,row,col,true,predicted   (original label values, sorted by id)
//   RUN_DIR/fold-I/confusion.csv    header "true\pred,<labels...>", one row per true label
//   RUN_DIR/fold-I/confusion.png    heat map (row-normalised), class labels on both axes
//   RUN_DIR/fold-I/map.png          predicted class of the fold's validation pixels over each scene
//                                   (scenes stacked vertically), background dark, legend of colours/labels
//   RUN_DIR/summary.json            {"folds": [{"fold", "oa", "aa", "kappa", "n"}], "mean": {"oa", "aa", "kappa"},
//                                    "std": {...}, "std_kind": "sample (n-1)", "n_folds", "run": RunInfo}
//   RUN_DIR/summary.md              the same as a table, saying std is the sample std (n-1)
// Accuracies are fractions in [0, 1]. Every file is written atomically (temp + rename): a reader
// never sees a partial file. All functions are rank-local: the trainer calls them on rank 0 only.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/cache.hpp"
#include "train/metrics.hpp"

namespace hsipipe::train {

/// Identity of a run, copied into every metrics.json and the summary. report refuses to mix folds
/// whose cache_checksum, folds_fingerprint or n_folds differ.
struct RunInfo {
  nlohmann::json config = nlohmann::json::object();  ///< the training options as given (model, epochs, lr, ...)
  std::string cache_dir;
  std::string cache_checksum;      ///< manifest "data_checksum"
  std::string folds_fingerprint;   ///< the folds file's fingerprint
  int n_folds = 0;                 ///< k of the folds file
};
nlohmann::json to_json(const RunInfo& r);
RunInfo run_info_from_json(const nlohmann::json& j, const std::string& file);  ///< throws FormatError

/// One validation sample's outcome (original label values, not class indices).
struct Prediction {
  std::uint64_t id = 0;  ///< global sample id in the cache
  std::int32_t scene = 0, row = 0, col = 0;
  std::int32_t true_label = 0, pred_label = 0;
};

struct FoldResult {
  int fold = 0;
  Metrics metrics;
  std::vector<Prediction> predictions;          ///< any order; written sorted by id
  nlohmann::json extra = nlohmann::json::object();  ///< trainer's record (epochs, loss history, timings...)
};

/// Writes RUN_DIR/fold-I/ (all five files). `scenes` gives the scene sizes for map.png (the cache
/// sample table's scenes). Throws IoError/ConfigError; creates the directories it needs.
void write_fold_results(const std::string& run_dir, const RunInfo& run, const FoldResult& fold,
                        const std::vector<cache::SceneDims>& scenes);

/// Reads RUN_DIR/fold-*/metrics.json, checks that every fold 0..k-1 is present exactly once and that
/// all agree on cache_checksum, folds_fingerprint and n_folds (StaleError / FormatError naming the
/// file and the field otherwise), then writes summary.json and summary.md atomically and returns the
/// summary JSON. `expect_folds`: if non-empty, exactly these folds must be present (a `--fold 2`
/// run may summarise one fold); if empty, all n_folds are required. Folds trained with other options
/// (run.config: lr, seed, epochs, ...) are refused naming each differing key (ConfigError), unless
/// `allow_mixed`: then the summary's "config_differences" lists them and summary.md says so.
nlohmann::json summarize_run(const std::string& run_dir, const std::vector<int>& expect_folds = {}, bool allow_mixed = false);

/// The summary as Markdown (what summarize_run writes to summary.md).
std::string summary_markdown(const nlohmann::json& summary);

// Image helpers, exposed for tests.
struct Rgb {
  std::uint8_t r = 0, g = 0, b = 0;
};
/// Distinct colour of class index c (fixed palette, then golden-ratio hues).
Rgb class_colour(int c);
/// Writes an 8-bit RGB PNG atomically; pixels row-major, width*height entries.
void write_png(const std::string& path, int width, int height, const std::vector<Rgb>& pixels);
/// Class indices of one scene for write_class_png: index[r * cols + c] is a class index (0 .. C-1, drawn in
/// class_colour), kNone (no class: background) or kOther (a label outside label_values: grey).
struct ClassGrid {
  static constexpr std::int32_t kNone = -1, kOther = -2;
  std::string name;
  std::uint32_t rows = 0, cols = 0;
  std::vector<std::int32_t> index;
};
/// A picture of class maps, scenes stacked vertically at 1-4 px per pixel, with `title` and a legend of
/// `label_values` (class index i is label_values[i]); `none_name` non-empty adds a legend entry for kNone.
/// Written atomically (write_png); fold-I/map.png and predict's previews.
void write_class_png(const std::string& path, const std::string& title, const std::vector<ClassGrid>& grids,
                     const std::vector<std::int32_t>& label_values, const std::string& none_name = "");
/// Draws `text` with the built-in 5x7 font (6 x 8 px per character at scale 1) into a width x height picture.
void draw_text(std::vector<Rgb>& pixels, int width, int height, int x, int y, const std::string& text, Rgb colour,
               int scale = 1);
/// fold-I/confusion.png (row-normalised confusion matrix) and fold-I/map.png (the validation pixels' classes).
void write_confusion_png(const std::string& path, const Metrics& m, int fold);
void write_map_png(const std::string& path, const FoldResult& fold, const std::vector<cache::SceneDims>& scenes,
                   const std::vector<std::int32_t>& label_values);
/// Reads an 8-bit RGB/RGBA PNG (for tests); throws FormatError.
std::vector<Rgb> read_png(const std::string& path, int& width, int& height);

}  // namespace hsipipe::train

#pragma once
// train/metrics: classification metrics from a confusion matrix. Rank-local and pure: the trainer
// all-gathers the validation predictions first, then computes these once over the whole fold.
//
// Classes are contiguous indices 0..C-1 (what the network predicts); ClassIndex maps the cache's
// original label values (manifest "label_values", e.g. {1, 2, 5, 7}) to them and back, and every
// report shows the original values.
//
// Definitions (n = total, n_ij = count of true class i predicted as j, rows = truth):
//   OA     = sum_i n_ii / n
//   recall_i (per-class accuracy) = n_ii / sum_j n_ij         (reported as null when class i has no sample)
//   AA     = mean of recall_i over the classes that have samples
//   precision_i = n_ii / sum_j n_ji                           (0 when nothing was predicted as i)
//   F1_i   = 2 p r / (p + r)                                  (0 when p + r = 0)
//   kappa  = (p_o - p_e) / (1 - p_e), p_o = OA, p_e = sum_i (row_i * col_i) / n^2
//            (kappa = 1 when p_e = 1 and p_o = 1, i.e. a single class predicted perfectly; 0 when p_e = 1 otherwise)
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hsipipe::train {

/// Label value <-> contiguous class index.
class ClassIndex {
 public:
  ClassIndex() = default;
  /// label_values: distinct values in the order that defines the indices (throws ConfigError on duplicates).
  explicit ClassIndex(std::vector<std::int32_t> label_values);
  int size() const noexcept { return static_cast<int>(values_.size()); }
  std::int32_t value(int index) const;   ///< throws std::out_of_range
  int index(std::int32_t value) const;   ///< throws ConfigError naming the value
  bool contains(std::int32_t value) const noexcept;
  const std::vector<std::int32_t>& values() const noexcept { return values_; }

 private:
  std::vector<std::int32_t> values_;
  std::int32_t min_ = 0;
  std::vector<int> lut_;  // value - min_ -> index or -1
};

/// Counts [true][predicted] over class indices.
class ConfusionMatrix {
 public:
  ConfusionMatrix() = default;
  explicit ConfusionMatrix(int n_classes);
  int n_classes() const noexcept { return c_; }
  /// Throws std::out_of_range for an index outside 0..C-1.
  void add(int true_index, int pred_index, std::int64_t count = 1);
  std::int64_t at(int true_index, int pred_index) const { return m_.at(static_cast<std::size_t>(true_index) * c_ + pred_index); }
  std::int64_t total() const noexcept;
  const std::vector<std::int64_t>& data() const noexcept { return m_; }  ///< row-major C x C

 private:
  int c_ = 0;
  std::vector<std::int64_t> m_;
};

struct Metrics {
  std::vector<std::int32_t> label_values;  ///< original label of class index c
  ConfusionMatrix confusion;
  std::int64_t n = 0;
  double oa = 0, aa = 0, kappa = 0;
  std::vector<std::int64_t> support;   ///< true samples per class
  std::vector<double> recall;          ///< per-class accuracy (0 where support is 0; see has_support)
  std::vector<double> precision, f1;
};

Metrics compute_metrics(const ConfusionMatrix& cm, const ClassIndex& classes);
/// From class-index vectors of equal length (throws std::invalid_argument otherwise).
Metrics compute_metrics(const std::vector<int>& true_index, const std::vector<int>& pred_index,
                        const ClassIndex& classes);

/// {"n", "oa", "aa", "kappa", "label_values", "confusion" (rows = truth), "per_class": [{"label",
/// "support", "accuracy" (null without support), "precision", "f1"}]}
nlohmann::json to_json(const Metrics& m);
/// Inverse of to_json (recomputes the scalars from the confusion matrix and checks they agree).
/// Throws FormatError naming `file` and the field on a missing or inconsistent field.
Metrics metrics_from_json(const nlohmann::json& j, const std::string& file);

}  // namespace hsipipe::train

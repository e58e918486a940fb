#pragma once
// folds: k-fold splits as a pure function of the sample table, k, seed, strategy and its parameters.
// Never of the rank count, the cache backend or its dtype. The algorithms are specified to the bit in
// docs/FOLDS.md (scripts/folds_reference.py reimplements them from that text); everything here is
// rank-local and free of MPI: in a distributed job every rank may call load_folds() on the same file,
// or rank 0 may call it and broadcast; both give the same Folds.
//
// Samples with label < 0 (unlabeled prediction samples) take part in no fold: fold id -1.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hsipipe::folds {

inline constexpr int kFormatVersion = 1;     ///< layout of the JSON file
inline constexpr int kAlgorithmVersion = 1;  ///< docs/FOLDS.md algorithms; bumped on any output change

enum class Strategy { stratified, spatial, random };
std::string strategy_name(Strategy s);
Strategy strategy_from_name(const std::string& s);  ///< throws ConfigError naming --strategy
/// Every strategy, in the documented order: the one list help texts and messages are made from.
const std::vector<Strategy>& all_strategies();
/// Their names joined by `sep` ("stratified | spatial | random"); with `last` the final separator
/// instead ("stratified, spatial or random").
std::string strategy_names(const std::string& sep, const std::string& last = "");

struct SceneSize {
  std::uint32_t rows = 0, cols = 0;
};

/// Borrowed view of a sample table: for sample i its scene index, row, column (pixel coordinates in
/// that scene) and label. All four spans have N entries. `scenes` may be empty (no bounds check).
struct SampleTableView {
  std::span<const std::int32_t> scene, row, col, label;
  std::span<const SceneSize> scenes;
  int patch = 1;  ///< patch side p of the cache (1 for pixel samples); the leakage radius is p / 2
  std::size_t size() const noexcept { return label.size(); }
};

struct FoldParams {
  int k = 5;
  std::uint64_t seed = 42;
  Strategy strategy = Strategy::stratified;
  int block = 0;    ///< spatial: block side in pixels; 0 = the documented default (printed)
  int buffer = -1;  ///< spatial: exclusion radius in pixels; -1 = patch / 2
};

/// A k-fold split. What training needs: k, fold, excluded, n_samples, data_checksum, fingerprint.
struct Folds {
  int format_version = kFormatVersion;
  int algorithm_version = kAlgorithmVersion;
  int k = 0;
  std::uint64_t seed = 0;
  Strategy strategy = Strategy::stratified;
  // parameters actually used
  int patch = 1;          ///< patch side of the sample table the folds were made from
  int block = 0;          ///< spatial: block side used (0 for other strategies)
  bool block_default = false;
  int buffer = 0;         ///< spatial: exclusion radius used (0 for other strategies)
  std::int64_t grid_offset_row = 0, grid_offset_col = 0;  ///< spatial: block grid origin shift

  std::uint64_t n_samples = 0;
  /// fold[i] in [0, k): the fold in which sample i is validated (it trains in the other k-1 folds);
  /// -1 only for samples that take part in no fold (label < 0).
  std::vector<std::int32_t> fold;
  /// Per fold f (k lists, ascending sample ids): samples with fold != f that must NOT be used for
  /// training when validating on fold f (spatial buffer). Empty lists for stratified and random.
  std::vector<std::vector<std::uint64_t>> excluded;

  std::string data_checksum;     ///< the cache's data_checksum (informational: differs with dtype)
  std::string samples_checksum;  ///< sha256 of the sample table alone (scene,row,col,label); see docs
  std::string fingerprint;       ///< sha256 over fold array + sample table + exclusions (docs/FOLDS.md)

  std::vector<std::int32_t> classes;                  ///< label values, ascending
  std::vector<std::vector<std::uint64_t>> counts;     ///< [fold][class index] validation samples
  int leakage_radius = 0;                             ///< patch / 2
  std::vector<std::uint64_t> leaky;                   ///< per fold: validation samples whose patch holds a training pixel
  double leakage = 0.0;                               ///< sum(leaky) / validation samples
  std::vector<std::string> warnings;                  ///< e.g. a class with fewer than k samples
  /// classes, counts and leakage are filled: by make_folds, by load_folds from a file that has them (they
  /// are informational, a file may omit them), or by complete_informational.
  bool has_informational = false;

  /// Validation sample ids of fold f, ascending.
  std::vector<std::uint64_t> val_ids(int f) const;
  /// Training sample ids of fold f, ascending: fold >= 0, fold != f, not in excluded[f].
  std::vector<std::uint64_t> train_ids(int f) const;
};

/// Makes the folds. Throws ConfigError for k < 2, fewer participating samples (or spatial blocks)
/// than k, a bad block/buffer; FormatError for an inconsistent table (span sizes, coordinates
/// outside their scene). A class with fewer than k samples is a warning (Folds::warnings), not an error.
Folds make_folds(const SampleTableView& table, const FoldParams& params);

/// sha256 hex of the documented byte layout over (table, fold, excluded).
std::string fingerprint(const SampleTableView& table, std::span<const std::int32_t> fold,
                        const std::vector<std::vector<std::uint64_t>>& excluded);
/// sha256 hex over the sample table alone (scene, row, col, label).
std::string samples_checksum(const SampleTableView& table);

/// Leakage of a split: per fold, the number of validation samples whose patch (radius) contains a
/// training pixel (another fold's sample, not excluded for this fold). Fills leaky, leakage, radius.
void compute_leakage(const SampleTableView& table, Folds& folds, int radius);

/// Fills classes, counts and leakage (radius patch / 2) from the table when a loaded file omitted them.
/// Throws ConfigError when the table's sample count is not the folds'.
void complete_informational(const SampleTableView& table, Folds& folds);

/// The folds file (key order fixed: see docs/FOLDS.md), and its text form as written to disk.
nlohmann::ordered_json to_json(const Folds& f);
std::string to_json_text(const Folds& f);
/// Writes atomically (PATH.tmp + rename).
void save_folds(const Folds& f, const std::string& path);
/// Reads and validates a folds file; throws FormatError naming the file and the field, IoError.
Folds load_folds(const std::string& path);

/// Does a folds file apply to this sample table? `ok` is false with human-readable reasons when the
/// sample count, sample table or fingerprint differ. A different data_checksum with the same sample
/// table is a note only (a float16 and a float32 cache of one scene share their folds).
struct CheckReport {
  bool ok = true;
  std::vector<std::string> problems;  ///< reasons to refuse
  std::vector<std::string> notes;     ///< informational differences
  std::string recomputed_fingerprint;
};
CheckReport check_folds(const Folds& f, const SampleTableView& table, const std::string& data_checksum);
/// check_folds, throwing StaleError with every reason (prefixed by `what`, e.g. the file name) unless ok.
void require_folds_match(const Folds& f, const SampleTableView& table, const std::string& data_checksum,
                         const std::string& what);

}  // namespace hsipipe::folds

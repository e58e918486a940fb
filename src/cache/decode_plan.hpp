#pragma once
// cache/decode_plan: what a decode works on, the same on every rank: the scenes opened and checked
// (DecodePlan::open), the sample table (validity_pass for scenes without labels, build_table), this rank's
// samples and the row blocks each pass visits (plan_blocks), and which rank owns which statistics row.
// Internal to cache (see decode.hpp for how ranks share the work).
//
// Contract: every rank calls the steps in the same order; only validity_pass is COLLECTIVE (an
// all-gather of the validity masks). The others are rank-local and deterministic, so every rank gets the
// same table and plan and they throw on every rank alike (callers wrap them in dist::collective_step).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "cache/cache.hpp"
#include "cache/decode.hpp"
#include "cache/decode_timing.hpp"
#include "core/range.hpp"
#include "dist/mpi.hpp"
#include "io/scene.hpp"
#include "io/scene_pool.hpp"

namespace hsipipe::cache {

/// One opened scene and where its samples are in the table.
struct SceneState {
  SceneInput input;  ///< as read: the variable and image size the reader used
  std::unique_ptr<io::Scene> scene;
  std::optional<io::LabelImage> labels;
  std::size_t rows = 0, cols = 0;
  std::uint64_t first_sample = 0, end_sample = 0;
  std::uint64_t row_offset = 0;                   ///< global row id of row 0
  std::vector<std::int64_t> first_sample_of_row;  ///< -1 when the row has no sample
  std::vector<std::uint8_t> valid;                ///< unlabeled scenes: 1 = valid pixel (row-major)
};

/// One block of rows of one scene. core rows [r0, r1); read rows [rr0, rr1) (core plus patch halo);
/// samples [s0, s1) (pixel/patch) whose rows are in the core.
struct Block {
  int scene = 0;
  std::size_t r0 = 0, r1 = 0, rr0 = 0, rr1 = 0;
  std::uint64_t s0 = 0, s1 = 0;
};

/// Rows per block so that one block's decoded rows stay near 32 MiB (HSIPIPE_TEST_BLOCK_BYTES: smaller).
std::size_t rows_per_block(std::size_t cols, int bands);

class DecodePlan {
 public:
  DecodePlan(const DecodeOptions& options, int ranks, int this_rank) : opts(options), R(ranks), rank(this_rank) {}

  /// Rank-local. Checks the options (ConfigError), opens every scene, reads every label raster on rank 0
  /// only (the others get them from share_labels), and decides the kept bands; nothing is written.
  void open();
  /// COLLECTIVE, after open() succeeded on every rank. Broadcasts rank 0's label rasters (values, nodata,
  /// declared classes, the variable read): a campaign's label files are read once, not once per rank.
  void share_labels(const dist::Comm& comm);
  /// COLLECTIVE. Marks the valid pixels of the scenes without labels (each rank decodes its aligned_rows,
  /// the masks are all-gathered); `t.read` books the decoding.
  void validity_pass(const dist::Comm& comm, Timers& t);
  /// Rank-local. The sample table and this rank's samples `my`; throws on labels out of range and on zero
  /// samples.
  void build_table();
  /// Rank-local. The blocks of the write pass and, when the statistics are taken over other rows, of the
  /// statistics pass.
  void plan_blocks();

  /// The rows of scene s that `rank` decodes when ranks split rows (cube layout, statistics over all pixels,
  /// the validity pass): contiguous, at multiples of the scene's block_rows(), so no tile row is decoded by
  /// two ranks.
  Range aligned_rows(std::size_t s, int rank) const;
  /// The rows of scene s that `rank` needs for its sample range (plus the patch halo); empty when none.
  Range need_rows(std::size_t s, int rank) const;
  /// Whether this rank adds row r of scene s to the statistics (each row is one rank's).
  bool owns_stats_row(int s, std::size_t r) const;
  /// Whether pixel (r, c) of scene s (its kept bands `px`) counts in the statistics; throws FormatError
  /// for a labeled pixel that is not valid data.
  bool is_item(int s, std::size_t r, std::size_t c, const float* px) const;
  /// Pixel i (row-major) of a scene with labels is labeled: its label is neither --ignore-label nor the label
  /// raster's own nodata / data ignore value (params.label_nodata: "not_a_sample", as `info` counts it)
  bool labeled(const SceneState& st, std::size_t i) const {
    const std::int32_t l = st.labels->labels[i];
    return l != opts.ignore_label && !(st.labels->nodata && l == *st.labels->nodata);
  }
  /// The blocks the statistics and PCA passes visit.
  const std::vector<Block>& stats_blocks() const { return stats_is_write ? write_plan : stats_plan; }
  /// Bands of an output item: --pca's count, else the kept bands.
  std::uint64_t out_bands() const {
    return static_cast<std::uint64_t>(opts.pca > 0 ? opts.pca : static_cast<int>(kept.size()));
  }
  /// Progress lines of a pass of `total` units (printed on rank 0 unless --no-progress).
  ProgressLine progress(const char* pass, const char* unit, std::uint64_t total) const {
    return ProgressLine(rank == 0 && opts.progress, pass, unit, total, opts.scenes.size());
  }

  const DecodeOptions& opts;
  const int R, rank;
  /// The scenes' readers: opened for the header checks, then on demand (at most io::kMaxOpenScenes at once;
  /// declared before `scenes`, whose readers it tracks)
  io::ScenePool pool;
  std::vector<SceneState> scenes;
  int src_bands = 0;
  std::vector<int> kept;  ///< kept source bands, 0-based
  int h = 0;              ///< patch halo p/2
  int p = 1;
  SampleTable table;
  std::vector<std::int32_t> label_values;
  Range my{};  ///< this rank's samples
  std::vector<Block> write_plan, stats_plan;
  /// The statistics pass reads the write pass's blocks (cube, or statistics over the labeled samples)
  bool stats_is_write = false;

 private:
  void validate_options();
  void open_scenes();
  void open_scene(const SceneInput& in);  ///< one scene and its labels, appended to scenes
  void choose_bands();
  std::uint64_t count_samples() const;
  void check_label(const SceneState& st, std::size_t i) const;
  bool is_sample(const SceneState& st, std::size_t i) const { return st.labels ? labeled(st, i) : st.valid[i] != 0; }
  [[noreturn]] void throw_no_samples() const;
};

}  // namespace hsipipe::cache

#pragma once
// cache/decode_passes: the passes of a decode before the write pass. The statistics pass (per-band
// statistics of the rows each rank owns, merged in row order on every rank, see preprocess.hpp), the
// normalisation they give, and the PCA pass (the covariance, summed exactly). Internal to cache.
//
// Contract: stats_pass and pca_pass are COLLECTIVE over ctx.comm (every rank, in this order, after
// DecodePlan::plan_blocks); a failure on any rank fails every rank. preprocessor_from_stats is rank-local
// and gives every rank the same result (it throws on every rank alike).
#include <cstddef>
#include <vector>

#include "cache/decode_plan.hpp"
#include "cache/kept_samples.hpp"
#include "cache/preprocess.hpp"
#include "cache/row_windows.hpp"
#include "cache/sink.hpp"

namespace hsipipe::cache {

/// What the passes share: the plan, the rows, the kept samples and this rank's timers.
struct PassContext {
  const DecodePlan& plan;
  const dist::Comm& comm;
  RowWindows& rows;
  KeptSamples& kept;
  Timers& t;

  /// Whether scene s is decoded again, a slice of rows at a time, by each pass after the first, rather than
  /// waiting in memory for it: a scene that reads any rows at memory speed (io::Scene::rereads_cheaply:
  /// ENVI), in the cube layout, and in the pixel layout when the statistics pass keeps no samples (see
  /// KeptSamples::choose). What would wait is float32 windows (twice an int16 scene) or the kept samples,
  /// all fresh memory; decoding again is cheaper (cube, 1 rank: 3.1 s kept, 1.6-1.8 s decoded again), and
  /// the write pass then builds the final bytes while the disk writes back the ones before. Such a scene's
  /// source_bytes_read is twice its bytes (three times with --pca), for any rank count (see
  /// forget_rows_decoded_here). The patch layout keeps its windows (a block's halo rows are the next's).
  bool decodes_again(int s) const;
  /// Whether the passes before the write pass keep scene s's decoded windows for it (within --memory-mb):
  /// when they read the write pass's blocks, unless the scene is decoded again (decodes_again).
  bool keeps_windows(int s) const { return plan.stats_is_write && !decodes_again(s); }
  /// The window of block `b` (index `bi` of its plan): kept, or decoded into scratch (and kept when `keep`).
  const RowWindow& window_for(std::size_t bi, const Block& b, RowWindow& scratch, bool keep) {
    return rows.window_for(bi, static_cast<std::size_t>(b.scene), b.rr0, b.rr1, scratch, keep);
  }
  /// After a statistics pass over the write pass's blocks: a scene decoded again (decodes_again) forgets
  /// the shared rows this rank decoded itself in the exchange, so that a later pass decodes them again here
  /// like the rank's other rows, while the ranks it sent them to copy theirs: each row is decoded once per
  /// pass, and the scene's bytes read are the same for any rank count. (Before a statistics pass over other
  /// rows there was no exchange yet: nothing to forget.)
  void forget_rows_decoded_here();
};

/// COLLECTIVE. The statistics pass: decides and fills the kept samples (ctx.kept, which may stage them in
/// `sink`'s pages), and returns the statistics merged over all ranks in row order. ConfigError when no
/// pixel counts.
BandStats stats_pass(PassContext& ctx, Sink& sink);

/// Rank-local. The normalisation of the kept bands from the statistics (--normalize); ConfigError when a
/// float16 cache would store a band's values as Inf.
Preprocessor preprocessor_from_stats(const DecodePlan& plan, const BandStats& stats);

/// COLLECTIVE. The PCA pass (--pca K): the covariance of the normalised items, and `pre`'s components
/// from it; returns the explained variance of each component.
std::vector<double> pca_pass(PassContext& ctx, const BandStats& stats, Preprocessor& pre);

}  // namespace hsipipe::cache

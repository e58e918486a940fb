#pragma once
// cache/write_pass: the last pass of a decode. Each rank transforms its samples (pixel, patch) or its cube
// rows with the preprocessing, converts them to the cache dtype, hashes every item and writes its disjoint
// part of the cache through the Sink: npy ranks each store their own byte ranges (built in place in the
// file's pages), h5 ranks write in collective rounds, the next round built while this one is written when
// the rank has a second CPU (core/overlap.hpp). Internal to cache.
//
// Contract: write_pass is COLLECTIVE over ctx.comm (after the statistics and PCA passes, every rank); a
// failure on any rank fails every rank.
#include <cstdint>
#include <string>
#include <vector>

#include "cache/decode_passes.hpp"
#include "cache/preprocess.hpp"
#include "cache/sink.hpp"

namespace hsipipe::cache {

/// What the write pass leaves for the checksum and the summary.
struct WriteOutput {
  std::vector<std::uint64_t> hashes;                    ///< pixel/patch: per item, this rank, in item order
  std::vector<std::vector<std::uint64_t>> cube_hashes;  ///< cube: per scene, per row of this rank
  std::string mode;                                     ///< how the pass wrote, for the summary
};

/// COLLECTIVE. Writes this rank's items of arrays[0] (pixel, patch) or arrays[s] (cube scene s) to `sink`.
WriteOutput write_pass(PassContext& ctx, const Preprocessor& pre, Sink& sink);

/// h5: whether block k+1 is built while block k goes through the collective write (see write_pass.cpp).
/// Rank-local; the caller agrees on it across ranks.
bool overlap_writes(const DecodePlan& plan, bool keeps_samples);

}  // namespace hsipipe::cache

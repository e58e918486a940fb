// cache/decode_passes: the statistics and PCA passes of a decode (see decode_passes.hpp).
#include "cache/decode_passes.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "core/error.hpp"
#include "core/test_hook.hpp"

namespace hsipipe::cache {

bool PassContext::decodes_again(int s) const {
  return plan.opts.layout != Layout::patch && !kept.active() &&
         RowWindows::reads_slices_cheaply(*plan.scenes[static_cast<std::size_t>(s)].scene);
}

void PassContext::forget_rows_decoded_here() {
  for (std::size_t s = 0; s < plan.scenes.size(); ++s)
    if (decodes_again(static_cast<int>(s))) rows.forget_decoded_here(s);
}

namespace {

/// This rank's part of the statistics pass: per owned row, the partial statistics of its items, packed as
/// [global row, BandStats::pack...]; and the kept samples.
class StatsPass {
 public:
  StatsPass(PassContext& ctx, Sink& sink) : ctx_(ctx), sink_(sink), B_(static_cast<int>(ctx.plan.kept.size())) {}
  /// Rank-local (the caller wraps it in its collective step).
  std::vector<double> run();

 private:
  void block(std::size_t bi, const Block& b, ProgressLine& prog);
  void consume(const RowWindow& w, int scene, std::size_t r0, std::size_t r1, std::uint64_t s0, std::uint64_t s1);
  void keep_samples(const RowWindow& w, std::uint64_t s0, std::uint64_t s1);

  PassContext& ctx_;
  Sink& sink_;
  const int B_;
  std::vector<double> packed_;
  RowWindow scratch_;
  char* stage_ = nullptr;  // staged samples: the output slots of the block's samples, from stage_first_ on
  std::uint64_t stage_first_ = 0;
  std::uint64_t rows_done_ = 0;
};

std::vector<double> StatsPass::run() {
  ctx_.kept.allocate();
  const auto& blocks = ctx_.plan.stats_blocks();
  // progress in rows of this rank's blocks (the pass that reads the scenes: most of a decode's time)
  std::uint64_t rows_total = 0;
  for (const Block& b : blocks) rows_total += b.r1 - b.r0;
  ProgressLine prog = ctx_.plan.progress("statistics pass", "rows", rows_total);
  for (std::size_t bi = 0; bi < blocks.size(); ++bi) block(bi, blocks[bi], prog);
  prog.finish();
  return std::move(packed_);
}

void StatsPass::block(std::size_t bi, const Block& b, ProgressLine& prog) {
  const auto& table = ctx_.plan.table;
  test_pause("HSIPIPE_TEST_DELAY_STATS_MS");  // a long pass, for the progress test
  if (ctx_.kept.staged()) {  // the file's pages of the block's samples, faulted in now (a full disk fails here)
    const auto tp = Clock::now();
    stage_ = static_cast<char*>(sink_.place(0, b.s0, b.s1 - b.s0));
    stage_first_ = b.s0;
    ctx_.t.placing += seconds_since(tp);
  }
  // A block whose window is not kept (kept samples need none; see keeps_windows) is decoded a few rows
  // at a time, each slice consumed while in cache (a whole block's floats would go through memory
  // three times; the pass needs no halo). Only for scenes that read any rows at the same cost
  // (Scene::rereads_cheaply): a compressed chunk or tile taller than a slice would be decompressed once
  // per slice (HDF5 input with 128-row gzip chunks: statistics pass 0.5 -> 5 s, a review, 2 Dec 2026).
  const auto s = static_cast<std::size_t>(b.scene);
  const bool keep_window = ctx_.keeps_windows(b.scene) && !ctx_.kept.active();
  const std::size_t slice = ctx_.rows.slice_rows(s);
  if (!keep_window && RowWindows::reads_slices_cheaply(*ctx_.plan.scenes[s].scene) && slice < b.r1 - b.r0) {
    std::uint64_t id = b.s0;
    for (std::size_t r0 = b.r0; r0 < b.r1; r0 += slice) {
      const std::size_t r1 = std::min(b.r1, r0 + slice);
      ctx_.rows.read_window(s, r0, r1, scratch_);
      const std::uint64_t s0 = id;
      while (id < b.s1 && static_cast<std::size_t>(table.row[id]) < r1) ++id;
      consume(scratch_, b.scene, r0, r1, s0, id);
      prog.update(rows_done_ += r1 - r0, s);
    }
    return;
  }
  const RowWindow& w = ctx_.window_for(bi, b, scratch_, keep_window);
  const bool keeping = ctx_.kept.active();
  consume(w, b.scene, b.r0, b.r1, keeping ? b.s0 : 0, keeping ? b.s1 : 0);
  prog.update(rows_done_ += b.r1 - b.r0, s);
}

/// Keeps the samples [s0, s1) of window w (when samples are kept).
void StatsPass::keep_samples(const RowWindow& w, std::uint64_t s0, std::uint64_t s1) {
  const auto& table = ctx_.plan.table;
  KeptSamples& kept = ctx_.kept;
  if (!kept.active()) return;
  for (std::uint64_t id = s0; id < s1; ++id) {
    const float* px = w.pixel(static_cast<std::size_t>(table.row[id]), static_cast<std::size_t>(table.col[id]));
    if (!kept.keep(kept.slot(id, stage_, stage_first_), px)) {
      // not exactly a 16-bit integer: the write pass decodes again (and overwrites any staged slot)
      kept.drop();
      break;
    }
  }
}

/// Rows [r0, r1) of window w: keep the samples of [s0, s1) (when samples are kept), add each owned row's
/// items to its row partial.
void StatsPass::consume(const RowWindow& w, int scene, std::size_t r0, std::size_t r1, std::uint64_t s0,
                        std::uint64_t s1) {
  const auto t0 = Clock::now();
  keep_samples(w, s0, s1);
  const DecodePlan& plan = ctx_.plan;
  for (std::size_t r = r0; r < r1; ++r) {
    if (!plan.owns_stats_row(scene, r)) continue;
    BandStats rs(B_);
    for (std::size_t c = 0; c < w.cols; ++c) {
      const float* px = w.pixel(r, c);
      if (plan.is_item(scene, r, c, px)) rs.add(px);
    }
    if (rs.n == 0) continue;
    packed_.push_back(static_cast<double>(plan.scenes[static_cast<std::size_t>(scene)].row_offset + r));
    rs.pack(packed_);
  }
  ctx_.t.compute += seconds_since(t0);
}

/// COLLECTIVE. Every rank's row partials merged in global row order: the same statistics for any rank count.
BandStats merge_row_stats(const dist::Comm& comm, const std::vector<double>& packed, int B) {
  const std::vector<double> all = comm.allgatherv(packed);
  const std::size_t rec = 2 + 4 * static_cast<std::size_t>(B);
  std::vector<std::pair<double, std::size_t>> order;
  for (std::size_t off = 0; off + rec <= all.size(); off += rec) order.emplace_back(all[off], off);
  std::sort(order.begin(), order.end());
  BandStats stats(B);
  for (const auto& [row, off] : order) stats.merge(BandStats::unpack(all.data() + off + 1, B));
  return stats;
}

}  // namespace

BandStats stats_pass(PassContext& ctx, Sink& sink) {
  ctx.kept.choose(ctx.plan, sink);
  std::vector<double> packed;
  collective_step(ctx.comm, "the statistics pass", [&] { packed = StatsPass(ctx, sink).run(); });
  BandStats stats = merge_row_stats(ctx.comm, packed, static_cast<int>(ctx.plan.kept.size()));
  if (stats.n == 0) throw ConfigError("decode: no pixel to compute the normalisation statistics over");
  return stats;
}

Preprocessor preprocessor_from_stats(const DecodePlan& plan, const BandStats& stats) {
  const auto& opts = plan.opts;
  Preprocessor pre;
  pre.kept = plan.kept;
  pre.shift.assign(plan.kept.size(), 0.0);
  pre.scale.assign(plan.kept.size(), 1.0);
  const auto var = stats.variance();
  for (std::size_t b = 0; b < plan.kept.size(); ++b) {
    double shift = 0, scale = 1;
    if (opts.normalize == Normalize::zscore) {
      shift = stats.mean[b];
      scale = std::sqrt(var[b]);
    } else if (opts.normalize == Normalize::minmax) {
      shift = stats.min[b];
      scale = stats.max[b] - stats.min[b];
    }
    if (!(scale > 0) || !std::isfinite(scale)) scale = 1.0;
    pre.shift[b] = shift;
    pre.scale[b] = scale;
    // float16 holds up to 65504: a band whose normalised values go beyond would be stored as Inf. Known
    // from the statistics' extremes (the same on every rank), before any sample is written. (Exact for
    // the statistics' pixels; with PCA the projection's range is not bounded by them.)
    const double reach = std::max(std::fabs(stats.min[b] - shift), std::fabs(stats.max[b] - shift)) / scale;
    if (opts.dtype == DType::f16 && opts.pca == 0 && reach >= 65520.0) {  // rounds to Inf from 65520 on
      throw ConfigError("--dtype float16: band " + std::to_string(plan.kept[b] + 1) + " reaches " + std::to_string(reach) +
                        " after --normalize " + normalize_name(opts.normalize) +
                        ", beyond float16's largest value 65504 (stored as Inf): use --dtype float32" +
                        (opts.normalize == Normalize::none ? ", or --normalize zscore or minmax" : ""));
    }
  }
  return pre;
}

namespace {

/// Adds the covariance of the items of block b's owned rows (normalised, centred on pre.pca_mean) to acc.
void add_block_covariance(PassContext& ctx, const RowWindow& w, const Block& b, const Preprocessor& pre, FixedSym& acc) {
  const DecodePlan& plan = ctx.plan;
  const int B = static_cast<int>(plan.kept.size());
  const auto Bs = static_cast<std::size_t>(B);
  Eigen::MatrixXd Z, M(B, B);
  std::vector<double> full(Bs * Bs);
  for (std::size_t r = b.r0; r < b.r1; ++r) {
    if (!plan.owns_stats_row(b.scene, r)) continue;
    std::vector<std::size_t> cols;
    for (std::size_t c = 0; c < w.cols; ++c)
      if (plan.is_item(b.scene, r, c, w.pixel(r, c))) cols.push_back(c);
    if (cols.empty()) continue;
    Z.resize(static_cast<Eigen::Index>(cols.size()), B);
    for (std::size_t i = 0; i < cols.size(); ++i) {
      const float* px = w.pixel(r, cols[i]);
      for (std::size_t k = 0; k < Bs; ++k)
        Z(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(k)) =
            (static_cast<double>(px[k]) - pre.shift[k]) / pre.scale[k] - pre.pca_mean[k];
    }
    M.noalias() = Z.transpose() * Z;
    for (int i = 0; i < B; ++i)
      for (int j = 0; j < B; ++j) full[static_cast<std::size_t>(i) * Bs + static_cast<std::size_t>(j)] = M(i, j);
    try {
      acc.add(full.data());
    } catch (const Error& e) {  // values too large for the exact accumulator: which scene, row, option
      const auto& st = plan.scenes[static_cast<std::size_t>(b.scene)];
      throw ConfigError(st.input.scene.str() + " (scene '" + st.input.name + "', row " + std::to_string(r) +
                        "): --pca " + std::to_string(plan.opts.pca) + ": " + e.what() +
                        (plan.opts.normalize == Normalize::none ? ": normalise first (--normalize zscore or minmax)" : ""));
    }
  }
}

/// The K leading eigenvectors of covariance `cov` (B x B) into pre.components, largest-magnitude entry
/// positive; returns their eigenvalues.
std::vector<double> principal_components(const std::vector<double>& cov, int B, int K, Preprocessor& pre) {
  const auto Bs = static_cast<std::size_t>(B);
  Eigen::MatrixXd C(B, B);
  for (int i = 0; i < B; ++i)
    for (int j = 0; j < B; ++j) C(i, j) = cov[static_cast<std::size_t>(i) * Bs + static_cast<std::size_t>(j)];
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(C);
  if (es.info() != Eigen::Success) throw Error("PCA: the eigen-decomposition of the covariance did not converge");
  pre.pca_k = K;
  pre.components.assign(static_cast<std::size_t>(K) * Bs, 0.0);
  std::vector<double> explained;
  for (int k = 0; k < K; ++k) {
    const int col = B - 1 - k;  // eigenvalues ascending: take from the end
    Eigen::VectorXd v = es.eigenvectors().col(col);
    Eigen::Index imax = 0;
    for (Eigen::Index i = 1; i < v.size(); ++i)
      if (std::fabs(v(i)) > std::fabs(v(imax))) imax = i;
    if (v(imax) < 0) v = -v;  // sign convention: the largest-magnitude entry is positive
    for (int b = 0; b < B; ++b) pre.components[static_cast<std::size_t>(k) * Bs + static_cast<std::size_t>(b)] = v(b);
    explained.push_back(es.eigenvalues()(col));
  }
  return explained;
}

}  // namespace

std::vector<double> pca_pass(PassContext& ctx, const BandStats& stats, Preprocessor& pre) {
  const int B = static_cast<int>(ctx.plan.kept.size());
  const auto Bs = static_cast<std::size_t>(B);
  pre.pca_mean.assign(Bs, 0.0);
  for (std::size_t b = 0; b < Bs; ++b) pre.pca_mean[b] = (stats.mean[b] - pre.shift[b]) / pre.scale[b];
  FixedSym acc(B);
  collective_step(ctx.comm, "the PCA pass", [&] {
    const auto& blocks = ctx.plan.stats_blocks();
    RowWindow scratch;
    std::uint64_t rows_total = 0, rows_done = 0;
    for (const Block& b : blocks) rows_total += b.r1 - b.r0;
    ProgressLine prog = ctx.plan.progress("PCA pass", "rows", rows_total);
    for (std::size_t bi = 0; bi < blocks.size(); ++bi) {
      const Block& b = blocks[bi];
      test_pause("HSIPIPE_TEST_DELAY_STATS_MS");  // as in the statistics pass
      const RowWindow& w = ctx.window_for(bi, b, scratch, ctx.keeps_windows(b.scene));
      const auto t0 = Clock::now();
      add_block_covariance(ctx, w, b, pre, acc);
      ctx.t.compute += seconds_since(t0);
      prog.update(rows_done += b.r1 - b.r0, static_cast<std::size_t>(b.scene));
    }
    prog.finish();
  });
  const auto mine = acc.pack();
  const auto all = ctx.comm.allgatherv(mine);
  FixedSym total(B);
  for (std::size_t off = 0; off + mine.size() <= all.size() && !mine.empty(); off += mine.size())
    total.add(FixedSym::unpack(all.data() + off, B));
  return principal_components(total.to_double(static_cast<double>(stats.n)), B, ctx.plan.opts.pca, pre);
}

}  // namespace hsipipe::cache

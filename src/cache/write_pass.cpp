// cache/write_pass: the write pass of a decode (see write_pass.hpp).
#include "cache/write_pass.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <optional>

#include "cache/h5util.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/hash.hpp"
#include "core/overlap.hpp"
#include "core/test_hook.hpp"

namespace hsipipe::cache {

/// h5: whether block k+1 is built while block k goes through the collective write (core/overlap.hpp), so
/// that the copy into the file and the waits in the write (the other ranks, the file's inode lock,
/// writeback) happen beside the building. That needs a second CPU for this rank: bound to one (mpiexec's
/// default with few ranks, srun --cpus-per-task=1) the two threads only take turns (scripts/bench_decode_ab.sh,
/// 1 Dec 2026: 1 rank 0.942 -> 0.933 s, 2 ranks 0.613 -> 0.605 s, within noise; 2-3% slower before the h5
/// pieces below); with two CPUs (1 rank, --bind-to none) 0.858 -> 0.776 s. The writing thread then makes every
/// MPI and HDF5 call of the pass, which needs MPI_THREAD_SERIALIZED and a build that calls neither: it
/// reads no source (kept samples) or only scenes that do not use the HDF5 library, which Debian builds
/// without thread safety. Tests: HSIPIPE_TEST_DECODE_OVERLAP=0 turns it off, =1 on even with one CPU.
bool overlap_writes(const DecodePlan& plan, bool keeps_samples) {
  const std::optional<bool> forced = test_switch("HSIPIPE_TEST_DECODE_OVERLAP");
  if (forced == false) return false;
  if (dist::thread_level() < MPI_THREAD_SERIALIZED) return false;
  if (forced != true && fs::cpus_available() < 2) return false;
  if (keeps_samples) return true;
  return std::none_of(plan.scenes.begin(), plan.scenes.end(), [](const SceneState& st) { return st.scene->uses_hdf5(); });
}

namespace {

class WritePass {
 public:
  WritePass(PassContext& ctx, const Preprocessor& pre, Sink& sink);
  WriteOutput run();

 private:
  /// A rank's write unit: a block, or a piece of one.
  struct Unit {
    std::size_t bi;
    std::uint64_t s0, s1;  // pixel layout: the samples of the unit
    std::size_t r0, r1;    // pixel layout: its rows (pieces of rows: the rows it decodes again)
  };
  /// A built unit: its items [first, first + n) and where their bytes are (the file's pages, or `bytes`).
  struct Slot {
    std::uint64_t first = 0, n = 0;
    const char* placed = nullptr;
    std::vector<char> bytes;
  };

  /// Whether write block bi is decoded again a slice at a time (its window was not kept).
  bool in_slices(std::size_t bi) const {
    return !ctx_.rows.holds(bi) && ctx_.decodes_again(plan_.write_plan[bi].scene);
  }
  std::vector<Unit> plan_units(const std::vector<std::size_t>& blocks) const;
  void build(std::uint64_t k, Slot& s);
  void build_pixel(const Unit& u, const RowWindow& w, bool slices, Slot& s);
  void build_cube(const Block& b, const RowWindow& w, bool slices, Slot& s);
  void build_patch(const Unit& u, const RowWindow& w, bool tw_ready, Slot& s);
  char* place_unit(Slot& s, std::size_t item);
  void store_items(std::uint64_t m, std::size_t item, char* out);
  void decode_slice(int scene, std::size_t r0, std::size_t r1);
  void store(const Slot& s);
  void write_independent();
  void write_collective();

  PassContext& ctx_;
  const DecodePlan& plan_;
  const Preprocessor& pre_;
  Sink& sink_;
  const DType dt_;
  const std::size_t es_, Bo_, pp_;
  WriteOutput out_;
  std::optional<ProgressLine> prog_;
  int a_ = 0;                // the array being written
  std::vector<Unit> units_;  // this rank's units of it, in order
  std::uint64_t done_ = 0, all_rounds_ = 0;
  std::vector<float> fout_, kept_buf_;
  RowWindow scratch_, tw_;          // tw_: a patch block's transformed rows
  std::size_t tw_block_ = SIZE_MAX;  // the write block whose rows tw_ holds
  // the unit being built: its scene, its hashes, its time spent getting pages and decoding again
  const SceneState* st_ = nullptr;
  std::vector<std::uint64_t>* hv_ = nullptr;
  double placing_ = 0, reading_ = 0;
};

WritePass::WritePass(PassContext& ctx, const Preprocessor& pre, Sink& sink)
    : ctx_(ctx),
      plan_(ctx.plan),
      pre_(pre),
      sink_(sink),
      dt_(ctx.plan.opts.dtype),
      es_(dtype_size(ctx.plan.opts.dtype)),
      Bo_(static_cast<std::size_t>(pre.out_bands())),
      pp_(static_cast<std::size_t>(ctx.plan.p) * static_cast<std::size_t>(ctx.plan.p)) {}

WriteOutput WritePass::run() {
  const Layout layout = plan_.opts.layout;
  const int n_arrays_data = layout == Layout::cube ? static_cast<int>(plan_.scenes.size()) : 1;
  out_.cube_hashes.assign(plan_.scenes.size(), {});
  std::vector<std::vector<std::size_t>> blocks_of(static_cast<std::size_t>(n_arrays_data));
  for (std::size_t bi = 0; bi < plan_.write_plan.size(); ++bi)
    blocks_of[layout == Layout::cube ? static_cast<std::size_t>(plan_.write_plan[bi].scene) : 0].push_back(bi);
  std::uint64_t total_units = 0;
  for (const auto& b : plan_.write_plan) total_units += layout == Layout::cube ? b.r1 - b.r0 : b.s1 - b.s0;
  prog_.emplace(plan_.progress("write pass", layout == Layout::cube ? "rows" : "samples", total_units));
  for (a_ = 0; a_ < n_arrays_data; ++a_) {
    units_ = plan_units(blocks_of[static_cast<std::size_t>(a_)]);
    if (sink_.independent_writes()) write_independent();
    else write_collective();
  }
  prog_->finish();
  return std::move(out_);
}

/// This rank's write units of the array, in order: its blocks; but for a sink that copies from our buffer
/// (h5), the pixel samples the statistics pass kept go in pieces of about 2 MiB, so that a piece is still
/// in the core's L2 when the sink copies it (scripts/bench_decode_ab.sh with
/// HSIPIPE_TEST_PIECE_BYTES=1099511627776, i.e. whole blocks, against the default: 2 ranks 0.631 -> 0.603 s,
/// 1 rank 0.948 -> 0.906 s, and no slow outliers; 0.5, 1 and 4 MiB pieces were slower than 2). Tests shrink
/// the pieces. Pixel samples decoded again (decodes_again) go in pieces of whole rows of about that size
/// (each piece decodes its rows again: together they read the block's rows, as the statistics pass did),
/// for h5 alike (the benchmark's decode, rotated rounds of 8, min wall, 2 Dec 2026: 1 rank 0.741 -> 0.720 s,
/// 2 ranks 0.522 -> 0.505 s); npy takes whole blocks (pieces: 1 rank 0.700 -> 0.724 s, 2 ranks 0.410 ->
/// 0.460 s; a piece's pages handed to writeback while the next is built were slower).
std::vector<WritePass::Unit> WritePass::plan_units(const std::vector<std::size_t>& blocks) const {
  const Layout layout = plan_.opts.layout;
  static const std::uint64_t piece_bytes = test_value("HSIPIPE_TEST_PIECE_BYTES", 2u << 20);
  const std::uint64_t per = std::max<std::uint64_t>(1, piece_bytes / std::max<std::uint64_t>(1, Bo_ * es_));
  // Patch blocks go in pieces of at most ~32 MiB of output: a block's rows are sized by its input
  // (rows_per_block), and its patches are p*p times that (p = 9 on a dense 1536 x 200 scene: 2.7 GB of
  // float32 per block, before). The pieces of a block share its window, transformed once.
  static const std::uint64_t patch_piece_bytes = test_value("HSIPIPE_TEST_PATCH_PIECE_BYTES", 32u << 20);
  const std::uint64_t per_patch = std::max<std::uint64_t>(1, patch_piece_bytes / std::max<std::uint64_t>(1, Bo_ * pp_ * es_));
  std::vector<Unit> units;
  for (const std::size_t bi : blocks) {
    const Block& b = plan_.write_plan[bi];
    if (layout == Layout::patch) {
      for (std::uint64_t s = b.s0; s < b.s1; s += per_patch) units.push_back({bi, s, std::min(b.s1, s + per_patch), b.r0, b.r1});
    } else if (layout == Layout::pixel && ctx_.kept.active() && !sink_.independent_writes()) {
      for (std::uint64_t s = b.s0; s < b.s1; s += per) units.push_back({bi, s, std::min(b.s1, s + per), b.r0, b.r1});
    } else if (layout == Layout::pixel && !sink_.independent_writes() && in_slices(bi)) {
      std::uint64_t s = b.s0;
      for (std::size_t r = b.r0; r < b.r1;) {
        const std::size_t r0 = r;
        const std::uint64_t s0 = s;
        do {  // whole rows, until the piece has `per` samples
          ++r;
          while (s < b.s1 && static_cast<std::size_t>(plan_.table.row[s]) < r) ++s;
        } while (r < b.r1 && s - s0 < per);
        units.push_back({bi, s0, s, r0, r});
      }
    } else {
      units.push_back({bi, b.s0, b.s1, b.r0, b.r1});
    }
  }
  return units;
}

/// Builds this rank's unit k into s (n = 0 past its last one).
void WritePass::build(std::uint64_t k, Slot& s) {
  s.first = s.n = 0;
  s.placed = nullptr;
  if (k >= units_.size()) return;
  const Unit& u = units_[k];
  const std::size_t bi = u.bi;
  const Block& b = plan_.write_plan[bi];
  // Kept samples: the statistics pass kept this rank's sample pixels, nothing is decoded again. A block
  // of a scene decoded again (pixel, cube) is decoded below a slice at a time, each slice stored while
  // in cache.
  st_ = &plan_.scenes[static_cast<std::size_t>(b.scene)];
  hv_ = plan_.opts.layout == Layout::cube ? &out_.cube_hashes[static_cast<std::size_t>(b.scene)] : &out_.hashes;
  const bool slices = in_slices(bi);
  // a patch block's later pieces cut from tw_, which its first piece filled
  const bool tw_ready = plan_.opts.layout == Layout::patch && tw_block_ == bi;
  const RowWindow& w = ctx_.kept.active() || slices || tw_ready ? scratch_ : ctx_.window_for(bi, b, scratch_, false);
  const auto t0 = Clock::now();
  placing_ = reading_ = 0;
  if (plan_.opts.layout == Layout::pixel) build_pixel(u, w, slices, s);
  else if (plan_.opts.layout == Layout::cube) build_cube(b, w, slices, s);
  else build_patch(u, w, tw_ready, s);
  ctx_.t.compute += seconds_since(t0) - placing_ - reading_;
  ctx_.t.placing += placing_;
  // the window is no longer needed after the block's last unit
  if (k + 1 >= units_.size() || units_[k + 1].bi != bi) ctx_.rows.release(bi);
}

/// Rows [r0, r1) of the block's scene decoded again into scratch_, timed as reading.
void WritePass::decode_slice(int scene, std::size_t r0, std::size_t r1) {
  const auto tr = Clock::now();
  ctx_.rows.read_window(static_cast<std::size_t>(scene), r0, r1, scratch_);  // books its own time (reading, band selection)
  reading_ += seconds_since(tr);
}

/// Where the slot's items [first, first + n) of `item` bytes are built: the file's pages, or its buffer.
char* WritePass::place_unit(Slot& s, std::size_t item) {
  const auto tp = Clock::now();
  char* dst = static_cast<char*>(sink_.place(a_, s.first, s.n));
  placing_ += seconds_since(tp);  // getting the file's pages is writing, not decoding
  if (!dst) {
    s.bytes.resize(s.n * item);
    dst = s.bytes.data();
  }
  s.placed = dst;
  return dst;
}

/// m items of float32 values (fout_) converted to the dtype at out, each hashed.
void WritePass::store_items(std::uint64_t m, std::size_t item, char* out) {
  try {
    store_values(fout_.data(), m * (item / es_), dt_, out);
  } catch (const ConfigError& e) {  // float16 overflow: which scene's values
    throw ConfigError(st_->input.scene.str() + " (scene '" + st_->input.name + "'): " + e.what());
  }
  for (std::uint64_t i = 0; i < m; ++i) hv_->push_back(xxh3_64(out + i * item, item));
}

/// Transform, convert and hash a few samples at a time while they are in cache: the float32 results never
/// travel through memory (the block's floats would be 2-4x its bytes).
void WritePass::build_pixel(const Unit& u, const RowWindow& w, bool slices, Slot& s) {
  const auto& table = plan_.table;
  s.n = u.s1 - u.s0;
  s.first = u.s0;
  const std::size_t item = Bo_ * es_;
  constexpr std::uint64_t kGroup = 32;
  fout_.resize(kGroup * Bo_);
  char* dst = place_unit(s, item);
  const std::uint64_t first = s.first, n = s.n;
  // samples [g, g + m) of the unit
  auto build_group = [&](std::uint64_t g, std::uint64_t m) {
    for (std::uint64_t i = 0; i < m; ++i) {
      const auto id = u.s0 + g + i;
      // staged samples: dst holds the unit's kept samples; each group is read before it is overwritten
      const float* px = ctx_.kept.active()
                            ? ctx_.kept.get(ctx_.kept.slot(id, dst, first), kept_buf_)
                            : w.pixel(static_cast<std::size_t>(table.row[id]), static_cast<std::size_t>(table.col[id]));
      pre_.apply(px, fout_.data() + i * Bo_);
    }
    store_items(m, item, dst + g * item);
  };
  if (!slices) {
    for (std::uint64_t g = 0; g < n; g += kGroup) build_group(g, std::min(kGroup, n - g));
    return;
  }
  // the piece's rows, a slice at a time, each slice's samples built while it is in cache
  const int scene = plan_.write_plan[u.bi].scene;
  const std::size_t step = ctx_.rows.slice_rows(static_cast<std::size_t>(scene));
  std::uint64_t g = 0;
  for (std::size_t r0 = u.r0; r0 < u.r1; r0 += step) {
    const std::size_t r1 = std::min(u.r1, r0 + step);
    decode_slice(scene, r0, r1);
    std::uint64_t e = g;
    while (e < n && static_cast<std::size_t>(table.row[u.s0 + e]) < r1) ++e;
    for (; g < e; g += std::min(kGroup, e - g)) build_group(g, std::min(kGroup, e - g));
  }
}

/// One row at a time: transform it into a row of float32 (in cache), convert it into its place (the file's
/// pages, or the slot's buffer) and hash it. No block-sized float32 copy: a fresh one per block was a third
/// of the 1-rank cube decode's time, zeroing its pages (perf, 2 Dec 2026).
void WritePass::build_cube(const Block& b, const RowWindow& w, bool slices, Slot& s) {
  s.first = b.r0;
  s.n = b.r1 - b.r0;
  const std::size_t cols = st_->cols;  // not w's: w is filled below when sliced
  const std::size_t row_vals = cols * Bo_, item = row_vals * es_;
  char* dst = place_unit(s, item);
  fout_.resize(row_vals);
  const std::size_t step = slices ? ctx_.rows.slice_rows(static_cast<std::size_t>(b.scene)) : s.n;
  for (std::size_t r0 = b.r0; r0 < b.r1; r0 += step) {
    const std::size_t r1 = std::min(b.r1, r0 + step);
    if (slices) decode_slice(b.scene, r0, r1);
    for (std::size_t r = r0; r < r1; ++r) {
      const float* in = w.pixel(r, 0);
      for (std::size_t c = 0; c < cols; ++c) pre_.apply(in + c * static_cast<std::size_t>(w.bands), fout_.data() + c * Bo_);
      store_items(1, item, dst + (r - b.r0) * item);
    }
  }
}

/// The block's first piece transforms every read row (the halo too) into tw_, reused from block to block;
/// each piece then cuts its patches a few at a time, stored into their place.
void WritePass::build_patch(const Unit& u, const RowWindow& w, bool tw_ready, Slot& s) {
  if (!tw_ready) {
    tw_.row0 = w.row0;
    tw_.nrows = w.nrows;
    tw_.cols = w.cols;
    tw_.scene_rows = w.scene_rows;
    tw_.bands = static_cast<int>(Bo_);
    tw_.data.resize(w.nrows * w.cols * Bo_);
    const std::size_t npx = w.nrows * w.cols;
    for (std::size_t i = 0; i < npx; ++i)
      pre_.apply(w.data.data() + i * static_cast<std::size_t>(w.bands), tw_.data.data() + i * Bo_);
    tw_block_ = u.bi;
  }
  s.first = u.s0;
  s.n = u.s1 - u.s0;
  const std::size_t vals = Bo_ * pp_, item = vals * es_;
  char* dst = place_unit(s, item);
  constexpr std::uint64_t kGroup = 8;
  fout_.resize(kGroup * vals);
  for (std::uint64_t g = 0; g < s.n; g += kGroup) {
    const std::uint64_t m = std::min(kGroup, s.n - g);
    for (std::uint64_t i = 0; i < m; ++i) {
      const auto id = u.s0 + g + i;
      cut_patch(tw_, static_cast<std::size_t>(plan_.table.row[id]), static_cast<std::size_t>(plan_.table.col[id]), plan_.p,
                plan_.opts.border, fout_.data() + i * vals);
    }
    store_items(m, item, dst + g * item);
  }
}

void WritePass::store(const Slot& s) {
  if (s.n > 0) test_pause("HSIPIPE_TEST_DELAY_WRITE_MS");  // a window for kill -9 mid-write
  const auto tw0 = Clock::now();
  sink_.write(a_, s.first, s.n, s.placed);
  ctx_.t.write += seconds_since(tw0);
  done_ += s.n;
  if (s.n > 0)
    prog_->update(done_, static_cast<std::size_t>(plan_.opts.layout == Layout::cube ? a_ : plan_.table.scene[s.first]));
}

/// npy: each rank writes its own byte ranges; nothing needs the ranks in step, so a failure is checked
/// once, after this rank's last block (no rank waits for another at every block).
void WritePass::write_independent() {
  out_.mode = "independent (each rank stores its own byte ranges)";
  collective_step(ctx_.comm, "decoding and writing the blocks", [&] {
    Slot s;
    for (std::uint64_t k = 0; k < units_.size(); ++k) {
      build(k, s);
      store(s);
    }
  });
}

/// h5: every rank takes part in the same number of collective writes; a block that failed on any rank
/// fails every rank before the write (a round writes one unit). The next unit is built while this one is
/// written (HDF5 and MPI on the writing thread only), when the build calls neither: see overlap_writes().
/// Costs one more unit of output bytes per rank (the second slot).
void WritePass::write_collective() {
  const dist::Comm& comm = ctx_.comm;
  const std::uint64_t rounds = comm.allreduce_max<std::uint64_t>(units_.size());
  // COLLECTIVE: the same on every rank (the writing thread's sleeping barrier is a collective call, and
  // the summary speaks for all): overlapped only when every rank can
  const bool overlap = comm.allreduce_min<std::int32_t>(overlap_writes(plan_, ctx_.kept.active()) ? 1 : 0) == 1;
  all_rounds_ += rounds;
  out_.mode = "collective, " + std::to_string(all_rounds_) + " rounds, " +
              (overlap ? "each overlapped with building the next block" : "in turn with building the blocks");
  overlap_rounds<Slot>(
      rounds, overlap, [&](std::uint64_t k, Slot& s) { build(k, s); },
      [&](std::uint64_t, Slot& s, const std::exception_ptr& err) {
        h5::Silence quiet;  // on this thread too (a thread-safe HDF5 keeps the setting per thread)
        // Overlapped, the writing thread waits for the other ranks asleep, not in MPI's spinning progress
        // loop, whose CPU time the building thread could use
        if (overlap) comm.barrier_sleeping(std::chrono::microseconds(50));
        collective_step(comm, "decoding a block", [&] {
          if (err) std::rethrow_exception(err);
        });
        store(s);
      });
}

}  // namespace

WriteOutput write_pass(PassContext& ctx, const Preprocessor& pre, Sink& sink) { return WritePass(ctx, pre, sink).run(); }

}  // namespace hsipipe::cache

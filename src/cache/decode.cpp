// cache/decode: the collective decode (see decode.hpp for how ranks share the work), as a sequence of
// named steps over the units of src/cache: decode_plan (scenes, sample table, blocks), row_windows (rows
// and the boundary-row exchange), decode_passes (statistics, PCA), kept_samples, write_pass,
// source_hasher, reuse, publish, decode_manifest and decode_report.
#include "cache/decode.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "cache/decode_manifest.hpp"
#include "cache/decode_passes.hpp"
#include "cache/decode_plan.hpp"
#include "cache/decode_report.hpp"
#include "cache/h5util.hpp"
#include "cache/kept_samples.hpp"
#include "cache/publish.hpp"
#include "cache/reuse.hpp"
#include "cache/row_windows.hpp"
#include "cache/sink.hpp"
#include "cache/source_hasher.hpp"
#include "cache/write_pass.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/signals.hpp"
#include "core/test_hook.hpp"

namespace hsipipe::cache {

namespace {

class Decoder {
 public:
  Decoder(const DecodeOptions& o, const dist::Comm& c) : opts_(o), comm_(c), rank_(c.rank()), plan_(o, c.size(), c.rank()) {}
  /// COLLECTIVE.
  DecodeResult run();

 private:
  // every rank, in this order
  void setup();
  void resolve_out();
  std::optional<DecodeResult> reused();
  DecodeResult build();
  std::unique_ptr<Sink> make_sink();
  void write_table(Sink& sink, int labels_idx);
  void run_passes(Sink& sink);
  void write_band_arrays(Sink& sink);
  std::string checksum(SourceHasher& hasher, std::string& manifest);
  void publish(Sink& sink, const std::string& manifest);
  // rank 0
  void take_lock();
  void check_existing();
  void prepare_output();

  std::uint64_t bytes_read() const;  ///< source bytes this rank's readers read

  const DecodeOptions& opts_;
  const dist::Comm& comm_;
  const int rank_;
  const Clock::time_point t_total_ = Clock::now();
  Timers t_;
  DecodePlan plan_;
  std::optional<RowWindows> rows_;
  KeptSamples kept_;
  std::optional<BandStats> stats_;
  Preprocessor pre_;
  std::vector<double> explained_;
  WriteOutput written_;
  nlohmann::json params_;
  std::string out_, tmp_;
  // rank 0: the folders made for --out's parent (removed again, after the lock file, when the decode is refused
  // or fails: it leaves nothing behind; a published cache keeps them), the lock, the sources as the manifest
  // lists them, and what to do with a cache already there
  fs::MadeDirs made_;
  std::unique_ptr<LockFile> lock_;
  nlohmann::json decision_ = {{"action", "go"}}, sources_;
};

std::uint64_t Decoder::bytes_read() const {
  std::uint64_t n = 0;
  for (const auto& st : plan_.scenes) n += st.scene->bytes_read();
  return n;
}

/// COLLECTIVE. Every rank, identical and deterministic: options checked, inputs opened, parameters known;
/// errors here precede any write.
void Decoder::setup() {
  collective_step(comm_, "decode setup", [&] { plan_.open(); });
  plan_.share_labels(comm_);
  collective_step(comm_, "decode parameters", [&] {
    DecodeOptions read = opts_;  // with the variables and image sizes the readers used
    for (std::size_t i = 0; i < plan_.scenes.size(); ++i) read.scenes[i] = plan_.scenes[i].input;
    params_ = decode_params_json(read);  // after DecodePlan::open, which names a bad --drop-bands first
  });
  std::vector<const io::Scene*> scenes;
  for (const auto& st : plan_.scenes) scenes.push_back(st.scene.get());
  rows_.emplace(std::move(scenes), plan_.kept, t_, opts_.memory_bytes);
}

/// COLLECTIVE. --out as rank 0 sees it (destination_path): no trailing '/', a symbolic link's target.
void Decoder::resolve_out() {
  collective_step(comm_, "resolving --out", [&] {
    if (rank_ != 0) return;
    bool link = false;
    out_ = destination_path(opts_.out, &link);
    if (link) std::cerr << "decode: --out " << opts_.out << " is a symbolic link: building its target " << out_ << "\n";
  });
  out_ = comm_.bcast_string(out_);
}

/// Rank 0 takes the lock (once): leftovers of killed runs are dead then.
void Decoder::take_lock() {
  if (lock_) return;
  made_.make(parent_dir(out_));
  lock_ = std::make_unique<LockFile>(out_ + ".lock");
  install_interrupt_note("decode of " + out_ + " stopped; nothing was published (" + out_ +
                         " is as it was). The next decode of it removes the lock " + out_ + ".lock and the temporary copy " + out_ +
                         ".tmp-*: run the same command again");
  remove_job_copies(out_, [](const std::string& p) {
    std::cerr << "decode: removing " << p << " (left by an interrupted decode)\n";
  });
}

/// Rank 0. An existing cache is reused or refused by comparing source hashes: hash now (holding the lock).
/// Otherwise nothing needs the hashes before the manifest: the ranks compute them while they decode
/// (SourceHasher).
void Decoder::check_existing() {
  // A current cache where this job cannot create the lock file (a read-only mount, a folder of another
  // user's) is still reused: reusing writes nothing. Anything else needs the lock and fails with its error.
  std::optional<IoError> no_lock;
  std::optional<LockFile> read_lock;  // held while the cache is compared
  try {
    take_lock();
  } catch (const IoError& e) {
    if (!std::filesystem::exists(out_)) throw;
    no_lock = e;
    read_lock.emplace(out_ + ".lock", LockFile::Mode::read_only);  // a decode building there now fails this
  }
  sources_ = describe_sources(plan_.scenes);
  if (!std::filesystem::exists(out_)) return;
  hash_sources(sources_);
  const bool any_label_nodata = std::any_of(plan_.scenes.begin(), plan_.scenes.end(),
                                            [](const SceneState& st) { return st.labels && st.labels->nodata; });
  decision_ = decide_reuse(out_, params_, sources_, opts_.force, any_label_nodata);
  if (no_lock && decision_.value("action", "go") != "reuse") throw *no_lock;
  if (no_lock) std::cerr << "decode: checked " << out_ << " without its lock, read-only (" << no_lock->what() << ")\n";
}

/// COLLECTIVE. Every rank: rank 0's decision; a reused cache ends the run here, with its summary.
std::optional<DecodeResult> Decoder::reused() {
  const auto d = nlohmann::json::parse(comm_.bcast_string(rank_ == 0 ? decision_.dump() : std::string()));
  if (d.value("action", "go") != "reuse") return std::nullopt;
  const std::string cs = d.value("checksum", "");
  const std::uint64_t pixels = comm_.allreduce_sum(bytes_read());  // the scenes' readers, all ranks
  if (rank_ == 0) {
    std::uint64_t hashed = 0;  // the sources' bytes read to compare them with the manifest's hashes
    for (const auto& src : sources_) hashed += src.value("hashed_bytes", src.value("size", std::uint64_t{0}));
    print_reuse_summary(plan_, out_, cs, seconds_since(t_total_), hashed, pixels);
  }
  return DecodeResult{true, out_, cs, d.value("n_samples", std::uint64_t{0})};
}

/// Rank 0, under the lock: a cache another job published meanwhile is checked now; otherwise the sizes,
/// the free space and the temporary directory.
void Decoder::prepare_output() {
  if (!lock_) check_existing();
  if (decision_["action"] == "reuse") return;
  const auto parent = std::filesystem::path(out_).parent_path();
  if (auto nfs = fs::network_fs_type(parent.string()))
    std::cerr << "decode: warning: " << out_ << " is on a network file system (" << *nfs
              << "); caches belong on node-local disk (see hsipipe stage)\n";
  const std::uint64_t need = print_sizes(plan_);
  const std::uint64_t free = fs::free_bytes(parent.string());
  if (need > free)
    throw ConfigError("decode: the " + layout_name(opts_.layout) + " cache needs " + human_bytes(static_cast<double>(need)) +
                      " but " + parent.string() + " has " + human_bytes(static_cast<double>(free)) + " free" +
                      (opts_.layout == Layout::patch ? " (use --layout cube: patches are cut at load time)" : ""));
  tmp_ = job_copy_name(out_, "tmp");
  if (!std::filesystem::create_directory(tmp_)) throw IoError(tmp_, "mkdir: already exists");
}

DecodeResult Decoder::run() {
  h5::Silence quiet;
  setup();
  resolve_out();
  // A cache already there is checked before the validity pass and the sample table: reusing it then
  // reads only what hashing the sources reads (the validity pass decodes every row of an unlabeled scene).
  // Where there is none, the table's errors (zero samples, labels out of range) come before any write,
  // even the lock file's.
  t_.phase("open");
  collective_step(comm_, "checking the cache already there", [&] {
    if (rank_ == 0 && std::filesystem::exists(out_)) check_existing();
  });
  if (auto r = reused()) return *r;
  t_.phase("reuse check");
  plan_.validity_pass(comm_, t_);
  collective_step(comm_, "building the sample table", [&] { plan_.build_table(); });
  t_.phase("sample table");
  collective_step(comm_, "preparing the output", [&] {
    if (rank_ == 0) prepare_output();
  });
  if (auto r = reused()) return *r;
  tmp_ = comm_.bcast_string(tmp_);
  t_.phase("lock + output directory");
  // ---- the collective decode into tmp; on failure rank 0 removes tmp
  try {
    return build();
  } catch (...) {
    if (rank_ == 0 && !tmp_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(tmp_, ec);
    }
    throw;
  }
}

/// COLLECTIVE. The cache's arrays, created (and their blocks reserved) before the statistics pass, which
/// may stage the kept samples in the file's pages.
std::unique_ptr<Sink> Decoder::make_sink() {
  std::vector<ArraySpec> arrays;
  const std::uint64_t N = plan_.table.size(), OB = plan_.out_bands();
  const auto p = static_cast<std::uint64_t>(plan_.p);
  if (opts_.layout == Layout::cube) {
    for (std::size_t s = 0; s < plan_.scenes.size(); ++s)
      arrays.push_back({"cube_" + std::to_string(s), "/cube/" + std::to_string(s), opts_.dtype,
                        {plan_.scenes[s].rows, plan_.scenes[s].cols, OB}});
  } else if (opts_.layout == Layout::patch) {
    arrays.push_back({"samples", "/samples", opts_.dtype, {N, OB, p, p}});
  } else {
    arrays.push_back({"samples", "/samples", opts_.dtype, {N, OB}});
  }
  arrays.push_back({"labels", "/labels", DType::i32, {N}});
  arrays.push_back({"coords", "/coords", DType::i32, {N, 3}});
  const auto tw0 = Clock::now();
  auto sink = opts_.backend == "h5" ? make_h5_sink(tmp_, arrays, comm_) : make_npy_sink(tmp_, arrays, comm_);
  t_.write += seconds_since(tw0);
  return sink;
}

/// COLLECTIVE. Labels and coords of this rank's range, known from the sample table: written now, so that
/// their writeback starts beside the statistics pass instead of joining the samples' at the end.
void Decoder::write_table(Sink& sink, int labels_idx) {
  const auto tl0 = Clock::now();
  const Range my = plan_.my;
  const SampleTable& table = plan_.table;
  // npy writes are rank-local: a failure (a full disk, no memory) must fail every rank, not leave them waiting
  collective_step(comm_, "writing the labels and coordinates", [&] {
    std::vector<std::int32_t> crd(3 * my.size());
    for (std::uint64_t i = my.begin; i < my.end; ++i) {
      crd[3 * (i - my.begin)] = table.scene[i];
      crd[3 * (i - my.begin) + 1] = table.row[i];
      crd[3 * (i - my.begin) + 2] = table.col[i];
    }
    sink.write(labels_idx, my.begin, my.size(), table.label.data() + my.begin);
    sink.write(labels_idx + 1, my.begin, my.size(), crd.data());
  });
  t_.write += seconds_since(tl0);
}

/// COLLECTIVE. The statistics and PCA passes, then the write pass.
void Decoder::run_passes(Sink& sink) {
  PassContext ctx{plan_, comm_, *rows_, kept_, t_};
  // The boundary rows are the write pass's: exchanged before a statistics pass over its blocks, or after
  // the passes over other rows (statistics over all pixels), which would otherwise copy those it holds
  // and read them again where another rank does (bytes read then depended on the rank count). The cube
  // layout's rows are split at block multiples already: nothing to exchange.
  const auto exchange = [&] {
    if (opts_.layout != Layout::cube)
      rows_->exchange(comm_, [&](std::size_t s, int q) { return plan_.need_rows(s, q); });
  };
  if (plan_.stats_is_write) exchange();
  stats_ = stats_pass(ctx, sink);
  ctx.forget_rows_decoded_here();
  pre_ = preprocessor_from_stats(plan_, *stats_);
  if (opts_.pca > 0) explained_ = pca_pass(ctx, *stats_, pre_);
  else pre_.pca_k = 0;
  if (!plan_.stats_is_write) exchange();
  t_.phase(opts_.pca > 0 ? "statistics + PCA" : "statistics");
  written_ = write_pass(ctx, pre_, sink);
}

/// COLLECTIVE. The small arrays: band statistics, wavelengths, PCA components.
void Decoder::write_band_arrays(Sink& sink) {
  const auto tw0 = Clock::now();
  const auto B = static_cast<std::uint64_t>(plan_.kept.size());
  const auto var = stats_->variance();
  std::vector<double> sd(var.size());
  for (std::size_t b = 0; b < var.size(); ++b) sd[b] = std::sqrt(var[b]);
  sink.write_small({"band_mean", "/band_mean", DType::f64, {B}}, stats_->mean.data());
  sink.write_small({"band_std", "/band_std", DType::f64, {B}}, sd.data());
  std::vector<double> wl;
  const auto& bi = plan_.scenes[0].scene->band_info();
  if (!bi.wavelengths.empty())
    for (int b : plan_.kept) wl.push_back(bi.wavelengths[static_cast<std::size_t>(b)]);
  sink.write_small({"wavelengths", "/wavelengths", DType::f64, {wl.size()}}, wl.data());
  if (pre_.pca_k > 0)
    sink.write_small({"pca_components", "/pca_components", DType::f64, {static_cast<std::uint64_t>(pre_.pca_k), B}},
                     pre_.components.data());
  t_.write += seconds_since(tw0);
}

/// COLLECTIVE. The data checksum (per-item hashes in item order) and the manifest, built by rank 0 and
/// given to every rank.
std::string Decoder::checksum(SourceHasher& hasher, std::string& manifest) {
  std::vector<std::uint64_t> all_hashes;
  if (opts_.layout == Layout::cube) {
    for (const auto& h : written_.cube_hashes) {
      auto g = comm_.allgatherv(h);
      all_hashes.insert(all_hashes.end(), g.begin(), g.end());
    }
  } else {
    all_hashes = comm_.allgatherv(written_.hashes);
  }
  hasher.finish(comm_, sources_);  // rank 0's sources get their hashes; fails everywhere if one failed
  const std::uint64_t source_bytes_read = comm_.allreduce_sum(bytes_read());
  std::string checksum;
  collective_step(comm_, "building the manifest", [&] {
    if (rank_ != 0) return;
    checksum = data_checksum_of(std::move(all_hashes), plan_.table);
    manifest = build_manifest(plan_, params_, sources_, DecodeFacts{*stats_, pre_, explained_, checksum, source_bytes_read});
  });
  manifest = comm_.bcast_string(manifest);
  return comm_.bcast_string(checksum);
}

/// COLLECTIVE. The sink closed (durable, h5: the manifest as its attribute), then rank 0 writes the
/// manifest and renames the temporary directory to --out.
void Decoder::publish(Sink& sink, const std::string& manifest) {
  const auto tw1 = Clock::now();
  sink.finish(manifest);
  t_.write += seconds_since(tw1);
  collective_step(comm_, "publishing the cache", [&] {
    if (rank_ != 0) return;
    test_pause("HSIPIPE_TEST_DELAY_PUBLISH_MS");  // a window for kill -9 before publishing
    fs::write_text_atomic(tmp_ + "/manifest.json", manifest);
    fsync_dir(tmp_);
    publish_dir(tmp_, out_);
    clear_interrupt_note();  // published: the note's "nothing was published" no longer holds
  });
}

/// COLLECTIVE. The decode into tmp_, published as out_.
DecodeResult Decoder::build() {
  plan_.plan_blocks();
  // No cache existed, so nothing needs the source hashes before the manifest: every rank hashes a
  // share of the sources' chunks on a thread beside its decode.
  const nlohmann::json all_sources = nlohmann::json::parse(comm_.bcast_string(rank_ == 0 ? sources_.dump() : std::string()));
  SourceHasher hasher(all_sources, plan_.R, rank_);
  const std::unique_ptr<Sink> sink = make_sink();
  write_table(*sink, opts_.layout == Layout::cube ? static_cast<int>(plan_.scenes.size()) : 1);
  run_passes(*sink);
  write_band_arrays(*sink);
  sink->start_flush();  // the wait for the disk beside the checksum and the manifest
  t_.phase("decode + write");
  std::string manifest;
  const std::string cs = checksum(hasher, manifest);
  publish(*sink, manifest);
  t_.phase("checksum + manifest + publish");
  print_summary(plan_, comm_,
                RankReport{t_, *sink, bytes_read(), written_.mode, rows_->kept_bytes(), kept_.state(), kept_.staged()},
                seconds_since(t_total_));
  const std::uint64_t N = plan_.table.size();
  if (rank_ == 0) std::cout << "decode: wrote " << out_ << " (" << N << " samples, data_checksum " << cs << ")\n";
  return {false, out_, cs, N};
}

}  // namespace

DecodeResult decode(const DecodeOptions& opts, const dist::Comm& comm) {
  Decoder d(opts, comm);
  return d.run();
}

}  // namespace hsipipe::cache

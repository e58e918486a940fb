// cache/decode_plan: the scenes, the sample table and the row blocks of a decode (see decode_plan.hpp).
#include "cache/decode_plan.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "cache/preprocess.hpp"
#include "core/error.hpp"
#include "core/test_hook.hpp"
#include "dist/collective.hpp"

namespace hsipipe::cache {

std::size_t rows_per_block(std::size_t cols, int bands) {
  const std::size_t row_bytes = cols * static_cast<std::size_t>(bands) * sizeof(float);
  // 32 MiB of float32 rows; the tests ask for small blocks (many collective rounds on a small scene)
  static const std::size_t block_bytes = test_value("HSIPIPE_TEST_BLOCK_BYTES", 32ull << 20);
  return std::max<std::size_t>(1, block_bytes / std::max<std::size_t>(1, row_bytes));
}

void DecodePlan::open() {
  validate_options();
  open_scenes();
  choose_bands();
}

void DecodePlan::validate_options() {
  if (opts.scenes.empty()) throw ConfigError("decode: no scene given (--scene PATH or [scene.NAME] sections)");
  if (opts.out.empty()) throw ConfigError("decode: --out PATH is required");
  if (opts.backend != "npy" && opts.backend != "h5")
    throw ConfigError("--backend: unknown backend '" + opts.backend + "' (expected h5 or npy)");
  if (opts.dtype != DType::f32 && opts.dtype != DType::f16)
    throw ConfigError("--dtype: expected float32 or float16, not " + std::string(dtype_name(opts.dtype)));
  if (opts.layout == Layout::patch && opts.patch <= 0)
    throw ConfigError("--layout patch needs --patch P (an odd side length, e.g. 5)");
  if (opts.layout == Layout::pixel && opts.patch > 1)
    throw ConfigError("--patch " + std::to_string(opts.patch) + " makes no sense with --layout pixel (use patch or cube)");
  if (opts.patch < 0 || (opts.patch > 0 && opts.patch % 2 == 0))
    throw ConfigError("--patch " + std::to_string(opts.patch) + ": the patch side must be odd (the sample is its centre)");
  if (opts.pca < 0) throw ConfigError("--pca " + std::to_string(opts.pca) + ": must be >= 0");
  std::set<std::string> names;
  for (const auto& s : opts.scenes)
    if (!names.insert(s.name).second) throw ConfigError("decode: scene name '" + s.name + "' is used twice");
  // A training cache (labeled pixels) or a prediction cache (every valid pixel, label -1), not both: the
  // unlabeled scene's pixels would join the labeled ones' statistics and sit in no fold
  for (const auto& s : opts.scenes)
    if (s.labels.has_value() != opts.scenes.front().labels.has_value()) {
      const auto& with = s.labels ? s : opts.scenes.front();
      const auto& without = s.labels ? opts.scenes.front() : s;
      throw ConfigError("decode: scene '" + with.name + "' has labels but scene '" + without.name + "' (" +
                        without.scene.str() + ") has none: give every scene labels, or none for a prediction cache");
    }
  // One scene given twice would make each of its pixels two samples: in training and validation at once
  std::map<std::string, std::string> seen;  // path[:variable], absolute for a local file -> scene name
  for (const auto& s : opts.scenes) {
    std::string key = s.scene.path;
    if (key.find("://") == std::string::npos && key.rfind("/vsi", 0) != 0)
      key = std::filesystem::weakly_canonical(std::filesystem::absolute(key)).string();
    key += ":" + s.scene.variable;
    if (const auto [it, fresh] = seen.emplace(key, s.name); !fresh)
      throw ConfigError("decode: scenes '" + it->second + "' and '" + s.name + "' are the same data (" + s.scene.str() +
                        "): its pixels would be samples twice, in training and validation at once");
  }
  p = std::max(1, opts.patch);
  h = opts.layout == Layout::patch ? p / 2 : 0;
}

void DecodePlan::open_scenes() {
  ProgressLine prog = progress("opening the scenes", "scenes", opts.scenes.size());
  for (const auto& in : opts.scenes) {
    try {
      open_scene(in);
    } catch (...) {
      if (in.origin.empty()) throw;
      rethrow_with_context(in.origin);
    }
    prog.update(scenes.size());
  }
  prog.finish();
  src_bands = static_cast<int>(scenes[0].scene->bands());
  const auto& wl0 = scenes[0].scene->band_info().wavelengths;
  for (const auto& s : scenes) {
    if (static_cast<int>(s.scene->bands()) != src_bands)
      throw ConfigError("scenes have different band counts: '" + scenes[0].input.name + "' (" + scenes[0].input.scene.str() +
                        ") has " + std::to_string(src_bands) + ", '" + s.input.name + "' (" + s.input.scene.str() +
                        ") has " + std::to_string(s.scene->bands()) + s.input.origin);
    // one cache holds one band set: scenes that state their wavelengths must state the same ones
    const auto& wl = s.scene->band_info().wavelengths;
    if (!wl0.empty() && !wl.empty())
      for (std::size_t b = 0; b < wl.size() && b < wl0.size(); ++b)
        if (std::fabs(wl[b] - wl0[b]) > 1e-6 * std::max(1.0, std::fabs(wl0[b])))
          throw ConfigError("scenes have different wavelengths: band " + std::to_string(b + 1) + " is " + std::to_string(wl0[b]) + " in '" +
                            scenes[0].input.name + "' (" + scenes[0].input.scene.str() + ") but " + std::to_string(wl[b]) + " in '" +
                            s.input.name + "' (" + s.input.scene.str() + ")" + s.input.origin);
  }
}

void DecodePlan::open_scene(const SceneInput& in) {
  {
    SceneState st;
    st.input = in;
    st.input.scene.role = io::SceneSpec::Role::scene;  // a 2-D MATLAB matrix without its image size is refused
    st.scene = pool.open(st.input.scene);
    // what was read, for the manifest: the default variable the reader chose, the image size it used
    if (const std::string v = st.scene->variable(); !v.empty()) st.input.scene.variable = v;
    if (const std::string sz = st.scene->image_size(); !sz.empty()) st.input.scene.set_image_size(sz, "image size");
    st.rows = st.scene->rows();
    st.cols = st.scene->cols();
    if (st.rows == 0 || st.cols == 0 || st.scene->bands() == 0)
      throw FormatError(in.scene.str(), "dimensions", "the scene is empty");
    if (in.labels && rank == 0) {  // the other ranks' come from share_labels
      st.labels = io::read_labels(*in.labels);
      if (!st.labels->variable.empty()) st.input.labels->variable = st.labels->variable;
      if (st.labels->rows != st.rows || st.labels->cols != st.cols)
        throw ConfigError("scene '" + in.name + "': labels " + in.labels->str() + " are " +
                          std::to_string(st.labels->rows) + " x " + std::to_string(st.labels->cols) + " but the scene " +
                          in.scene.str() + " is " + std::to_string(st.rows) + " x " + std::to_string(st.cols));
    }
    scenes.push_back(std::move(st));
  }
}

void DecodePlan::share_labels(const dist::Comm& comm) {
  for (auto& st : scenes) {
    if (!st.input.labels) continue;
    if (rank != 0) st.labels.emplace();
    io::LabelImage& l = *st.labels;
    // rows, cols, has nodata, nodata, has declared classes, declared classes
    std::uint64_t head[6] = {l.rows, l.cols, l.nodata.has_value(), static_cast<std::uint64_t>(static_cast<std::int64_t>(l.nodata.value_or(0))),
                             l.declared_classes.has_value(), l.declared_classes.value_or(0)};
    comm.bcast(head, 6);
    l.rows = head[0];
    l.cols = head[1];
    l.nodata = head[2] ? std::optional<std::int32_t>(static_cast<std::int32_t>(static_cast<std::int64_t>(head[3]))) : std::nullopt;
    l.declared_classes = head[4] ? std::optional<std::uint64_t>(head[5]) : std::nullopt;
    l.variable = comm.bcast_string(l.variable);
    l.source = comm.bcast_string(l.source);
    if (rank != 0) {
      l.labels.resize(l.rows * l.cols);
      if (!l.variable.empty()) st.input.labels->variable = l.variable;
    }
    for (std::size_t i = 0; i < l.labels.size(); i += std::size_t{1} << 30)  // MPI counts are int
      comm.bcast(l.labels.data() + i, static_cast<int>(std::min(l.labels.size() - i, std::size_t{1} << 30)));
  }
}

void DecodePlan::choose_bands() {
  std::vector<int> drop = parse_band_list(opts.drop_bands, src_bands);
  if (opts.bad_bands_from_header) {
    // every scene's list: a band bad in any scene is dropped from all (one band set per cache)
    for (const auto& s : scenes) {
      const auto& bbl = s.scene->band_info().bbl;
      if (bbl.empty())
        throw ConfigError("--bad-bands-from-header: " + s.input.scene.str() + " has no bad-band list (bbl)" + s.input.origin);
      if (bbl.size() != static_cast<std::size_t>(src_bands))
        throw ConfigError("--bad-bands-from-header: " + s.input.scene.str() + ": its bad-band list (bbl) has " +
                          std::to_string(bbl.size()) + " entries for " + std::to_string(src_bands) + " bands" + s.input.origin);
      for (int b = 0; b < src_bands; ++b)
        if (bbl[static_cast<std::size_t>(b)] == 0) drop.push_back(b);
    }
    std::sort(drop.begin(), drop.end());
    drop.erase(std::unique(drop.begin(), drop.end()), drop.end());
  }
  kept = kept_bands(drop, src_bands);
  // A pixel is valid when its kept bands are (params' "validity_bands": "kept"): a dropped band of nodata or
  // NaN (a water-absorption band, a dead detector) costs no pixel
  for (auto& s : scenes) s.scene->set_validity_bands(band_flags(kept, static_cast<std::size_t>(src_bands)));
  if (opts.pca > static_cast<int>(kept.size()))
    throw ConfigError("--pca " + std::to_string(opts.pca) + ": only " + std::to_string(kept.size()) +
                      " bands are kept after --drop-bands");
  if (opts.layout != Layout::pixel) {
    for (const auto& s : scenes)
      if (static_cast<std::size_t>(p) > s.rows || static_cast<std::size_t>(p) > s.cols)
        throw ConfigError("--patch " + std::to_string(p) + " is larger than scene '" + s.input.name + "' (" +
                          std::to_string(s.rows) + " x " + std::to_string(s.cols) + ")" + s.input.origin);
  }
  std::uint64_t off = 0;
  for (auto& s : scenes) {
    s.row_offset = off;
    off += s.rows;
  }
}

void DecodePlan::validity_pass(const dist::Comm& comm, Timers& t) {
  std::uint64_t rows_total = 0, rows_done = 0;
  for (std::size_t s = 0; s < scenes.size(); ++s)
    if (!scenes[s].labels) rows_total += aligned_rows(s, rank).size();
  ProgressLine prog = progress("validity pass", "rows", rows_total);
  for (std::size_t s = 0; s < scenes.size(); ++s) {
    auto& st = scenes[s];
    if (st.labels) continue;
    const Range rows = aligned_rows(s, rank);
    std::vector<std::uint8_t> mine;
    dist::collective_step(comm, "the validity pass", [&] {
      mine.reserve(rows.size() * st.cols);
      const std::size_t rpb = rows_per_block(st.cols, src_bands);
      std::vector<float> buf;
      for (std::size_t r0 = rows.begin; r0 < rows.end; r0 += rpb) {
        const std::size_t r1 = std::min<std::size_t>(rows.end, r0 + rpb);
        buf.resize((r1 - r0) * st.cols * static_cast<std::size_t>(src_bands));
        const auto t0 = Clock::now();
        st.scene->read_rows(r0, r1, buf.data());
        t.read += seconds_since(t0);
        prog.update(rows_done += r1 - r0, s);
        for (std::size_t i = 0; i < (r1 - r0) * st.cols; ++i)
          mine.push_back(std::isnan(buf[i * static_cast<std::size_t>(src_bands) + static_cast<std::size_t>(kept[0])]) ? 0 : 1);
      }
    });
    st.valid = comm.allgatherv(mine);
  }
  prog.finish();
}

/// The largest label a cache takes: what predict's UInt16 class map holds beside its nodata value.
constexpr std::int32_t kMaxLabel = 65534;

/// Throws when sample i of `st` has a label no fold can hold (negative), no class map can hold (> kMaxLabel),
/// or beyond the file's classes.
void DecodePlan::check_label(const SceneState& st, std::size_t i) const {
  // labels of samples are >= 0: a negative one would be a sample in no fold (folds' "unlabeled")
  if (st.labels->labels[i] < 0) {
    throw FormatError(st.input.labels->str(), "label",
                      "pixel (row " + std::to_string(i / st.cols) + ", col " + std::to_string(i % st.cols) + ") has label " +
                          std::to_string(st.labels->labels[i]) + ": labels must be >= 0, or the --ignore-label value (" +
                          std::to_string(opts.ignore_label) + ") for pixels that are not samples" + st.input.origin);
  }
  // a class map (predict's GeoTIFF/ENVI output, UInt16 with a nodata value) holds labels 0 .. 65534: a larger one
  // trained for hours and was refused only by predict, naming no file
  if (st.labels->labels[i] > kMaxLabel) {
    throw FormatError(st.input.labels->str(), "label",
                      "pixel (row " + std::to_string(i / st.cols) + ", col " + std::to_string(i % st.cols) + ") has label " +
                          std::to_string(st.labels->labels[i]) + ": class maps store labels 0 .. " + std::to_string(kMaxLabel) +
                          " (renumber the classes, or give this value as --ignore-label)" + st.input.origin);
  }
  // the label file's own count of classes (ENVI `classes = N`): a sample's id beyond it is a lying header
  // or the wrong file
  if (st.labels->declared_classes && static_cast<std::uint64_t>(st.labels->labels[i]) >= *st.labels->declared_classes) {
    const auto n = *st.labels->declared_classes;
    throw FormatError(st.input.labels->str(), "classes",
                      "pixel (row " + std::to_string(i / st.cols) + ", col " + std::to_string(i % st.cols) +
                          ") holds class id " + std::to_string(st.labels->labels[i]) + " but the header declares classes = " +
                          std::to_string(n) + " (ids 0.." + std::to_string(n - 1) + ")" + st.input.origin);
  }
}

std::uint64_t DecodePlan::count_samples() const {
  std::uint64_t total = 0;
  for (const auto& st : scenes)
    for (std::size_t i = 0, npx = st.rows * st.cols; i < npx; ++i) {
      if (!is_sample(st, i)) continue;
      if (st.labels) check_label(st, i);
      ++total;
    }
  return total;
}

void DecodePlan::throw_no_samples() const {
  std::string what;
  for (const auto& st : scenes)
    what += std::string(what.empty() ? "" : ", ") + "scene '" + st.input.name + "' (" +
            (st.labels ? st.input.labels->str() + ": no label other than the ignore label " + std::to_string(opts.ignore_label) +
                             (st.labels->nodata ? " and the raster's nodata value " + std::to_string(*st.labels->nodata) : "")
                       : st.input.scene.str() + ": no valid pixel") + ")";
  throw ConfigError("decode: zero samples in " + what);
}

void DecodePlan::build_table() {
  // Two passes over each scene's pixels: count the samples (to size the table once), then fill it (745k
  // samples of 1M pixels: 14 -> 8 ms against push_back and a set insert per sample, 1 Dec 2026). The
  // pixels whose label is the ignore label (or, without labels, the invalid ones) are not samples.
  const std::uint64_t total = count_samples();
  table.label.resize(total);
  table.scene.resize(total);
  table.row.resize(total);
  table.col.resize(total);
  std::uint64_t n = 0;
  std::set<std::int32_t> values;
  for (std::size_t s = 0; s < scenes.size(); ++s) {
    auto& st = scenes[s];
    st.first_sample = n;
    st.first_sample_of_row.assign(st.rows, -1);
    std::optional<std::int32_t> last;  // the set sees each run of equal labels once
    for (std::size_t r = 0; r < st.rows; ++r) {
      for (std::size_t c = 0; c < st.cols; ++c) {
        const std::size_t i = r * st.cols + c;
        if (!is_sample(st, i)) continue;
        const std::int32_t label = st.labels ? st.labels->labels[i] : -1;
        if (st.first_sample_of_row[r] < 0) st.first_sample_of_row[r] = static_cast<std::int64_t>(n);
        table.label[n] = label;
        table.scene[n] = static_cast<std::int32_t>(s);
        table.row[n] = static_cast<std::int32_t>(r);
        table.col[n] = static_cast<std::int32_t>(c);
        if (last != label) values.insert(label);
        last = label;
        ++n;
      }
    }
    st.end_sample = n;
    table.scenes.push_back({st.input.name, static_cast<std::uint32_t>(st.rows), static_cast<std::uint32_t>(st.cols)});
  }
  if (n == 0) throw_no_samples();
  label_values.assign(values.begin(), values.end());
  my = split_range(n, R, rank);
}

void DecodePlan::plan_blocks() {
  write_plan.clear();
  stats_plan.clear();
  for (std::size_t si = 0; si < scenes.size(); ++si) {
    const auto& st = scenes[si];
    const int s = static_cast<int>(si);
    const std::size_t rpb = rows_per_block(st.cols, src_bands);
    if (opts.layout == Layout::cube) {
      const Range rows = aligned_rows(si, rank);
      for (std::size_t r0 = rows.begin; r0 < rows.end; r0 += rpb) {
        const std::size_t r1 = std::min<std::size_t>(rows.end, r0 + rpb);
        write_plan.push_back({s, r0, r1, r0, r1, 0, 0});
      }
      continue;
    }
    const std::uint64_t bs = std::max(my.begin, st.first_sample), es = std::min(my.end, st.end_sample);
    if (bs >= es) continue;
    const std::size_t rowA = static_cast<std::size_t>(table.row[bs]);
    const std::size_t rowB = static_cast<std::size_t>(table.row[es - 1]) + 1;
    std::uint64_t k = bs;
    for (std::size_t r0 = rowA; r0 < rowB; r0 += rpb) {
      const std::size_t r1 = std::min(rowB, r0 + rpb);
      const std::uint64_t s0 = k;
      while (k < es && static_cast<std::size_t>(table.row[k]) < r1) ++k;
      if (k == s0) continue;
      const std::size_t rr0 = r0 >= static_cast<std::size_t>(h) ? r0 - static_cast<std::size_t>(h) : 0;
      const std::size_t rr1 = std::min(st.rows, r1 + static_cast<std::size_t>(h));
      write_plan.push_back({s, r0, r1, rr0, rr1, s0, k});
    }
  }
  bool all_labeled = true;
  for (const auto& st : scenes) all_labeled = all_labeled && st.labels.has_value();
  stats_is_write = opts.layout == Layout::cube || (opts.stats_over == StatsOver::labeled && all_labeled);
  if (stats_is_write) return;
  for (std::size_t si = 0; si < scenes.size(); ++si) {
    const auto& st = scenes[si];
    const Range rows = aligned_rows(si, rank);
    const std::size_t rpb = rows_per_block(st.cols, src_bands);
    for (std::size_t r0 = rows.begin; r0 < rows.end; r0 += rpb) {
      const std::size_t r1 = std::min<std::size_t>(rows.end, r0 + rpb);
      stats_plan.push_back({static_cast<int>(si), r0, r1, r0, r1, 0, 0});
    }
  }
}

bool DecodePlan::owns_stats_row(int s, std::size_t r) const {
  const auto& st = scenes[static_cast<std::size_t>(s)];
  const bool row_split = opts.layout == Layout::cube || opts.stats_over == StatsOver::all_pixels || !st.labels;
  if (row_split) return aligned_rows(static_cast<std::size_t>(s), rank).contains(r);
  const std::int64_t f = st.first_sample_of_row[r];
  return f >= 0 && my.contains(static_cast<std::uint64_t>(f));
}

bool DecodePlan::is_item(int s, std::size_t r, std::size_t c, const float* px) const {
  const auto& st = scenes[static_cast<std::size_t>(s)];
  const bool is_labeled = st.labels && labeled(st, r * st.cols + c);
  // a sample must be valid data, whatever the statistics are taken over (its values would be stored as 0)
  if (is_labeled && std::isnan(px[0]))
    throw FormatError(st.input.scene.str(), "pixel",
                      "labeled pixel (row " + std::to_string(r) + ", col " + std::to_string(c) +
                          ") is nodata, NaN or infinite in the scene" + st.input.origin);
  if (st.labels && opts.stats_over == StatsOver::labeled) return is_labeled;
  return !std::isnan(px[0]);
}

Range DecodePlan::aligned_rows(std::size_t s, int q) const {
  const auto& st = scenes[s];
  const std::size_t bh = std::max<std::size_t>(1, st.scene->block_rows());
  const Range b = split_range((st.rows + bh - 1) / bh, R, q);
  return {std::min(st.rows, b.begin * bh), std::min(st.rows, b.end * bh)};
}

Range DecodePlan::need_rows(std::size_t s, int q) const {
  const auto& st = scenes[s];
  const Range mine = split_range(table.size(), R, q);
  const std::uint64_t bs = std::max(mine.begin, st.first_sample), es = std::min(mine.end, st.end_sample);
  if (bs >= es) return {0, 0};
  const auto hh = static_cast<std::size_t>(h);
  const auto a = static_cast<std::size_t>(table.row[bs]), b = static_cast<std::size_t>(table.row[es - 1]) + 1;
  return {a >= hh ? a - hh : 0, std::min(st.rows, b + hh)};
}

}  // namespace hsipipe::cache

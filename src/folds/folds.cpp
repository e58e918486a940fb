// folds: the algorithms of docs/FOLDS.md. Any change to what this file computes must bump
// kAlgorithmVersion and be mirrored in docs/FOLDS.md and scripts/folds_reference.py.
// The folds file (writing, reading, checking) is in folds_file.cpp.
#include "folds/folds.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <numeric>
#include <tuple>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/hash.hpp"
#include "folds/rng.hpp"

namespace hsipipe::folds {

namespace {

// Stream tags of derive_seed(seed, tag, x) (docs/FOLDS.md, "Streams").
constexpr std::uint64_t kTagStratified = 1, kTagRandom = 2, kTagSpatial = 3;

void validate_table(const SampleTableView& t) {
  const std::size_t n = t.label.size();
  if (t.scene.size() != n || t.row.size() != n || t.col.size() != n) {
    throw FormatError("sample table", "scene/row/col/label",
                      "arrays of different lengths (" + std::to_string(t.scene.size()) + ", " +
                          std::to_string(t.row.size()) + ", " + std::to_string(t.col.size()) + ", " +
                          std::to_string(n) + ")");
  }
  if (n >= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    throw FormatError("sample table", "n_samples", "more than 2^31-2 samples are not supported");
  }
  if (t.patch < 1) throw FormatError("sample table", "patch", "patch side must be >= 1, got " + std::to_string(t.patch));
  for (std::size_t i = 0; i < n; ++i) {
    if (t.scene[i] < 0 || t.row[i] < 0 || t.col[i] < 0) {
      throw FormatError("sample table", "coords", "sample " + std::to_string(i) + " has a negative scene/row/col");
    }
    if (!t.scenes.empty()) {
      const auto s = static_cast<std::size_t>(t.scene[i]);
      if (s >= t.scenes.size()) {
        throw FormatError("sample table", "scene", "sample " + std::to_string(i) + " names scene " +
                                                       std::to_string(s) + " of " + std::to_string(t.scenes.size()));
      }
      if (static_cast<std::uint32_t>(t.row[i]) >= t.scenes[s].rows ||
          static_cast<std::uint32_t>(t.col[i]) >= t.scenes[s].cols) {
        throw FormatError("sample table", "coords",
                          "sample " + std::to_string(i) + " at (" + std::to_string(t.row[i]) + ", " +
                              std::to_string(t.col[i]) + ") lies outside scene " + std::to_string(s) + " (" +
                              std::to_string(t.scenes[s].rows) + " x " + std::to_string(t.scenes[s].cols) + ")");
      }
    }
  }
}

/// Per-scene dense lookup (row, col) -> sample id, built one scene at a time, for window scans.
class SceneGrids {
 public:
  explicit SceneGrids(const SampleTableView& t) : t_(t) {
    std::int32_t max_scene = -1;
    for (std::size_t i = 0; i < t.size(); ++i) max_scene = std::max(max_scene, t.scene[i]);
    by_scene_.assign(static_cast<std::size_t>(max_scene + 1), {});
    for (std::size_t i = 0; i < t.size(); ++i) by_scene_[static_cast<std::size_t>(t.scene[i])].push_back(static_cast<std::int32_t>(i));
  }
  std::size_t n_scenes() const { return by_scene_.size(); }
  const std::vector<std::int32_t>& samples(std::size_t s) const { return by_scene_[s]; }

  /// Builds the grid of scene s; throws FormatError on two samples at one pixel.
  void load(std::size_t s) {
    rows_ = 0;
    cols_ = 0;
    for (const auto i : by_scene_[s]) {
      rows_ = std::max<std::int64_t>(rows_, t_.row[static_cast<std::size_t>(i)] + 1);
      cols_ = std::max<std::int64_t>(cols_, t_.col[static_cast<std::size_t>(i)] + 1);
    }
    grid_.assign(static_cast<std::size_t>(rows_ * cols_), -1);
    for (const auto i : by_scene_[s]) {
      auto& cell = grid_[static_cast<std::size_t>(t_.row[static_cast<std::size_t>(i)] * cols_ + t_.col[static_cast<std::size_t>(i)])];
      if (cell >= 0) {
        throw FormatError("sample table", "coords",
                          "samples " + std::to_string(cell) + " and " + std::to_string(i) + " share scene " +
                              std::to_string(s) + " pixel (" + std::to_string(t_.row[static_cast<std::size_t>(i)]) +
                              ", " + std::to_string(t_.col[static_cast<std::size_t>(i)]) + ")");
      }
      cell = i;
    }
  }
  /// Calls fn(sample id) for every sample j != i of the loaded scene with |dr| <= r and |dc| <= r.
  template <class Fn>
  void for_window(std::int32_t i, int r, Fn&& fn) const {
    const std::int64_t r0 = t_.row[static_cast<std::size_t>(i)], c0 = t_.col[static_cast<std::size_t>(i)];
    const std::int64_t ra = std::max<std::int64_t>(0, r0 - r), rb = std::min<std::int64_t>(rows_ - 1, r0 + r);
    const std::int64_t ca = std::max<std::int64_t>(0, c0 - r), cb = std::min<std::int64_t>(cols_ - 1, c0 + r);
    for (std::int64_t y = ra; y <= rb; ++y) {
      const std::int32_t* line = grid_.data() + y * cols_;
      for (std::int64_t x = ca; x <= cb; ++x) {
        const std::int32_t j = line[x];
        if (j >= 0 && j != i) fn(j);
      }
    }
  }

 private:
  const SampleTableView& t_;
  std::vector<std::vector<std::int32_t>> by_scene_;
  std::int64_t rows_ = 0, cols_ = 0;
  std::vector<std::int32_t> grid_;
};

void put_u32(std::string& b, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<char>((v >> (8 * i)) & 0xffu));
}
void put_u64(std::string& b, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<char>((v >> (8 * i)) & 0xffu));
}
void put_i32(std::string& b, std::int32_t v) { put_u32(b, static_cast<std::uint32_t>(v)); }

std::vector<std::int32_t> class_values(const SampleTableView& t) {
  std::vector<std::int32_t> c;
  for (std::size_t i = 0; i < t.size(); ++i)
    if (t.label[i] >= 0) c.push_back(t.label[i]);
  std::sort(c.begin(), c.end());
  c.erase(std::unique(c.begin(), c.end()), c.end());
  return c;
}

std::size_t class_index(const std::vector<std::int32_t>& classes, std::int32_t label) {
  return static_cast<std::size_t>(std::lower_bound(classes.begin(), classes.end(), label) - classes.begin());
}

void deal_stratified(const SampleTableView& t, const std::vector<std::int32_t>& classes, int k, std::uint64_t seed,
                     std::vector<std::int32_t>& fold) {
  std::vector<std::vector<std::uint32_t>> members(classes.size());
  for (std::size_t i = 0; i < t.size(); ++i)
    if (t.label[i] >= 0) members[class_index(classes, t.label[i])].push_back(static_cast<std::uint32_t>(i));
  std::uint64_t cursor = 0;  // the fold the next dealt sample goes to: continues across classes
  for (std::size_t c = 0; c < classes.size(); ++c) {
    SplitMix64 rng(derive_seed(seed, kTagStratified, static_cast<std::uint64_t>(classes[c])));
    shuffle(members[c], rng);
    for (const auto id : members[c]) {
      fold[id] = static_cast<std::int32_t>(cursor);
      cursor = (cursor + 1) % static_cast<std::uint64_t>(k);
    }
  }
}

void deal_random(const SampleTableView& t, int k, std::uint64_t seed, std::vector<std::int32_t>& fold) {
  std::vector<std::uint32_t> ids;
  for (std::size_t i = 0; i < t.size(); ++i)
    if (t.label[i] >= 0) ids.push_back(static_cast<std::uint32_t>(i));
  SplitMix64 rng(derive_seed(seed, kTagRandom, 0));
  shuffle(ids, rng);
  for (std::size_t p = 0; p < ids.size(); ++p) fold[ids[p]] = static_cast<std::int32_t>(p % static_cast<std::size_t>(k));
}

using BlockKey = std::array<std::int64_t, 3>;  // scene, block row, block col

std::vector<BlockKey> block_keys(const SampleTableView& t, std::int64_t b, std::int64_t oy, std::int64_t ox) {
  std::vector<BlockKey> keys(t.size());
  for (std::size_t i = 0; i < t.size(); ++i) keys[i] = {t.scene[i], (t.row[i] + oy) / b, (t.col[i] + ox) / b};
  return keys;
}

std::size_t count_nonempty_blocks(const SampleTableView& t, std::int64_t b) {
  std::vector<BlockKey> keys;
  for (std::size_t i = 0; i < t.size(); ++i)
    if (t.label[i] >= 0) keys.push_back({t.scene[i], t.row[i] / b, t.col[i] / b});
  std::sort(keys.begin(), keys.end());
  return static_cast<std::size_t>(std::unique(keys.begin(), keys.end()) - keys.begin());
}

struct Block {
  BlockKey key{};
  std::uint64_t total = 0;
  std::vector<std::uint64_t> count;  // per class index
  std::vector<std::uint32_t> members;
};

void deal_spatial(const SampleTableView& t, const std::vector<std::int32_t>& classes, const FoldParams& p, Folds& out) {
  const int k = p.k;
  std::int64_t b = p.block;
  out.block_default = (p.block == 0);
  if (b == 0) {
    b = std::max<std::int64_t>(8, 4 * static_cast<std::int64_t>(t.patch));
    while (b > 1 && count_nonempty_blocks(t, b) < 4 * static_cast<std::size_t>(k)) --b;
  }
  out.block = static_cast<int>(b);
  SplitMix64 rng(derive_seed(p.seed, kTagSpatial, 0));
  out.grid_offset_row = static_cast<std::int64_t>(rng.bounded(static_cast<std::uint64_t>(b)));
  out.grid_offset_col = static_cast<std::int64_t>(rng.bounded(static_cast<std::uint64_t>(b)));

  // Nonempty blocks in ascending (scene, block row, block col) order.
  const auto keys = block_keys(t, b, out.grid_offset_row, out.grid_offset_col);
  std::vector<std::uint32_t> ids;
  for (std::size_t i = 0; i < t.size(); ++i)
    if (t.label[i] >= 0) ids.push_back(static_cast<std::uint32_t>(i));
  std::stable_sort(ids.begin(), ids.end(), [&](auto a, auto c) { return keys[a] < keys[c]; });
  std::vector<Block> blocks;
  for (const auto id : ids) {
    if (blocks.empty() || blocks.back().key != keys[id]) {
      blocks.push_back({keys[id], 0, std::vector<std::uint64_t>(classes.size(), 0), {}});
    }
    auto& bl = blocks.back();
    ++bl.total;
    ++bl.count[class_index(classes, t.label[id])];
    bl.members.push_back(id);
  }
  if (blocks.size() < static_cast<std::size_t>(k)) {
    throw ConfigError("folds: spatial: only " + std::to_string(blocks.size()) + " non-empty blocks of " +
                      std::to_string(b) + " x " + std::to_string(b) + " pixels for k = " + std::to_string(k) +
                      " folds (use a smaller --block)");
  }
  shuffle(blocks, rng);
  std::stable_sort(blocks.begin(), blocks.end(), [](const Block& a, const Block& c) { return a.total > c.total; });

  std::vector<std::vector<std::uint64_t>> cnt(static_cast<std::size_t>(k), std::vector<std::uint64_t>(classes.size(), 0));
  std::vector<std::uint64_t> tot(static_cast<std::size_t>(k), 0);
  for (const auto& bl : blocks) {
    std::size_t best = 0;
    std::uint64_t best_cost = 0;
    for (std::size_t f = 0; f < static_cast<std::size_t>(k); ++f) {
      std::uint64_t cost = 0;
      for (std::size_t c = 0; c < classes.size(); ++c) cost += bl.count[c] * cnt[f][c];
      if (f == 0 || cost < best_cost || (cost == best_cost && tot[f] < tot[best])) {
        best = f;
        best_cost = cost;
      }
    }
    for (std::size_t c = 0; c < classes.size(); ++c) cnt[best][c] += bl.count[c];
    tot[best] += bl.total;
    for (const auto id : bl.members) out.fold[id] = static_cast<std::int32_t>(best);
  }
}

void compute_exclusions(const SampleTableView& t, Folds& out, int radius) {
  out.excluded.assign(static_cast<std::size_t>(out.k), {});
  SceneGrids grids(t);
  std::vector<std::uint64_t> seen(static_cast<std::size_t>(out.k), std::numeric_limits<std::uint64_t>::max());
  for (std::size_t s = 0; s < grids.n_scenes(); ++s) {
    grids.load(s);
    for (const auto i : grids.samples(s)) {
      const std::int32_t fi = out.fold[static_cast<std::size_t>(i)];
      if (fi < 0) continue;
      grids.for_window(i, radius, [&](std::int32_t j) {
        const std::int32_t fj = out.fold[static_cast<std::size_t>(j)];
        if (fj < 0 || fj == fi || seen[static_cast<std::size_t>(fj)] == static_cast<std::uint64_t>(i)) return;
        seen[static_cast<std::size_t>(fj)] = static_cast<std::uint64_t>(i);
        out.excluded[static_cast<std::size_t>(fj)].push_back(static_cast<std::uint64_t>(i));
      });
    }
  }
  for (auto& e : out.excluded) std::sort(e.begin(), e.end());
}

void fill_counts(const SampleTableView& t, Folds& out) {
  out.classes = class_values(t);
  out.counts.assign(static_cast<std::size_t>(out.k), std::vector<std::uint64_t>(out.classes.size(), 0));
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (out.fold[i] >= 0 && t.label[i] >= 0) ++out.counts[static_cast<std::size_t>(out.fold[i])][class_index(out.classes, t.label[i])];
  }
}

}  // namespace

std::string strategy_name(Strategy s) {
  switch (s) {
    case Strategy::stratified: return "stratified";
    case Strategy::spatial: return "spatial";
    case Strategy::random: return "random";
  }
  return "?";
}

const std::vector<Strategy>& all_strategies() {
  static const std::vector<Strategy> all{Strategy::stratified, Strategy::spatial, Strategy::random};
  return all;
}

std::string strategy_names(const std::string& sep, const std::string& last) {
  const auto& all = all_strategies();
  std::string out;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (i) out += (i + 1 == all.size() && !last.empty()) ? last : sep;
    out += strategy_name(all[i]);
  }
  return out;
}

Strategy strategy_from_name(const std::string& s) {
  for (const Strategy st : all_strategies())
    if (s == strategy_name(st)) return st;
  throw ConfigError("--strategy: unknown strategy '" + s + "' (expected " + strategy_names(", ", " or ") + ")");
}

std::vector<std::uint64_t> Folds::val_ids(int f) const {
  std::vector<std::uint64_t> v;
  for (std::size_t i = 0; i < fold.size(); ++i)
    if (fold[i] == f) v.push_back(i);
  return v;
}

std::vector<std::uint64_t> Folds::train_ids(int f) const {
  std::vector<std::uint64_t> v;
  const std::vector<std::uint64_t> none;
  const auto& ex = (f >= 0 && static_cast<std::size_t>(f) < excluded.size()) ? excluded[static_cast<std::size_t>(f)] : none;
  auto it = ex.begin();
  for (std::size_t i = 0; i < fold.size(); ++i) {
    if (fold[i] < 0 || fold[i] == f) continue;
    while (it != ex.end() && *it < i) ++it;
    if (it != ex.end() && *it == i) continue;
    v.push_back(i);
  }
  return v;
}

std::string samples_checksum(const SampleTableView& t) {
  validate_table(t);
  Sha256 h;
  std::string buf = "HSISAMP1";
  put_u64(buf, t.size());
  for (std::size_t i = 0; i < t.size(); ++i) {
    put_i32(buf, t.scene[i]);
    put_i32(buf, t.row[i]);
    put_i32(buf, t.col[i]);
    put_i32(buf, t.label[i]);
    if (buf.size() >= (1u << 16)) {
      h.update(buf);
      buf.clear();
    }
  }
  h.update(buf);
  return h.hex_digest();
}

std::string fingerprint(const SampleTableView& t, std::span<const std::int32_t> fold,
                        const std::vector<std::vector<std::uint64_t>>& excluded) {
  validate_table(t);
  if (fold.size() != t.size()) {
    throw FormatError("folds", "fold", "has " + std::to_string(fold.size()) + " entries for " + std::to_string(t.size()) + " samples");
  }
  Sha256 h;
  std::string buf = "HSIFOLD1";
  put_u64(buf, t.size());
  put_u32(buf, static_cast<std::uint32_t>(excluded.size()));
  auto flush = [&] {
    if (buf.size() >= (1u << 16)) {
      h.update(buf);
      buf.clear();
    }
  };
  for (std::size_t i = 0; i < t.size(); ++i) {
    put_i32(buf, t.scene[i]);
    put_i32(buf, t.row[i]);
    put_i32(buf, t.col[i]);
    put_i32(buf, t.label[i]);
    put_i32(buf, fold[i]);
    flush();
  }
  for (const auto& e : excluded) {
    put_u64(buf, e.size());
    for (const auto id : e) {
      put_u64(buf, id);
      flush();
    }
  }
  h.update(buf);
  return h.hex_digest();
}

void compute_leakage(const SampleTableView& t, Folds& out, int radius) {
  out.leakage_radius = radius;
  out.leaky.assign(static_cast<std::size_t>(out.k), 0);
  std::uint64_t n_val = 0, n_leaky = 0;
  SceneGrids grids(t);
  for (std::size_t s = 0; s < grids.n_scenes(); ++s) {
    grids.load(s);
    for (const auto i : grids.samples(s)) {
      const std::int32_t fi = out.fold[static_cast<std::size_t>(i)];
      if (fi < 0) continue;
      ++n_val;
      static const std::vector<std::uint64_t> kNone;
      const auto& ex = static_cast<std::size_t>(fi) < out.excluded.size() ? out.excluded[static_cast<std::size_t>(fi)] : kNone;
      bool leak = false;
      grids.for_window(i, radius, [&](std::int32_t j) {
        if (leak) return;
        const std::int32_t fj = out.fold[static_cast<std::size_t>(j)];
        if (fj < 0 || fj == fi) return;
        if (std::binary_search(ex.begin(), ex.end(), static_cast<std::uint64_t>(j))) return;
        leak = true;
      });
      if (leak) {
        ++out.leaky[static_cast<std::size_t>(fi)];
        ++n_leaky;
      }
    }
  }
  out.leakage = n_val ? static_cast<double>(n_leaky) / static_cast<double>(n_val) : 0.0;
}

Folds make_folds(const SampleTableView& t, const FoldParams& p) {
  if (p.k < 2) throw ConfigError("--k: need at least 2 folds, got " + std::to_string(p.k));
  if (p.block < 0) throw ConfigError("--block: block side must be >= 1 (or 0 for the default), got " + std::to_string(p.block));
  if (p.buffer < -1) throw ConfigError("--buffer: radius must be >= 0, got " + std::to_string(p.buffer));
  validate_table(t);
  std::uint64_t participants = 0;
  for (std::size_t i = 0; i < t.size(); ++i) participants += t.label[i] >= 0;
  if (participants < static_cast<std::uint64_t>(p.k)) {
    throw ConfigError("--k: " + std::to_string(p.k) + " folds need at least as many labeled samples; the table has " +
                      std::to_string(participants));
  }

  Folds out;
  out.k = p.k;
  out.seed = p.seed;
  out.strategy = p.strategy;
  out.patch = t.patch;
  out.n_samples = t.size();
  out.fold.assign(t.size(), -1);
  const auto classes = class_values(t);
  switch (p.strategy) {
    case Strategy::stratified: deal_stratified(t, classes, p.k, p.seed, out.fold); break;
    case Strategy::random: deal_random(t, p.k, p.seed, out.fold); break;
    case Strategy::spatial: deal_spatial(t, classes, p, out); break;
  }
  if (p.strategy == Strategy::spatial) {
    out.buffer = p.buffer >= 0 ? p.buffer : t.patch / 2;
    compute_exclusions(t, out, out.buffer);
    std::vector<std::uint64_t> val(static_cast<std::size_t>(p.k), 0);
    for (const auto g : out.fold)
      if (g >= 0) ++val[static_cast<std::size_t>(g)];
    for (int f = 0; f < p.k; ++f) {
      const auto fs = static_cast<std::size_t>(f);
      if (participants - val[fs] == out.excluded[fs].size())
        throw ConfigError("--buffer " + std::to_string(out.buffer) + ": fold " + std::to_string(f) +
                          " keeps no training sample (the buffer excludes every one): a smaller --buffer, or a larger --block");
    }
  } else {
    out.excluded.assign(static_cast<std::size_t>(p.k), {});
  }
  fill_counts(t, out);
  for (std::size_t c = 0; c < out.classes.size(); ++c) {
    std::uint64_t n_c = 0;
    std::vector<int> empty;
    for (int f = 0; f < p.k; ++f) {
      n_c += out.counts[static_cast<std::size_t>(f)][c];
      if (out.counts[static_cast<std::size_t>(f)][c] == 0) empty.push_back(f);
    }
    if (empty.empty()) continue;
    std::string list;
    for (const int f : empty) {
      if (!list.empty()) list += ',';
      list += std::to_string(f);
    }
    std::string msg = "class " + std::to_string(out.classes[c]) + " (" + std::to_string(n_c) + " samples";
    if (n_c < static_cast<std::uint64_t>(p.k)) msg += ", fewer than k = " + std::to_string(p.k);
    msg += ") has no validation sample in fold(s) " + list;
    out.warnings.push_back(std::move(msg));
  }
  compute_leakage(t, out, t.patch / 2);
  out.has_informational = true;
  out.samples_checksum = samples_checksum(t);
  out.fingerprint = fingerprint(t, out.fold, out.excluded);
  return out;
}

void complete_informational(const SampleTableView& t, Folds& f) {
  if (f.has_informational) return;
  if (f.n_samples != t.size()) throw ConfigError("folds: the table has " + std::to_string(t.size()) + " samples, the folds " + std::to_string(f.n_samples));
  SampleTableView tv = t;
  tv.patch = f.patch;
  fill_counts(tv, f);
  compute_leakage(tv, f, tv.patch / 2);
  f.has_informational = true;
}

}  // namespace hsipipe::folds

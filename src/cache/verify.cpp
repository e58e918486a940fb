// cache/verify: `hsipipe verify CACHE`: the manifest against the current sources, the data checksum
// recomputed from the stored bytes, and random items re-decoded from the sources. Rank-local.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <numeric>
#include <ostream>
#include <random>
#include <set>

#include "cache/decode.hpp"
#include "cache/h5util.hpp"
#include "cache/transform.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/half.hpp"
#include "core/hash.hpp"
#include "io/scene_pool.hpp"

namespace hsipipe::cache {

namespace {

double max_abs_diff(const std::vector<char>& a, const std::vector<char>& b, DType dt) {
  double m = 0;
  const std::size_t n = a.size() / dtype_size(dt);
  for (std::size_t i = 0; i < n; ++i) {
    double x, y;
    if (dt == DType::f16) {
      std::uint16_t u, v;
      std::memcpy(&u, a.data() + 2 * i, 2);
      std::memcpy(&v, b.data() + 2 * i, 2);
      x = half_to_float(u);
      y = half_to_float(v);
    } else {
      float u, v;
      std::memcpy(&u, a.data() + 4 * i, 4);
      std::memcpy(&v, b.data() + 4 * i, 4);
      x = u;
      y = v;
    }
    if (std::isnan(x) && std::isnan(y)) continue;
    m = std::max(m, std::isnan(x - y) ? INFINITY : std::fabs(x - y));
  }
  return m;
}

/// k distinct numbers of [0, n), ascending (k <= n; all of them when k == n), from `rng`: Floyd's
/// sampling, so that `--samples K` compares K different samples and a corruption of any one of N is
/// found when K >= N. Deterministic for a seed (std::mt19937_64 is the same everywhere; the modulo is
/// kept over the standard distributions, whose results differ between standard libraries).
std::vector<std::uint64_t> distinct_picks(std::uint64_t k, std::uint64_t n, std::mt19937_64& rng) {
  if (k >= n) {  // every one, without a set of n nodes
    std::vector<std::uint64_t> all(n);
    std::iota(all.begin(), all.end(), std::uint64_t{0});
    return all;
  }
  std::set<std::uint64_t> got;
  for (std::uint64_t j = n - k; j < n; ++j) {
    const std::uint64_t t = rng() % (j + 1);
    got.insert(got.count(t) ? j : t);
  }
  return {got.begin(), got.end()};
}

}  // namespace

namespace {

/// A remote source's identity now (HEAD + the first 64 KiB: size, ETag, Last-Modified, header hash) against
/// the manifest's entry `s`.
void check_remote_source(const nlohmann::json& s, VerifyReport& rep) {
  const std::string p = s.value("path", "");
  try {
    const auto id = io::open_scene(io::SceneSpec::parse(p))->source_identity();
    if (!id) {
      rep.problems.push_back("source " + p + ": no longer opens as a remote scene");
      return;
    }
    if (id->size != s.value("size", std::uint64_t{0}))
      rep.problems.push_back("source " + p + ": size " + std::to_string(id->size) + ", manifest says " +
                             std::to_string(s.value("size", std::uint64_t{0})));
    for (const char* k : {"etag", "last_modified"}) {
      const std::string was = s.value(k, ""), now = k[0] == 'e' ? id->etag : id->last_modified;
      if (!was.empty() && was != now) rep.problems.push_back("source " + p + ": " + k + " " + now + ", manifest says " + was);
    }
    if (id->content_hash != s.value("xxh3", ""))
      rep.problems.push_back("source " + p + ": content hash " + id->content_hash + ", manifest says " + s.value("xxh3", ""));
  } catch (const Error& e) {
    rep.problems.push_back("source " + p + ": " + e.what());
  }
}

/// 1. The manifest's sources against the files and objects now.
void check_sources(const nlohmann::json& m, const VerifyOptions& opts, VerifyReport& rep) {
  int checked = 0;
  for (const auto& s : m.at("sources")) {
    if (!s.is_object()) {  // decode writes {path, size, ...}; anything else describes no file
      rep.problems.push_back("manifest sources: an entry that names no file: " + s.dump());
      continue;
    }
    if (!s.value("remote", false)) continue;  // local sources: local_sources_now, below
    check_remote_source(s, rep);
    ++checked;
  }
  for (const auto& now : local_sources_now(m.at("sources"), opts.deep)) {
    if (now.state == SourceNow::State::missing || now.state == SourceNow::State::changed)
      rep.problems.push_back("source " + now.path + ": " + now.what);
    else if (now.state == SourceNow::State::touched)
      rep.notes.push_back("source " + now.path + ": " + now.what);
    ++checked;
  }
  rep.notes.push_back("sources: " + std::to_string(checked) + " checked (size, mtime" + (opts.deep ? ", xxh3" : "") + ")");
  // every local file the parameters name is among the sources (decode lists each): one left out of the list
  // (a manifest edited or written by another tool) would never be compared
  std::set<std::string> listed;
  for (const auto& s : m.at("sources"))
    if (s.is_object()) listed.insert(s.value("path", ""));
  for (const auto& s : m.at("params").at("scenes"))
    for (const nlohmann::json* f : {&s, s.contains("labels") && s["labels"].is_object() ? &s["labels"] : nullptr}) {
      if (!f || !f->contains("path") || !(*f)["path"].is_string()) continue;
      const std::string p = (*f)["path"].get<std::string>();
      if (p.find("://") != std::string::npos || p.rfind("/vsi", 0) == 0) continue;  // remote: listed redacted
      if (!listed.count(p))
        rep.problems.push_back("manifest sources: " + p + " (params.scenes, scene '" + s.value("name", "") +
                               "') is not among the sources, so it cannot be checked");
    }
}

/// The cache's scenes and label rasters opened again for re-decoding, as decode read them; false (with
/// the problem in `rep`) when one cannot be.
bool open_sources(const std::string& dir, const nlohmann::json& params, const Preprocessor& pre,
                  std::vector<std::unique_ptr<io::Scene>>& scenes, std::vector<std::optional<io::LabelImage>>& labels,
                  VerifyReport& rep) {
  io::ScenePool pool;  // hundreds of scenes: at most io::kMaxOpenScenes readers open at once (scene_pool.hpp)
  for (const auto& s : params.at("scenes")) {
    io::SceneSpec spec{s.at("path").get<std::string>(), s.value("variable", ""), s.value("axes", "hwb")};
    spec.role = io::SceneSpec::Role::scene;
    if (s.contains("image_size")) spec.set_image_size(s.at("image_size").get<std::string>(), dir + "/manifest.json: image_size");
    try {
      scenes.push_back(pool.open(spec));
    } catch (const Error& e) {
      rep.problems.push_back("scene " + spec.str() + ": cannot be opened for re-decoding: " + e.what());
      return false;
    }
    const std::size_t nb = scenes.back()->bands();
    if (std::any_of(pre.kept.begin(), pre.kept.end(), [&](int b) { return static_cast<std::size_t>(b) >= nb; })) {
      rep.problems.push_back("scene " + spec.str() + ": has " + std::to_string(nb) + " bands, fewer than the cache's kept bands need");
      return false;
    }
    // as decode decided validity: by the kept bands (caches before "validity_bands": by every band)
    if (params.value("validity_bands", "all") == "kept") scenes.back()->set_validity_bands(band_flags(pre.kept, nb));
    if (s.at("labels").is_object()) {
      io::SceneSpec ls{s["labels"].at("path").get<std::string>(), s["labels"].value("variable", ""), s["labels"].value("axes", "hwb")};
      try {
        labels.push_back(io::read_labels(ls));
      } catch (const Error& e) {
        rep.problems.push_back("labels " + ls.str() + ": cannot be read for re-decoding: " + e.what());
        return false;
      }
    } else {
      labels.emplace_back();
    }
  }
  return true;
}

/// What re-decoding compares against: the cache, its transform, the reopened sources.
struct Redecode {
  const CacheReader& c;
  const Preprocessor& pre;
  const SampleTable& t;
  const std::vector<std::unique_ptr<io::Scene>>& scenes;
  const std::vector<std::optional<io::LabelImage>>& labels;
  Border border;
  std::uint64_t compared = 0, bad = 0;
};

/// The cube layout: random rows re-decoded.
void redecode_cube_rows(Redecode& d, const VerifyOptions& opts, std::mt19937_64& rng, VerifyReport& rep) {
  const DType dt = d.c.dtype();
  std::uint64_t total_rows = 0;
  for (const auto& s : d.t.scenes) total_rows += s.rows;
  for (std::uint64_t g : distinct_picks(std::min<std::uint64_t>(opts.samples, total_rows), total_rows, rng)) {
    int s = 0;
    while (g >= d.t.scenes[static_cast<std::size_t>(s)].rows) g -= d.t.scenes[static_cast<std::size_t>(s++)].rows;
    const RowWindow w = transformed_rows(*d.scenes[static_cast<std::size_t>(s)], d.pre, g, g + 1);
    std::vector<char> mine(w.data.size() * dtype_size(dt));
    store_values(w.data.data(), w.data.size(), dt, mine.data());
    const auto stored = read_items_raw(d.c, g, g + 1, s);
    ++d.compared;
    if (stored != mine) {
      ++d.bad;
      rep.problems.push_back("cube row " + std::to_string(g) + " of scene " + std::to_string(s) +
                             ": stored values differ from a fresh decode (max |diff| " +
                             std::to_string(max_abs_diff(stored, mine, dt)) + ")");
    }
  }
}

/// The pixel and patch layouts: random samples re-decoded, and their labels compared with the rasters.
void redecode_samples(Redecode& d, const VerifyOptions& opts, std::mt19937_64& rng, VerifyReport& rep) {
  const DType dt = d.c.dtype();
  const Layout layout = d.c.layout();
  const int p = d.c.patch();
  const auto& t = d.t;
  const std::uint64_t N = d.c.n_samples();
  const int h = layout == Layout::patch ? p / 2 : 0;
  for (const std::uint64_t i : distinct_picks(std::min<std::uint64_t>(opts.samples, N), N, rng)) {
    const auto s = static_cast<std::size_t>(t.scene[i]);
    const auto r = static_cast<std::size_t>(t.row[i]), col = static_cast<std::size_t>(t.col[i]);
    const auto& sc = *d.scenes.at(s);
    if (d.labels[s] && d.labels[s]->at(r, col) != t.label[i])
      rep.problems.push_back("sample " + std::to_string(i) + ": label " + std::to_string(t.label[i]) +
                             " but the label raster says " + std::to_string(d.labels[s]->at(r, col)));
    const std::size_t rr0 = r >= static_cast<std::size_t>(h) ? r - static_cast<std::size_t>(h) : 0;
    const std::size_t rr1 = std::min(sc.rows(), r + static_cast<std::size_t>(h) + 1);
    const RowWindow w = transformed_rows(sc, d.pre, rr0, rr1);
    std::vector<float> f;
    if (layout == Layout::pixel) {
      f.assign(w.pixel(r, col), w.pixel(r, col) + w.bands);
    } else {
      f.resize(static_cast<std::size_t>(w.bands) * static_cast<std::size_t>(p) * static_cast<std::size_t>(p));
      cut_patch(w, r, col, p, d.border, f.data());
    }
    std::vector<char> mine(f.size() * dtype_size(dt));
    store_values(f.data(), f.size(), dt, mine.data());
    const auto stored = read_items_raw(d.c, i, i + 1);
    ++d.compared;
    if (stored != mine) {
      ++d.bad;
      rep.problems.push_back("sample " + std::to_string(i) + " (scene " + std::to_string(s) + ", row " +
                             std::to_string(r) + ", col " + std::to_string(col) +
                             "): stored values differ from a fresh decode (max |diff| " +
                             std::to_string(max_abs_diff(stored, mine, dt)) + ")");
    }
  }
}

/// 3. Random items re-decoded from the sources and compared with the stored bytes.
void check_redecoded(const std::string& dir, const CacheReader& c, const VerifyOptions& opts, VerifyReport& rep) {
  const auto& m = c.manifest();
  const Preprocessor pre = preprocessor_from(m, dir + "/manifest.json");
  const Border border = border_from_name(m.value("border", "reflect"));
  std::vector<std::unique_ptr<io::Scene>> scenes;
  std::vector<std::optional<io::LabelImage>> labels;
  if (!open_sources(dir, m.at("params"), pre, scenes, labels, rep)) return;
  const SampleTable t = c.read_sample_table();
  std::mt19937_64 rng(opts.seed);
  Redecode d{c, pre, t, scenes, labels, border};
  if (c.layout() == Layout::cube) redecode_cube_rows(d, opts, rng, rep);
  else redecode_samples(d, opts, rng, rep);
  rep.notes.push_back(std::to_string(d.compared) + (c.layout() == Layout::cube ? " cube rows" : " samples") +
                      " re-decoded from the sources: " + std::to_string(d.compared - d.bad) + " identical");
}

}  // namespace

VerifyReport verify(const std::string& dir, const VerifyOptions& opts) {
  VerifyReport rep;
  const CacheReader c = CacheReader::open(dir);
  const auto& m = c.manifest();
  rep.notes.push_back("manifest: format_version " + std::to_string(m.at("format_version").get<int>()) + ", " +
                      std::to_string(c.n_samples()) + " samples, layout " + layout_name(c.layout()) + ", " +
                      std::string(dtype_name(c.dtype())) + ", backend " + c.backend());
  check_sources(m, opts, rep);
  // 2. checksum
  const std::string cs = compute_data_checksum(c);
  if (cs != c.data_checksum())
    rep.problems.push_back("data checksum: recomputed " + cs + ", manifest says " + c.data_checksum());
  else
    rep.notes.push_back("data checksum " + cs + ": matches");
  if (opts.samples > 0) check_redecoded(dir, c, opts, rep);
  return rep;
}

std::vector<SourceNow> local_sources_now(const nlohmann::json& sources, bool deep) {
  std::vector<SourceNow> out;
  for (const auto& s : sources) {
    if (!s.is_object() || s.value("remote", false) || !s.contains("path")) continue;  // no local file to compare
    SourceNow now;
    now.path = s.value("path", "");
    const std::uint64_t size = s.value("size", std::uint64_t{0});
    const std::int64_t mtime = s.value("mtime_ns", std::int64_t{0});
    const std::string xxh3 = s.value("xxh3", "");
    std::error_code ec;
    if (!std::filesystem::is_regular_file(now.path, ec)) {
      now.state = SourceNow::State::missing;
      now.what = std::filesystem::exists(now.path, ec) ? "no longer a regular file" : "missing";
      out.push_back(std::move(now));
      continue;
    }
    const auto st = fs::stat_file(now.path);
    if (st.size != size) {
      now.state = SourceNow::State::changed;
      now.what = "modified since the decode: size " + std::to_string(st.size) + ", manifest says " + std::to_string(size);
    } else if (deep || st.mtime_ns != mtime) {
      const std::string h = hex64(xxh3_chunked_file(now.path));  // as decode hashes sources (core/hash.hpp)
      if (h != xxh3) {
        now.state = SourceNow::State::changed;
        now.what = "modified since the decode: content hash " + h + ", manifest says " + xxh3 +
                   (st.mtime_ns != mtime ? ", mtime differs" : ", same size and mtime");
      } else if (st.mtime_ns != mtime) {
        now.state = SourceNow::State::touched;
        now.what = "mtime differs from the manifest's, content the same (xxh3 " + h + ")";
      }
    }
    out.push_back(std::move(now));
  }
  return out;
}

void require_current_sources(const CacheReader& cache, std::ostream* notes) {
  for (const auto& now : local_sources_now(cache.manifest().at("sources"), false)) {
    if (now.state == SourceNow::State::changed)
      throw StaleError(cache.dir() + ": stale cache: its source " + now.path + " was " + now.what +
                       "; decode again (hsipipe decode refuses it, or with --force rebuilds it), see hsipipe verify");
    if (!notes) continue;
    if (now.state == SourceNow::State::missing)
      *notes << "note: cache " << cache.dir() << ": source " << now.path << " " << now.what
             << " here; the cache is used as decoded (hsipipe verify needs the sources)\n";
    else if (now.state == SourceNow::State::touched)
      *notes << "note: cache " << cache.dir() << ": source " << now.path << ": " << now.what << "\n";
  }
}

}  // namespace hsipipe::cache

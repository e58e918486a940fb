// cache/reuse: reuse, replace or refuse the cache already at --out (see reuse.hpp).
#include "cache/reuse.hpp"

#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include "cache/cache.hpp"
#include "cache/preprocess.hpp"
#include "cache/publish.hpp"
#include "core/error.hpp"

namespace hsipipe::cache {

void json_diff(const nlohmann::json& a, const nlohmann::json& b, const std::string& prefix, std::vector<std::string>& out) {
  if (a.is_object() && b.is_object()) {
    std::set<std::string> keys;
    for (auto it = a.begin(); it != a.end(); ++it) keys.insert(it.key());
    for (auto it = b.begin(); it != b.end(); ++it) keys.insert(it.key());
    for (const auto& k : keys) {
      const std::string p = prefix.empty() ? k : prefix + "." + k;
      if (!a.contains(k)) out.push_back(p + ": (absent) -> " + b.at(k).dump());
      else if (!b.contains(k)) out.push_back(p + ": " + a.at(k).dump() + " -> (absent)");
      else json_diff(a.at(k), b.at(k), p, out);
    }
    return;
  }
  if (a != b) out.push_back(prefix + ": " + a.dump() + " -> " + b.dump());
}

std::vector<std::string> source_diff(const nlohmann::json& old_src, const nlohmann::json& new_src) {
  std::vector<std::string> out;
  std::map<std::string, nlohmann::json> o, n;
  for (const auto& s : old_src) o[s.value("path", "")] = s;
  for (const auto& s : new_src) n[s.value("path", "")] = s;
  for (const auto& [p, s] : n) {
    auto it = o.find(p);
    if (it == o.end()) { out.push_back("source " + p + ": new"); continue; }
    // a file given a new time but not new bytes (copied, touched) is the same source: its content hash,
    // which decode compares anyway, says so
    const bool same_bytes = !s.value("remote", false) && !s.value("xxh3", "").empty() &&
                            it->second.value("xxh3", "") == s.value("xxh3", "") &&
                            it->second.value("size", nlohmann::json()) == s.value("size", nlohmann::json());
    for (const char* k : {"size", "mtime_ns", "xxh3", "etag", "last_modified"}) {
      if (same_bytes && std::strcmp(k, "mtime_ns") == 0) continue;
      if (it->second.value(k, nlohmann::json()) != s.value(k, nlohmann::json()))
        out.push_back("source " + p + ": " + k + " " + it->second.value(k, nlohmann::json()).dump() + " -> " +
                      s.value(k, nlohmann::json()).dump());
    }
  }
  for (const auto& [p, s] : o)
    if (!n.count(p)) out.push_back("source " + p + ": no longer used");
  return out;
}

namespace {

/// What is not a cache is never replaced, --force or not (a folder of scenes given as --out by mistake),
/// nor one that holds a source of this decode.
void refuse_non_cache(const std::string& out, const nlohmann::json& sources) {
  if (const std::string why_not = why_not_replaceable(out); !why_not.empty())
    throw StaleError(out + ": exists and " + why_not + "; decode replaces only a cache (even with --force): "
                           "move it away or choose another --out");
  for (const auto& src : sources) {
    if (src.value("remote", false)) continue;
    const std::string p = std::filesystem::absolute(src.value("path", "")).lexically_normal().string();
    if (p == out || p.rfind(out + "/", 0) == 0)
      throw ConfigError(out + ": holds the source " + p + " of this decode; choose another --out");
  }
}

/// An older cache's parameters, in this version's terms where the difference cannot matter.
nlohmann::json comparable_params(nlohmann::json old_params, const nlohmann::json& params, bool any_label_nodata) {
  // a cache from before the manifest recorded one spelling of --drop-bands: compared in that spelling
  // (a list this version cannot read stays as written, and differs)
  if (const auto it = old_params.find("drop_bands"); it != old_params.end() && it->is_string()) {
    try {
      *it = canonical_band_list(it->get<std::string>());
    } catch (const ConfigError&) {
    }
  }
  // A cache from before a rule was recorded, where the rule cannot have made a difference, holds what
  // this version would build: every band decided validity (the same when none is dropped), a label
  // raster's nodata was a class (the same when no label raster has one: the sources are compared below)
  if (!old_params.contains("validity_bands") && old_params.value("drop_bands", std::string("x")).empty() &&
      !old_params.value("bad_bands_from_header", true))
    old_params["validity_bands"] = "kept";
  if (!old_params.contains("label_nodata") && !any_label_nodata) old_params["label_nodata"] = "not_a_sample";
  // a cache from before the manifest recorded the variable read by default ("variable": ""): that default
  // is the one read now (a file where more than one array could be the scene is refused before this)
  if (auto sc = old_params.find("scenes"); sc != old_params.end() && sc->is_array() && sc->size() == params["scenes"].size())
    for (std::size_t i = 0; i < sc->size(); ++i) {
      auto& o = (*sc)[i];
      const auto& n = params["scenes"][i];
      if (o.value("variable", "x").empty()) o["variable"] = n.value("variable", "");
      if (o.contains("labels") && o["labels"].is_object() && n["labels"].is_object() && o["labels"].value("variable", "x").empty())
        o["labels"]["variable"] = n["labels"].value("variable", "");
    }
  return old_params;
}

/// The differences between the cache `old` and this decode: parameters, then sources.
std::vector<std::string> cache_diffs(const CacheReader& old, const nlohmann::json& params, const nlohmann::json& sources,
                                     bool any_label_nodata) {
  std::vector<std::string> diffs;
  const nlohmann::json old_params =
      comparable_params(old.manifest().value("params", nlohmann::json::object()), params, any_label_nodata);
  json_diff(old_params, params, "", diffs);
  for (auto& d : diffs) {
    if (d.rfind("validity_bands", 0) == 0 || d.rfind("label_nodata", 0) == 0)
      d += " (a rule this cache was made before: an older hsipipe's; --force rebuilds it)";
    d = "parameter " + d;
  }
  for (auto& d : source_diff(old.manifest().at("sources"), sources)) diffs.push_back(d);
  return diffs;
}

}  // namespace

nlohmann::json decide_reuse(const std::string& out, const nlohmann::json& params, const nlohmann::json& sources,
                            bool force, bool any_label_nodata) {
  if (!std::filesystem::exists(std::filesystem::symlink_status(out))) return {{"action", "go"}};
  refuse_non_cache(out, sources);
  std::optional<CacheReader> old;
  std::string why;
  try {
    old = CacheReader::open(out);
  } catch (const Error& e) {
    why = e.what();
  }
  if (!old) {
    if (!force) throw StaleError(out + ": exists but is not a valid cache (" + why + "); use --force to replace it");
    refuse_foreign_entries(out, "decode --force");
    return {{"action", "go"}};
  }
  const std::vector<std::string> diffs = cache_diffs(*old, params, sources, any_label_nodata);
  if (diffs.empty()) {
    if (!force) return {{"action", "reuse"}, {"checksum", old->data_checksum()}, {"n_samples", old->n_samples()}};
    // current, but asked for: e.g. its samples were damaged (verify says so)
    refuse_foreign_entries(out, "decode --force");
    std::cerr << "decode: --force: rebuilding " << out << " (it matches its sources and parameters)\n";
    return {{"action", "go"}};
  }
  if (!force) {
    std::string msg = out + ": a cache built from different sources or parameters is already there; "
                            "use --force to replace it or choose another --out. Differences:";
    for (const auto& d : diffs) msg += "\n  " + d;
    throw StaleError(msg);
  }
  refuse_foreign_entries(out, "decode --force");
  std::cerr << "decode: --force: replacing " << out << " (" << diffs.size() << " difference"
            << (diffs.size() > 1 ? "s" : "") << ")\n";
  return {{"action", "go"}};
}

}  // namespace hsipipe::cache

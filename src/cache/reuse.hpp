#pragma once
// cache/reuse: whether a cache already at --out is reused, replaced (--force) or refused: its manifest's
// parameters and sources against this decode's. Rank 0 only (decode calls it holding the lock, or the
// read-only lock where none can be created); nothing is written.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hsipipe::cache {

/// The differences between two JSON values as "key: old -> new" lines, appended to `out`.
void json_diff(const nlohmann::json& a, const nlohmann::json& b, const std::string& prefix, std::vector<std::string>& out);

/// The differences between a manifest's sources and the current ones (hashed): "source PATH: ..." lines.
/// A file with a new mtime but the same size and content hash is the same source.
std::vector<std::string> source_diff(const nlohmann::json& old_src, const nlohmann::json& new_src);

/// What decode does with `out` given its parameters (decode_params_json) and hashed sources:
/// {"action": "reuse", "checksum", "n_samples"} for a current cache (without --force), else {"action": "go"}
/// (nothing there, or a cache --force replaces; the replaced one is never a folder of foreign files).
/// Throws StaleError for a different or broken cache without --force and for what is not a cache,
/// ConfigError when `out` holds a source. `any_label_nodata`: a label raster of this decode has a nodata
/// value (an older cache's missing "label_nodata" rule then differs).
nlohmann::json decide_reuse(const std::string& out, const nlohmann::json& params, const nlohmann::json& sources,
                            bool force, bool any_label_nodata);

}  // namespace hsipipe::cache

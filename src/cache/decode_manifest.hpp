#pragma once
// cache/decode_manifest: the manifest.json a decode writes (cache.hpp states what it holds); the parameters
// part, decode_params_json, is declared in decode.hpp. Rank-local (rank 0 builds it).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/decode_plan.hpp"
#include "cache/preprocess.hpp"

namespace hsipipe::cache {

/// What the manifest records that the passes computed.
struct DecodeFacts {
  const BandStats& stats;
  const Preprocessor& pre;
  const std::vector<double>& explained;  ///< PCA: each component's variance
  std::string checksum;                  ///< data_checksum_of() of the items, labels and coords
  std::uint64_t source_bytes_read = 0;   ///< all ranks together
};

/// The manifest of the cache `plan` describes, as text (JSON, indent 1): `params` (decode_params_json),
/// `sources` (hashed), the facts, the scenes, the statistics, PCA and the library versions.
std::string build_manifest(const DecodePlan& plan, const nlohmann::json& params, const nlohmann::json& sources,
                           const DecodeFacts& facts);

}  // namespace hsipipe::cache

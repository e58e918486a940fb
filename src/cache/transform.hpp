#pragma once
// cache/transform: a cache's preprocessing, read back from its manifest and applied to rows of any
// scene, so that a pixel is transformed exactly as decode stored it. Shared by `verify` (re-decoding
// samples to compare with the stored bytes) and `predict` (mapping whole scenes with a model trained on
// the cache). Rank-local.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/preprocess.hpp"
#include "io/scene.hpp"

namespace hsipipe::cache {

/// The transform decode applied (kept bands, shift/scale, PCA), from manifest `m`; `path` names the file
/// in errors. Throws FormatError naming the field when one is missing, malformed or not finite.
Preprocessor preprocessor_from(const nlohmann::json& m, const std::string& path);

/// Rows [rr0, rr1) of `scene`, bands selected and transformed (Preprocessor::apply: an invalid pixel is
/// 0 in every band). When `valid` is given it receives one flag per pixel of those rows, row-major: 1 for
/// a valid pixel, 0 for nodata / NaN / +-Inf in a band that counts (io::Scene::set_validity_bands).
RowWindow transformed_rows(const io::Scene& scene, const Preprocessor& pre, std::size_t rr0, std::size_t rr1,
                           std::vector<std::uint8_t>* valid = nullptr);

/// Rounds n float32 values in place to what the cache dtype stores (float16: IEEE half, nearest even;
/// float32: unchanged), i.e. the values a consumer of the cache reads back. Throws as store_values does.
void round_to_dtype(float* v, std::size_t n, DType dt);

}  // namespace hsipipe::cache

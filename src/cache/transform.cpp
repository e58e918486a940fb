#include "cache/transform.hpp"

#include <cmath>

#include "core/error.hpp"
#include "core/half.hpp"

namespace hsipipe::cache {

Preprocessor preprocessor_from(const nlohmann::json& m, const std::string& path) try {
  Preprocessor p;
  for (int b : m.at("bands").at("kept").get<std::vector<int>>()) p.kept.push_back(b - 1);
  p.shift = m.at("statistics").at("shift").get<std::vector<double>>();
  p.scale = m.at("statistics").at("scale").get<std::vector<double>>();
  if (m.contains("pca") && m.at("pca").is_object()) {
    const auto& pc = m.at("pca");
    p.pca_k = pc.at("k").get<int>();
    p.pca_mean = pc.at("mean").get<std::vector<double>>();
    for (const auto& row : pc.at("components")) {
      const auto v = row.get<std::vector<double>>();
      p.components.insert(p.components.end(), v.begin(), v.end());
    }
  }
  const std::size_t K = p.kept.size();
  if (p.shift.size() != K || p.scale.size() != K)
    throw FormatError(path, "statistics", "shift/scale: " + std::to_string(p.shift.size()) + "/" + std::to_string(p.scale.size()) +
                                              " values for " + std::to_string(K) + " kept bands");
  for (std::size_t b = 0; b < K; ++b)
    if (!std::isfinite(p.shift[b]) || !std::isfinite(p.scale[b]) || p.scale[b] == 0)
      throw FormatError(path, "statistics", "band " + std::to_string(p.kept[b] + 1) + ": shift/scale not finite, or scale 0");
  return p;
} catch (const nlohmann::json::exception& e) {
  throw FormatError(path, "bands/statistics/pca", std::string("missing or malformed (") + e.what() + ")");
}

RowWindow transformed_rows(const io::Scene& scene, const Preprocessor& pre, std::size_t rr0, std::size_t rr1,
                           std::vector<std::uint8_t>* valid) {
  const std::size_t W = scene.cols(), S = scene.bands(), K = pre.kept.size();
  const auto OB = static_cast<std::size_t>(pre.out_bands());
  std::vector<float> raw((rr1 - rr0) * W * S), sel((rr1 - rr0) * W * K);
  scene.read_rows(rr0, rr1, raw.data());
  select_bands(raw.data(), (rr1 - rr0) * W, static_cast<int>(S), pre.kept, sel.data());
  RowWindow w;
  w.row0 = rr0;
  w.nrows = rr1 - rr0;
  w.cols = W;
  w.scene_rows = scene.rows();
  w.bands = static_cast<int>(OB);
  w.data.resize((rr1 - rr0) * W * OB);
  const std::size_t n = (rr1 - rr0) * W;
  for (std::size_t i = 0; i < n; ++i) pre.apply(sel.data() + i * K, w.data.data() + i * OB);
  if (valid) {  // read_rows marks an invalid pixel NaN in every band, so the first kept band tells
    valid->resize(n);
    for (std::size_t i = 0; i < n; ++i) (*valid)[i] = K > 0 && !std::isnan(sel[i * K]);
  }
  return w;
}

void round_to_dtype(float* v, std::size_t n, DType dt) {
  if (dt == DType::f32) return;
  std::vector<std::uint16_t> h(n);
  store_values(v, n, dt, h.data());
  halves_to_floats(h.data(), v, n);
}

}  // namespace hsipipe::cache


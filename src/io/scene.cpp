#include "io/scene.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iomanip>
#include <sstream>
#include <filesystem>
#include <stdexcept>

#include "core/error.hpp"

namespace hsipipe::io {

void Scene::set_validity_bands(std::vector<std::uint8_t> counts) {
  if (!counts.empty() && counts.size() != bands())
    throw std::invalid_argument("Scene::set_validity_bands: " + std::to_string(counts.size()) + " flags for " +
                                std::to_string(bands()) + " bands");
  if (!counts.empty() && std::none_of(counts.begin(), counts.end(), [](std::uint8_t f) { return f != 0; }))
    throw std::invalid_argument("Scene::set_validity_bands: no band counts");
  // every band counting is the readers' unmasked fast path
  if (std::all_of(counts.begin(), counts.end(), [](std::uint8_t f) { return f != 0; })) counts.clear();
  validity_ = std::move(counts);
}

SceneSpec SceneSpec::parse(const std::string& text) {
  SceneSpec spec;
  spec.path = text;
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return spec;
  const std::string head = text.substr(0, colon), tail = text.substr(colon + 1);
  if (tail.rfind("//", 0) == 0) return spec;  // "https://..." with no variable
  auto lower_ext = [](const std::string& p) {
    std::string e = std::filesystem::path(p).extension().string();
    for (auto& ch : e) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return e;
  };
  const std::string ext = lower_ext(head);
  if (ext == ".mat" || ext == ".h5" || ext == ".hdf5" || ext == ".he5" || ext == ".nc" || ext == ".hdf") {
    spec.path = head;
    spec.variable = tail;
  }
  return spec;
}

void SceneSpec::set_image_size(const std::string& text, const std::string& what) {
  const auto x = text.find('x');
  auto number = [&](const std::string& t) -> std::size_t {
    if (t.empty() || t.size() > 9 || !std::all_of(t.begin(), t.end(), [](unsigned char ch) { return std::isdigit(ch); }))
      return 0;
    return static_cast<std::size_t>(std::stoul(t));
  };
  const std::size_t r = x == std::string::npos ? 0 : number(text.substr(0, x));
  const std::size_t c = x == std::string::npos ? 0 : number(text.substr(x + 1));
  if (r == 0 || c == 0)
    throw ConfigError(what + ": expected ROWSxCOLS (positive integers, e.g. 95x95), got '" + text + "'");
  image_rows = r;
  image_cols = c;
}

std::string SceneSpec::image_size() const {
  return image_rows ? std::to_string(image_rows) + "x" + std::to_string(image_cols) : std::string();
}

namespace {
/// A label value for a message. read_rows() has made every non-finite value NaN (invalid pixels), so NaN stands
/// for NaN, +-inf and a float64 beyond float32's range (1e300), which all arrive so.
std::string label_text(float v) {
  if (std::isnan(v)) return "a value that is not finite (NaN, +-inf, or beyond float32's range such as 1e300)";
  std::ostringstream o;
  o << std::setprecision(9) << v;
  return o.str();
}
}  // namespace

LabelImage read_labels(const SceneSpec& spec_in) {
  SceneSpec spec = spec_in;
  spec.role = SceneSpec::Role::labels;  // a label raster is H x W, whatever else the file holds
  spec.image_rows = spec.image_cols = 0;
  auto scene = open_scene(spec);
  if (scene->bands() != 1) {
    throw FormatError(spec.str(), "bands", "a label raster must have 1 band, this one has " +
                                               std::to_string(scene->bands()));
  }
  LabelImage img;
  img.rows = scene->rows();
  img.cols = scene->cols();
  img.source = spec.str();
  img.variable = scene->variable();
  std::vector<float> buf(img.rows * img.cols);
  scene->read_rows(0, img.rows, buf.data());
  img.labels.resize(buf.size());
  // read_rows() turns nodata pixels into NaN; for a label raster with an integral nodata value they
  // become that integer again (an integer raster without nodata never holds NaN).
  std::optional<std::int32_t> nodata;
  if (const auto ig = scene->ignore_value(); ig && *ig == std::floor(*ig) && std::fabs(*ig) <= 2.0e9) {
    nodata = static_cast<std::int32_t>(*ig);
  }
  img.nodata = nodata;
  img.declared_classes = scene->declared_classes();
  const DType t = scene->source_type();
  const bool wide = t == DType::i32 || t == DType::u32 || t == DType::i64 || t == DType::u64 || t == DType::f64;
  for (std::size_t i = 0; i < buf.size(); ++i) {
    const float v = buf[i];
    if (std::isnan(v) && nodata) {
      img.labels[i] = *nodata;
      continue;
    }
    // finite, within +-2e9 (so the conversion is defined) and integral; no floor(): a libm call per pixel
    const bool in_range = std::fabs(v) <= 2.0e9f;  // false for NaN and infinities too
    const std::int32_t iv = in_range ? static_cast<std::int32_t>(v) : 0;
    // read_rows() gives float32, exact for integers below 2^24 only: in a raster whose type holds larger
    // integers (32/64-bit, float64) such an id may have been rounded to a neighbour, and is refused rather
    // than stored changed (a float32 raster's values arrive as stored)
    if (wide && in_range && std::fabs(v) >= 16777216.0f) {
      throw FormatError(spec.str(), "label value",
                        "pixel (row " + std::to_string(i / img.cols) + ", col " + std::to_string(i % img.cols) +
                            ") holds a class id of magnitude 2^24 = 16777216 or more (about " + std::to_string(static_cast<long long>(v)) +
                            "); class ids in a " + std::string(dtype_name(t)) + " label raster must be below 16777216");
    }
    if (!in_range || static_cast<float>(iv) != v) {
      throw FormatError(spec.str(), "label value",
                        "pixel (row " + std::to_string(i / img.cols) + ", col " + std::to_string(i % img.cols) +
                            ") holds " + label_text(v) + ", not an integer class id");
    }
    img.labels[i] = iv;
  }
  return img;
}

void check_labels_match(const Scene& scene, const LabelImage& labels) {
  if (labels.rows == scene.rows() && labels.cols == scene.cols()) return;
  const auto files = scene.source_files();
  const std::string scene_name = files.empty() ? std::string("the scene") : files.front();
  throw FormatError(labels.source, "dimensions",
                    "label raster is " + std::to_string(labels.rows) + " x " + std::to_string(labels.cols) +
                        " (rows x cols) but the scene " + scene_name + " is " + std::to_string(scene.rows()) +
                        " x " + std::to_string(scene.cols()));
}

}  // namespace hsipipe::io

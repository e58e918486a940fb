// train/results: fold result files, the run summary, and two small PNG renderings (libpng's
// simplified API and a built-in 5x7 bitmap font, so no font or plotting library is needed).
#include "train/results.hpp"

#include <png.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "core/fs.hpp"

namespace hsipipe::train {

namespace stdfs = std::filesystem;
using nlohmann::json;

// ---------------------------------------------------------------------------------------------
// RunInfo

json to_json(const RunInfo& r) {
  return json{{"config", r.config},
              {"cache_dir", r.cache_dir},
              {"cache_checksum", r.cache_checksum},
              {"folds_fingerprint", r.folds_fingerprint},
              {"n_folds", r.n_folds}};
}

RunInfo run_info_from_json(const json& j, const std::string& file) {
  if (!j.is_object()) throw FormatError(file, "run", "expected an object");
  RunInfo r;
  auto str = [&](const char* f) {
    if (!j.contains(f) || !j.at(f).is_string()) throw FormatError(file, std::string("run.") + f, "missing or not a string");
    return j.at(f).get<std::string>();
  };
  r.cache_checksum = str("cache_checksum");
  r.folds_fingerprint = str("folds_fingerprint");
  if (j.contains("cache_dir") && j.at("cache_dir").is_string()) r.cache_dir = j.at("cache_dir").get<std::string>();
  if (!j.contains("n_folds") || !j.at("n_folds").is_number_integer() || j.at("n_folds").get<int>() < 1)
    throw FormatError(file, "run.n_folds", "missing or not a positive integer");
  r.n_folds = j.at("n_folds").get<int>();
  if (j.contains("config")) r.config = j.at("config");
  return r;
}

// ---------------------------------------------------------------------------------------------
// PNG

void write_png(const std::string& path, int width, int height, const std::vector<Rgb>& pixels) {
  if (width <= 0 || height <= 0 || pixels.size() != static_cast<std::size_t>(width) * height)
    throw std::invalid_argument("write_png: " + path + ": pixel count does not match " + std::to_string(width) + "x" +
                                std::to_string(height));
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  img.width = static_cast<png_uint_32>(width);
  img.height = static_cast<png_uint_32>(height);
  img.format = PNG_FORMAT_RGB;
  static_assert(sizeof(Rgb) == 3, "Rgb must be packed");
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&img, nullptr, &size, 0, pixels.data(), 0, nullptr))
    throw IoError(path, std::string("PNG encode failed: ") + img.message);
  std::string buf(size, '\0');
  if (!png_image_write_to_memory(&img, buf.data(), &size, 0, pixels.data(), 0, nullptr))
    throw IoError(path, std::string("PNG encode failed: ") + img.message);
  buf.resize(size);
  fs::write_text_atomic(path, buf);
}

std::vector<Rgb> read_png(const std::string& path, int& width, int& height) {
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&img, path.c_str())) throw FormatError(path, "png", img.message);
  img.format = PNG_FORMAT_RGB;
  std::vector<Rgb> px(static_cast<std::size_t>(img.width) * img.height);
  if (!png_image_finish_read(&img, nullptr, px.data(), 0, nullptr)) {
    png_image_free(&img);
    throw FormatError(path, "png", img.message);
  }
  width = static_cast<int>(img.width);
  height = static_cast<int>(img.height);
  return px;
}

Rgb class_colour(int c) {
  static const std::array<Rgb, 20> palette = {{{230, 25, 75},   {60, 180, 75},   {255, 225, 25},  {0, 130, 200},
                                               {245, 130, 48},  {145, 30, 180},  {70, 240, 240},  {240, 50, 230},
                                               {210, 245, 60},  {250, 190, 212}, {0, 128, 128},   {220, 190, 255},
                                               {170, 110, 40},  {255, 250, 200}, {128, 0, 0},     {170, 255, 195},
                                               {128, 128, 0},   {255, 215, 180}, {0, 0, 128},     {255, 255, 255}}};
  if (c >= 0 && c < static_cast<int>(palette.size())) return palette[static_cast<std::size_t>(c)];
  // Golden-ratio hues beyond the palette, full saturation, alternating value.
  const double h = std::fmod(0.11 + (c - 20) * 0.618033988749895, 1.0) * 6.0;
  const double v = (c % 2) ? 0.95 : 0.7, f = h - std::floor(h);
  const double p = 0, q = v * (1 - f), t = v * f;
  double r = 0, g = 0, b = 0;
  switch (static_cast<int>(h) % 6) {
    case 0: r = v, g = t, b = p; break;
    case 1: r = q, g = v, b = p; break;
    case 2: r = p, g = v, b = t; break;
    case 3: r = p, g = q, b = v; break;
    case 4: r = t, g = p, b = v; break;
    default: r = v, g = p, b = q; break;
  }
  auto u8 = [](double x) { return static_cast<std::uint8_t>(std::lround(std::clamp(x, 0.0, 1.0) * 255)); };
  return {u8(r), u8(g), u8(b)};
}

namespace {

// 5x7 bitmap font: 7 rows per glyph, bit 4 is the leftmost column. Lower case draws as upper case.
const std::array<std::uint8_t, 7>& glyph(char ch) {
  static const std::map<char, std::array<std::uint8_t, 7>> font = {
      {'0', {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E}}, {'1', {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E}},
      {'2', {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F}}, {'3', {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E}},
      {'4', {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02}}, {'5', {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E}},
      {'6', {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E}}, {'7', {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08}},
      {'8', {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E}}, {'9', {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C}},
      {'A', {0x0E, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11}}, {'B', {0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E}},
      {'C', {0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E}}, {'D', {0x1C, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1C}},
      {'E', {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F}}, {'F', {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10}},
      {'G', {0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F}}, {'H', {0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11}},
      {'I', {0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E}}, {'J', {0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C}},
      {'K', {0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11}}, {'L', {0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F}},
      {'M', {0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11}}, {'N', {0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11}},
      {'O', {0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E}}, {'P', {0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10}},
      {'Q', {0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D}}, {'R', {0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11}},
      {'S', {0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E}}, {'T', {0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04}},
      {'U', {0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E}}, {'V', {0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04}},
      {'W', {0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A}}, {'X', {0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11}},
      {'Y', {0x11, 0x11, 0x11, 0x0A, 0x04, 0x04, 0x04}}, {'Z', {0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F}},
      {' ', {0, 0, 0, 0, 0, 0, 0}},                      {'-', {0, 0, 0, 0x1F, 0, 0, 0}},
      {'.', {0, 0, 0, 0, 0, 0x0C, 0x0C}},                {'_', {0, 0, 0, 0, 0, 0, 0x1F}},
      {':', {0, 0x0C, 0x0C, 0, 0x0C, 0x0C, 0}},          {'+', {0, 0x04, 0x04, 0x1F, 0x04, 0x04, 0}},
      {'%', {0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03}}, {'/', {0, 0x01, 0x02, 0x04, 0x08, 0x10, 0}},
      {'\\', {0, 0x10, 0x08, 0x04, 0x02, 0x01, 0}},      {'(', {0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02}},
      {')', {0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08}}, {'=', {0, 0, 0x1F, 0, 0x1F, 0, 0}},
      {',', {0, 0, 0, 0, 0x0C, 0x04, 0x08}},
  };
  static const std::array<std::uint8_t, 7> box = {0x1F, 0x11, 0x11, 0x11, 0x11, 0x11, 0x1F};
  const char up = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  auto it = font.find(up);
  return it == font.end() ? box : it->second;
}

constexpr int kGlyphW = 6, kGlyphH = 8;  // with one column / row of spacing

struct Canvas {
  int w, h;
  std::vector<Rgb> px;
  Canvas(int w_, int h_, Rgb bg) : w(w_), h(h_), px(static_cast<std::size_t>(w_) * h_, bg) {}
  void set(int x, int y, Rgb c) {
    if (x >= 0 && y >= 0 && x < w && y < h) px[static_cast<std::size_t>(y) * w + x] = c;
  }
  void rect(int x0, int y0, int rw, int rh, Rgb c) {
    for (int y = y0; y < y0 + rh; ++y)
      for (int x = x0; x < x0 + rw; ++x) set(x, y, c);
  }
  void text(int x, int y, const std::string& s, Rgb c, int scale = 1) {
    for (char ch : s) {
      const auto& g = glyph(ch);
      for (int r = 0; r < 7; ++r)
        for (int k = 0; k < 5; ++k)
          if (g[static_cast<std::size_t>(r)] & (0x10 >> k)) rect(x + k * scale, y + r * scale, scale, scale, c);
      x += kGlyphW * scale;
    }
  }
};

int text_width(const std::string& s, int scale = 1) { return static_cast<int>(s.size()) * kGlyphW * scale; }
}  // namespace

void draw_text(std::vector<Rgb>& pixels, int width, int height, int x, int y, const std::string& text, Rgb colour,
               int scale) {
  Canvas cv(width, height, Rgb{});
  cv.px.swap(pixels);
  cv.text(x, y, text, colour, scale);
  cv.px.swap(pixels);
}

namespace {

const Rgb kWhite{255, 255, 255}, kBlack{0, 0, 0}, kDark{24, 24, 28}, kGrey{160, 160, 160};

void write_confusion_png(const std::string& path, const Metrics& m, int fold) {
  const int c = m.confusion.n_classes();
  std::int64_t max_count = 0;
  for (auto v : m.confusion.data()) max_count = std::max(max_count, v);
  const int count_chars = static_cast<int>(std::to_string(max_count).size());
  const int cell = std::clamp(count_chars * kGlyphW + 4, 14, 48);
  int label_w = 0;
  for (auto v : m.label_values) label_w = std::max(label_w, text_width(std::to_string(v)));
  const int left = label_w + 8 + kGlyphH + 4, top = 2 * kGlyphH + 12 + label_w;
  const int grid = c * cell;
  const std::string title = "FOLD " + std::to_string(fold) + " CONFUSION (ROWS TRUE, COLS PREDICTED)";
  const int width = std::max(left + grid + 8, text_width(title) + 8), height = top + grid + 8;
  Canvas cv(width, height, kWhite);
  cv.text(4, 4, title, kBlack);
  // Column labels, written vertically (one character below the other) above the grid.
  for (int j = 0; j < c; ++j) {
    const std::string s = std::to_string(m.label_values[static_cast<std::size_t>(j)]);
    for (std::size_t k = 0; k < s.size(); ++k)
      cv.text(left + j * cell + (cell - 5) / 2, top - 4 - static_cast<int>(s.size() - k) * kGlyphH, std::string(1, s[k]), kBlack);
  }
  for (int i = 0; i < c; ++i) {
    const std::string s = std::to_string(m.label_values[static_cast<std::size_t>(i)]);
    cv.text(left - 4 - text_width(s), top + i * cell + (cell - 7) / 2, s, kBlack);
    const double row = static_cast<double>(m.support[static_cast<std::size_t>(i)]);
    for (int j = 0; j < c; ++j) {
      const auto v = m.confusion.at(i, j);
      const double f = row > 0 ? static_cast<double>(v) / row : 0.0;
      // White -> dark blue ramp on the row-normalised count.
      const Rgb col{static_cast<std::uint8_t>(255 - std::lround(f * 225)), static_cast<std::uint8_t>(255 - std::lround(f * 175)),
                    static_cast<std::uint8_t>(255 - std::lround(f * 75))};
      cv.rect(left + j * cell, top + i * cell, cell - 1, cell - 1, col);
      if (v > 0 && cell >= text_width(std::to_string(v)) + 2) {
        const std::string t = std::to_string(v);
        cv.text(left + j * cell + (cell - text_width(t)) / 2 + 1, top + i * cell + (cell - 7) / 2, t, f > 0.5 ? kWhite : kBlack);
      }
    }
  }
  write_png(path, cv.w, cv.h, cv.px);
}

void write_map_png(const std::string& path, const FoldResult& fold, const std::vector<cache::SceneDims>& scenes,
                   const std::vector<std::int32_t>& label_values) {
  if (scenes.empty()) throw ConfigError("map.png: no scene sizes given");
  std::map<std::int32_t, int> colour_of;
  for (std::size_t i = 0; i < label_values.size(); ++i) colour_of[label_values[i]] = static_cast<int>(i);
  std::vector<ClassGrid> grids;
  for (const auto& s : scenes) grids.push_back({s.name, s.rows, s.cols, std::vector<std::int32_t>(std::size_t{s.rows} * s.cols, ClassGrid::kNone)});
  for (const auto& p : fold.predictions) {
    if (p.scene < 0 || static_cast<std::size_t>(p.scene) >= scenes.size())
      throw ConfigError("map.png: prediction for sample " + std::to_string(p.id) + " names scene " +
                        std::to_string(p.scene) + " of " + std::to_string(scenes.size()));
    auto& g = grids[static_cast<std::size_t>(p.scene)];
    if (p.row < 0 || p.col < 0 || static_cast<std::uint32_t>(p.row) >= g.rows || static_cast<std::uint32_t>(p.col) >= g.cols)
      throw ConfigError("map.png: sample " + std::to_string(p.id) + " at (" + std::to_string(p.row) + ", " +
                        std::to_string(p.col) + ") lies outside scene " + g.name);
    auto it = colour_of.find(p.pred_label);
    g.index[static_cast<std::size_t>(p.row) * g.cols + static_cast<std::size_t>(p.col)] = it == colour_of.end() ? ClassGrid::kOther : it->second;
  }
  write_class_png(path, "FOLD " + std::to_string(fold.fold) + " PREDICTED (VALIDATION PIXELS)", grids, label_values);
}

std::string fmt(double v, int prec = 6) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(prec) << v;
  return s.str();
}

}  // namespace

void write_class_png(const std::string& path, const std::string& title, const std::vector<ClassGrid>& grids,
                     const std::vector<std::int32_t>& label_values, const std::string& none_name) {
  if (grids.empty()) throw ConfigError(path + ": no scene to draw");
  std::uint32_t max_side = 1, max_cols = 1;
  for (const auto& g : grids) max_side = std::max({max_side, g.rows, g.cols}), max_cols = std::max(max_cols, g.cols);
  const int scale = static_cast<int>(std::clamp<std::uint32_t>(256 / max_side, 1, 4));
  int label_w = text_width(none_name);
  for (auto v : label_values) label_w = std::max(label_w, text_width(std::to_string(v)));
  const int legend_w = 12 + 10 + 4 + label_w + 8;
  const int legend_h = 2 * kGlyphH + static_cast<int>(label_values.size() + (none_name.empty() ? 0 : 1)) * 12 + 8;
  int maps_h = kGlyphH + 8;
  for (const auto& g : grids) maps_h += kGlyphH + 4 + static_cast<int>(g.rows) * scale + 8;
  const int width = std::max(8 + static_cast<int>(max_cols) * scale + legend_w, text_width(title) + 8);
  Canvas cv(width, std::max(maps_h, legend_h + kGlyphH + 8), kDark);
  cv.text(4, 4, title, kWhite);
  int y = kGlyphH + 8;
  for (const auto& g : grids) {
    if (g.index.size() != std::size_t{g.rows} * g.cols) throw ConfigError(path + ": scene " + g.name + ": class grid of the wrong size");
    cv.text(4, y, g.name, kGrey);
    y += kGlyphH + 4;
    for (std::uint32_t r = 0; r < g.rows; ++r)
      for (std::uint32_t c = 0; c < g.cols; ++c) {
        const std::int32_t k = g.index[std::size_t{r} * g.cols + c];
        const Rgb col = k >= 0 ? class_colour(k) : k == ClassGrid::kOther ? kGrey : kBlack;
        cv.rect(4 + static_cast<int>(c) * scale, y + static_cast<int>(r) * scale, scale, scale, col);
      }
    y += static_cast<int>(g.rows) * scale + 8;
  }
  const int lx = 8 + static_cast<int>(max_cols) * scale + 8;
  int ly = kGlyphH + 8;
  cv.text(lx, ly, "LABEL", kWhite);
  ly += kGlyphH + 4;
  for (std::size_t i = 0; i < label_values.size(); ++i) {
    cv.rect(lx, ly, 10, 10, class_colour(static_cast<int>(i)));
    cv.text(lx + 14, ly + 1, std::to_string(label_values[i]), kWhite);
    ly += 12;
  }
  if (!none_name.empty()) {
    cv.rect(lx, ly, 10, 10, kGrey);
    cv.rect(lx + 1, ly + 1, 8, 8, kBlack);
    cv.text(lx + 14, ly + 1, none_name, kWhite);
  }
  write_png(path, cv.w, cv.h, cv.px);
}

// ---------------------------------------------------------------------------------------------
// Fold results

void write_fold_results(const std::string& run_dir, const RunInfo& run, const FoldResult& fold,
                        const std::vector<cache::SceneDims>& scenes) {
  const stdfs::path dir = stdfs::path(run_dir) / ("fold-" + std::to_string(fold.fold));
  std::error_code ec;
  stdfs::create_directories(dir, ec);
  if (ec) throw IoError(dir.string(), "create_directories", ec.value());
  const Metrics& m = fold.metrics;

  auto preds = fold.predictions;
  std::sort(preds.begin(), preds.end(), [](const Prediction& a, const Prediction& b) { return a.id < b.id; });
  for (std::size_t i = 1; i < preds.size(); ++i)
    if (preds[i].id == preds[i - 1].id)
      throw ConfigError("fold " + std::to_string(fold.fold) + ": sample " + std::to_string(preds[i].id) + " predicted twice");
  std::string csv = "sample_id,scene,row,col,true,predicted\n";
  csv.reserve(csv.size() + preds.size() * 32);
  for (const auto& p : preds) {
    csv += std::to_string(p.id) + ',' + std::to_string(p.scene) + ',' + std::to_string(p.row) + ',' +
           std::to_string(p.col) + ',' + std::to_string(p.true_label) + ',' + std::to_string(p.pred_label) + '\n';
  }
  fs::write_text_atomic((dir / "predictions.csv").string(), csv);

  const int c = m.confusion.n_classes();
  std::string cm = "true\\pred";
  for (auto v : m.label_values) cm += ',' + std::to_string(v);
  cm += '\n';
  for (int i = 0; i < c; ++i) {
    cm += std::to_string(m.label_values[static_cast<std::size_t>(i)]);
    for (int j = 0; j < c; ++j) cm += ',' + std::to_string(m.confusion.at(i, j));
    cm += '\n';
  }
  fs::write_text_atomic((dir / "confusion.csv").string(), cm);
  write_confusion_png((dir / "confusion.png").string(), m, fold.fold);
  write_map_png((dir / "map.png").string(), fold, scenes, m.label_values);

  json j;
  j["fold"] = fold.fold;
  j["n_folds"] = run.n_folds;
  j["run"] = to_json(run);
  j["metrics"] = to_json(m);
  j["train"] = fold.extra;
  // metrics.json last: its presence marks a complete fold for `hsipipe report`.
  fs::write_text_atomic((dir / "metrics.json").string(), j.dump(2) + "\n");
}

// ---------------------------------------------------------------------------------------------
// Summary

namespace {

struct FoldFile {
  int fold;
  std::string file;
  RunInfo run;
  Metrics metrics;
};

FoldFile read_fold(const stdfs::path& file, int dir_fold) {
  FoldFile f;
  f.file = file.string();
  json j;
  try {
    j = json::parse(fs::read_text(f.file));
  } catch (const json::parse_error& e) {
    throw FormatError(f.file, "json", e.what());
  }
  if (!j.is_object() || !j.contains("fold") || !j["fold"].is_number_integer())
    throw FormatError(f.file, "fold", "missing or not an integer");
  f.fold = j["fold"].get<int>();
  if (f.fold != dir_fold)
    throw FormatError(f.file, "fold", "says fold " + std::to_string(f.fold) + " but lies in fold-" + std::to_string(dir_fold));
  if (!j.contains("run")) throw FormatError(f.file, "run", "missing");
  f.run = run_info_from_json(j["run"], f.file);
  if (!j.contains("n_folds") || j["n_folds"] != f.run.n_folds)
    throw FormatError(f.file, "n_folds", "missing or different from run.n_folds");
  if (f.fold < 0 || f.fold >= f.run.n_folds)
    throw FormatError(f.file, "fold", std::to_string(f.fold) + " outside 0.." + std::to_string(f.run.n_folds - 1));
  if (!j.contains("metrics")) throw FormatError(f.file, "metrics", "missing");
  f.metrics = metrics_from_json(j["metrics"], f.file);
  return f;
}

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0.0 : s / static_cast<double>(v.size());
}
json sample_std(const std::vector<double>& v) {
  if (v.size() < 2) return nullptr;
  const double m = mean_of(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

}  // namespace

namespace {
/// For every key whose value differs between the folds' run.config: {key: {"fold K": value, ...}}.
json config_differences(const std::map<int, FoldFile>& folds) {
  std::set<std::string> keys;
  for (const auto& [k, f] : folds)
    if (f.run.config.is_object())
      for (const auto& [key, v] : f.run.config.items()) keys.insert(key);
  json diff = json::object();
  for (const auto& key : keys) {
    json values = json::object();
    std::set<std::string> distinct;
    for (const auto& [k, f] : folds) {
      const json v = f.run.config.is_object() && f.run.config.contains(key) ? f.run.config[key] : json(nullptr);
      values["fold " + std::to_string(k)] = v;
      distinct.insert(v.dump());
    }
    if (distinct.size() > 1) diff[key] = values;
  }
  return diff;
}
}  // namespace

json summarize_run(const std::string& run_dir, const std::vector<int>& expect_folds, bool allow_mixed) {
  std::error_code ec;
  if (!stdfs::is_directory(run_dir, ec)) throw IoError(run_dir, "not a directory (RUN_DIR of hsipipe train --out)");
  std::map<int, FoldFile> folds;
  std::map<int, stdfs::path> unfinished;  // requested fold-K/ without metrics.json (failed or still running)
  std::map<int, stdfs::path> others;      // metrics.json of folds not requested (read only for the fold count)
  const auto requested = [&](int k) {
    return expect_folds.empty() || std::find(expect_folds.begin(), expect_folds.end(), k) != expect_folds.end();
  };
  for (const auto& e : stdfs::directory_iterator(run_dir)) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || name.rfind("fold-", 0) != 0) continue;
    const std::string num = name.substr(5);
    if (num.empty() || num.size() > 9 ||
        !std::all_of(num.begin(), num.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
      continue;
    const int k = std::stoi(num);
    const auto file = e.path() / "metrics.json";
    const bool done = stdfs::exists(file);
    if (!requested(k)) {
      if (done) others.emplace(k, file);
    } else if (done) {
      folds.emplace(k, read_fold(file, k));
    } else {
      unfinished.emplace(k, file);
    }
  }
  // Every requested result must come from the same run (same cache, folds file, k and model).
  if (!folds.empty()) {
    const FoldFile& ref = folds.begin()->second;
    for (const auto& [k, f] : folds) {
      auto differ = [&](const char* field, const std::string& a, const std::string& b) {
        if (a != b)
          throw StaleError(f.file + ": field '" + field + "' is '" + b + "' but " + ref.file + " has '" + a +
                           "': folds from different runs cannot be summarised together");
      };
      differ("run.cache_checksum", ref.run.cache_checksum, f.run.cache_checksum);
      differ("run.folds_fingerprint", ref.run.folds_fingerprint, f.run.folds_fingerprint);
      differ("run.n_folds", std::to_string(ref.run.n_folds), std::to_string(f.run.n_folds));
      const auto model = [](const RunInfo& r) {
        return r.config.is_object() && r.config.contains("model") ? r.config["model"].dump() : std::string("null");
      };
      differ("run.config.model", model(ref.run), model(f.run));
      if (f.metrics.label_values != ref.metrics.label_values)
        throw StaleError(f.file + ": field 'metrics.label_values' differs from " + ref.file);
    }
  }
  // The fold count comes from the results themselves (the requested ones agree, checked above), so a
  // requested fold the run cannot have is named as such, not as a fold whose training is missing.
  int n_folds = -1;
  if (!folds.empty())
    n_folds = folds.begin()->second.run.n_folds;
  else if (!others.empty())
    n_folds = read_fold(others.begin()->second, others.begin()->first).run.n_folds;
  else
    throw IoError(run_dir, "no fold-*/metrics.json found (nothing to summarise)");
  for (int k : expect_folds)
    if (k >= n_folds)
      throw ConfigError("--folds: fold " + std::to_string(k) + " is out of range: the run in " + run_dir + " has " +
                        std::to_string(n_folds) + " folds (0-" + std::to_string(n_folds - 1) + ")");
  std::vector<int> want = expect_folds;
  if (want.empty())
    for (int k = 0; k < n_folds; ++k) want.push_back(k);
  for (int k : want)
    if (!folds.count(k)) {
      const auto u = unfinished.find(k);
      if (u != unfinished.end())
        throw IoError(u->second.string(), "missing: fold " + std::to_string(k) +
                                              " has no metrics.json (its training task did not finish; "
                                              "rerun hsipipe train --fold " +
                                              std::to_string(k) + ")");
      throw IoError((stdfs::path(run_dir) / ("fold-" + std::to_string(k)) / "metrics.json").string(),
                    "missing: fold " + std::to_string(k) + " of " + std::to_string(n_folds) +
                        " has no results (run hsipipe train --fold " + std::to_string(k) + ")");
    }

  const FoldFile& ref = folds.begin()->second;
  const json mixed = config_differences(folds);
  if (!mixed.empty() && !allow_mixed) {
    std::string what;
    for (const auto& [key, values] : mixed.items()) what += (what.empty() ? "" : "; ") + key + " " + values.dump();
    throw ConfigError(run_dir + ": its folds were trained with different settings (" + what +
                      "): one summary would describe none of them; train them alike, or report --allow-mixed to "
                      "summarise them anyway with the differences listed");
  }
  json s;
  if (!mixed.empty()) s["config_differences"] = mixed;
  json rows = json::array();
  std::vector<double> oa, aa, kappa;
  ConfusionMatrix pooled(static_cast<int>(ref.metrics.label_values.size()));
  for (const auto& [k, f] : folds) {
    rows.push_back({{"fold", k}, {"oa", f.metrics.oa}, {"aa", f.metrics.aa}, {"kappa", f.metrics.kappa}, {"n", f.metrics.n}});
    oa.push_back(f.metrics.oa);
    aa.push_back(f.metrics.aa);
    kappa.push_back(f.metrics.kappa);
    const int c = pooled.n_classes();
    for (int i = 0; i < c; ++i)
      for (int j = 0; j < c; ++j) pooled.add(i, j, f.metrics.confusion.at(i, j));
  }
  const Metrics pm = compute_metrics(pooled, ClassIndex(ref.metrics.label_values));
  s["folds"] = rows;
  s["mean"] = {{"oa", mean_of(oa)}, {"aa", mean_of(aa)}, {"kappa", mean_of(kappa)}};
  s["std"] = {{"oa", sample_std(oa)}, {"aa", sample_std(aa)}, {"kappa", sample_std(kappa)}};
  s["std_kind"] = "sample standard deviation (n-1); null with one fold";
  s["pooled"] = {{"oa", pm.oa}, {"aa", pm.aa}, {"kappa", pm.kappa}, {"n", pm.n}};
  s["n_folds"] = ref.run.n_folds;
  s["folds_summarised"] = static_cast<int>(folds.size());
  s["label_values"] = ref.metrics.label_values;
  s["run"] = to_json(ref.run);
  fs::write_text_atomic((stdfs::path(run_dir) / "summary.json").string(), s.dump(2) + "\n");
  fs::write_text_atomic((stdfs::path(run_dir) / "summary.md").string(), summary_markdown(s));
  return s;
}

std::string summary_markdown(const json& s) {
  std::ostringstream o;
  const json& run = s.at("run");
  o << "# Run summary\n\n";
  if (run.contains("config") && run["config"].is_object() && run["config"].contains("model"))
    o << "Model: `" << run["config"]["model"].dump() << "`  \n";
  o << "Cache checksum: `" << run.value("cache_checksum", "") << "`  \n";
  o << "Folds fingerprint: `" << run.value("folds_fingerprint", "") << "`  \n";
  o << "Folds: " << s.at("folds_summarised").get<int>() << " of " << s.at("n_folds").get<int>() << "\n\n";
  o << "| fold | n | OA | AA | kappa |\n|---:|---:|---:|---:|---:|\n";
  for (const auto& r : s.at("folds"))
    o << "| " << r.at("fold").get<int>() << " | " << r.at("n").get<std::int64_t>() << " | " << fmt(r.at("oa").get<double>(), 4)
      << " | " << fmt(r.at("aa").get<double>(), 4) << " | " << fmt(r.at("kappa").get<double>(), 4) << " |\n";
  auto pm = [&](const char* k) {
    const json& sd = s.at("std").at(k);
    return fmt(s.at("mean").at(k).get<double>(), 4) + " +- " + (sd.is_null() ? std::string("n/a") : fmt(sd.get<double>(), 4));
  };
  o << "| **mean +- std** | | " << pm("oa") << " | " << pm("aa") << " | " << pm("kappa") << " |\n\n";
  const json& p = s.at("pooled");
  o << "Pooled over all validation samples (n = " << p.at("n").get<std::int64_t>() << "): OA " << fmt(p.at("oa").get<double>(), 4)
    << ", AA " << fmt(p.at("aa").get<double>(), 4) << ", kappa " << fmt(p.at("kappa").get<double>(), 4) << ".\n\n";
  o << "Accuracies are fractions (1 = 100%). OA = overall accuracy, AA = mean per-class accuracy, kappa = Cohen's "
       "kappa. std is the sample standard deviation over folds (divisor n-1).\n\n";
  if (s.contains("config_differences")) {
    o << "**The folds were trained with different settings** (`report --allow-mixed`); the configuration below is "
         "fold " << s.at("folds").at(0).at("fold").get<int>() << "'s. Differences:\n\n";
    for (const auto& [key, values] : s["config_differences"].items()) o << "- `" << key << "`: " << values.dump() << "\n";
    o << "\n";
  }
  o << "Configuration:\n\n```json\n" << run.value("config", json::object()).dump(2) << "\n```\n";
  return o.str();
}

}  // namespace hsipipe::train

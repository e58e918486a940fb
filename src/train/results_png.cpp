// train/results_png: the PNG files of a fold and of predict (libpng's simplified API and a built-in 5x7
// bitmap font, so no font or plotting library is needed): confusion.png, map.png and the class maps.
#include <png.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "train/results.hpp"

namespace hsipipe::train {

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

}  // namespace

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
}  // namespace hsipipe::train

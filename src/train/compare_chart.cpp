// train/compare_chart: `hsipipe compare`'s OUT.png, per-fold OA as one coloured line per run (class_colour's
// palette, so the runs are distinct), the y axis fitted to the values, a legend naming each run and model.
// Written atomically through write_png (results.hpp).
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

#include <nlohmann/json.hpp>

#include "train/results.hpp"

namespace hsipipe::train {
namespace {

struct Plot {
  int w, h;
  std::vector<Rgb> px;
  void set(int x, int y, Rgb c) {
    if (x >= 0 && y >= 0 && x < w && y < h) px[static_cast<std::size_t>(y) * w + x] = c;
  }
  void dot(int x, int y, Rgb c, int r) {
    for (int dy = -r; dy <= r; ++dy)
      for (int dx = -r; dx <= r; ++dx) set(x + dx, y + dy, c);
  }
  void line(int x0, int y0, int x1, int y1, Rgb c) {  // 3 px thick
    const int n = std::max(std::abs(x1 - x0), std::abs(y1 - y0)) + 1;
    for (int i = 0; i <= n; ++i) {
      const double f = static_cast<double>(i) / n;
      dot(static_cast<int>(std::lround(x0 + f * (x1 - x0))), static_cast<int>(std::lround(y0 + f * (y1 - y0))), c, 1);
    }
  }
  void text(int x, int y, const std::string& s, Rgb c) { draw_text(px, w, h, x, y, s, c); }
};

std::string num(double v, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

}  // namespace

void draw_oa_chart(const std::string& path, const nlohmann::json& t) {
  const auto& runs = t["runs"];
  const auto& folds = t["folds"];
  double lo = 1, hi = 0;
  for (const auto& r : runs)
    for (const auto& f : r["folds"]) lo = std::min(lo, f["oa"].get<double>()), hi = std::max(hi, f["oa"].get<double>());
  const double pad = std::max(0.005, (hi - lo) * 0.1);
  lo = std::max(0.0, lo - pad), hi = std::min(1.0, hi + pad);
  if (hi <= lo) hi = lo + 0.01;
  const int left = 60, top = 24, plot_w = std::max(240, 80 * static_cast<int>(folds.size())), plot_h = 240;
  const int legend_h = 12 * static_cast<int>(runs.size()) + 8;
  Plot p{left + plot_w + 20, top + plot_h + 30 + legend_h, {}};
  p.px.assign(static_cast<std::size_t>(p.w) * p.h, Rgb{255, 255, 255});
  const Rgb black{0, 0, 0}, grid{220, 220, 220};
  p.text(4, 6, "PER-FOLD OA", black);
  for (int g = 0; g <= 4; ++g) {
    const int y = top + plot_h - g * plot_h / 4;
    for (int x = left; x < left + plot_w; ++x) p.set(x, y, grid);
    p.text(4, y - 3, num(lo + (hi - lo) * g / 4, 4), black);
  }
  const int nf = static_cast<int>(folds.size());
  auto xof = [&](int i) { return left + (nf == 1 ? plot_w / 2 : 10 + i * (plot_w - 20) / (nf - 1)); };
  auto yof = [&](double v) { return top + plot_h - static_cast<int>(std::lround((v - lo) / (hi - lo) * plot_h)); };
  for (int i = 0; i < nf; ++i) p.text(xof(i) - 9, top + plot_h + 8, "F" + std::to_string(folds[static_cast<std::size_t>(i)].get<int>()), black);
  for (int y = top; y <= top + plot_h; ++y) p.set(left, y, black);
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const Rgb c = class_colour(static_cast<int>(r));
    const auto& fs = runs[r]["folds"];
    for (int i = 0; i < nf; ++i) {
      const int x = xof(i), y = yof(fs[static_cast<std::size_t>(i)]["oa"].get<double>());
      p.dot(x, y, c, 3);
      if (i > 0) p.line(xof(i - 1), yof(fs[static_cast<std::size_t>(i - 1)]["oa"].get<double>()), x, y, c);
    }
    const int ly = top + plot_h + 24 + 12 * static_cast<int>(r);
    for (int dy = 0; dy < 8; ++dy)
      for (int dx = 0; dx < 16; ++dx) p.set(left + dx, ly + dy, c);
    p.text(left + 22, ly, runs[r]["model"].get<std::string>() + "  " + runs[r]["run"].get<std::string>(), black);
  }
  write_png(path, p.w, p.h, p.px);
}

}  // namespace hsipipe::train

#include "io/synth.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <sstream>
#include <utility>

#include "core/error.hpp"

namespace hsipipe::io {

namespace {

// ---- portable randomness: SplitMix64 (sequential draws) and its finaliser as a counter hash ------

constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

inline std::uint64_t mix64(std::uint64_t z) noexcept {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
/// Hash of (key, i): the i-th output of a SplitMix64 stream seeded with `key`.
inline std::uint64_t hash_at(std::uint64_t key, std::uint64_t i) noexcept { return mix64(key + (i + 1) * kGolden); }
inline double u01(std::uint64_t h) noexcept { return static_cast<double>(h >> 11) * 0x1.0p-53; }
/// Approximately standard normal from one hash: Irwin-Hall sum of four 16-bit uniforms.
inline float gauss(std::uint64_t h) noexcept {
  const std::uint32_t s = static_cast<std::uint32_t>(h & 0xffff) + static_cast<std::uint32_t>((h >> 16) & 0xffff) +
                          static_cast<std::uint32_t>((h >> 32) & 0xffff) + static_cast<std::uint32_t>(h >> 48);
  return (static_cast<float>(s) * (1.0f / 65536.0f) - 2.0f) * 1.7320508f;
}

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() noexcept {
    state_ += kGolden;
    return mix64(state_);
  }
  double uniform(double a, double b) noexcept { return a + (b - a) * u01(next()); }
  double normal() noexcept { return static_cast<double>(gauss(next())); }
  std::size_t below(std::size_t n) noexcept { return static_cast<std::size_t>(u01(next()) * static_cast<double>(n)) % n; }

 private:
  std::uint64_t state_;
};

/// Smooth value noise in [-1, 1] with feature size `period` (pixels).
double value_noise(double x, double y, double period, std::uint64_t key) noexcept {
  const double fx = x / period, fy = y / period;
  const double x0 = std::floor(fx), y0 = std::floor(fy);
  const double tx = fx - x0, ty = fy - y0;
  const double sx = tx * tx * (3 - 2 * tx), sy = ty * ty * (3 - 2 * ty);
  auto lattice = [&](double gx, double gy) {
    const auto ix = static_cast<std::uint64_t>(static_cast<std::int64_t>(gx) + (1 << 20));
    const auto iy = static_cast<std::uint64_t>(static_cast<std::int64_t>(gy) + (1 << 20));
    return 2.0 * u01(hash_at(key, (iy << 22) ^ ix)) - 1.0;
  };
  const double a = lattice(x0, y0), b = lattice(x0 + 1, y0), c = lattice(x0, y0 + 1), d = lattice(x0 + 1, y0 + 1);
  return (a * (1 - sx) + b * sx) * (1 - sy) + (c * (1 - sx) + d * sx) * sy;
}

// ---- spectra -------------------------------------------------------------------------------------

inline double gaussian(double x, double mu, double sigma) {
  const double z = (x - mu) / sigma;
  return std::exp(-0.5 * z * z);
}
inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

struct Dip {
  double mu, sigma, depth;
};

enum class Kind { vegetation, soil, asphalt };

/// A material: a smooth continuum times Gaussian absorption dips.
struct Material {
  Kind kind = Kind::vegetation;
  double base = 0, amp = 0, edge = 715, edge_w = 12, swir_drop = 0, slope = 0, green = 0;
  std::array<double, 3> bump_a{}, bump_mu{}, bump_s{};
  std::vector<Dip> dips;

  double eval(double lam) const {
    double c = base;
    switch (kind) {
      case Kind::vegetation:
        c += green * gaussian(lam, 550, 35) + amp * sigmoid((lam - edge) / edge_w) -
             swir_drop * sigmoid((lam - 1330) / 70) + slope * (lam - 1600) / 1000 * sigmoid((lam - 1330) / 70);
        break;
      case Kind::soil:
        c += amp * std::sqrt(std::max(0.0, (lam - 400) / 2100)) + slope * (lam - 1450) / 1000;
        break;
      case Kind::asphalt:
        c += amp * (lam - 400) / 2100;
        break;
    }
    for (int i = 0; i < 3; ++i) c += bump_a[i] * gaussian(lam, bump_mu[i], bump_s[i]);
    for (const Dip& d : dips) c *= 1 - d.depth * gaussian(lam, d.mu, d.sigma);
    return std::clamp(c, 0.005, 0.95);
  }
};

void random_bumps(Material& m, Rng& g, double amp) {
  for (int i = 0; i < 3; ++i) {
    m.bump_a[i] = g.uniform(-amp, amp);
    m.bump_mu[i] = g.uniform(500, 2400);
    m.bump_s[i] = g.uniform(100, 300);
  }
}

Material vegetation(Rng& g) {
  Material m;
  m.kind = Kind::vegetation;
  m.base = g.uniform(0.025, 0.05);
  m.green = g.uniform(0.03, 0.06);
  m.amp = g.uniform(0.28, 0.5);
  m.edge = g.uniform(700, 728);
  m.edge_w = g.uniform(10, 16);
  m.swir_drop = m.amp * g.uniform(0.3, 0.55);
  m.slope = g.uniform(-0.08, 0.02);
  random_bumps(m, g, 0.025);
  m.dips = {{450, 30, g.uniform(0.3, 0.5)},   {670, g.uniform(22, 30), g.uniform(0.55, 0.75)},
            {970, 35, g.uniform(0.04, 0.1)},  {1200, 45, g.uniform(0.08, 0.15)},
            {1450, 70, g.uniform(0.25, 0.45)}, {1940, 90, g.uniform(0.35, 0.55)},
            {2100, 60, g.uniform(0.05, 0.15)}, {2300, 45, g.uniform(0.04, 0.12)}};
  return m;
}

Material soil(Rng& g) {
  Material m;
  m.kind = Kind::soil;
  m.base = g.uniform(0.06, 0.12);
  m.amp = g.uniform(0.15, 0.3);
  m.slope = g.uniform(-0.05, 0.0);
  random_bumps(m, g, 0.02);
  m.dips = {{480, 60, g.uniform(0.1, 0.2)},     {870, 90, g.uniform(0.05, 0.12)},
            {1415, 40, g.uniform(0.05, 0.15)},  {1915, 50, g.uniform(0.1, 0.2)},
            {2205, 25, g.uniform(0.08, 0.2)},   {2340, 30, g.uniform(0.0, 0.1)}};
  return m;
}

Material asphalt(Rng& g) {
  Material m;
  m.kind = Kind::asphalt;
  m.base = g.uniform(0.06, 0.09);
  m.amp = g.uniform(0.04, 0.07);
  random_bumps(m, g, 0.005);
  m.dips = {{1730, 30, g.uniform(0.02, 0.05)}, {2310, 40, g.uniform(0.03, 0.07)}};
  return m;
}

/// A nearby material: `s` scales how far (1 = a sibling class, 0.5 = a within-class variant).
Material perturb(const Material& in, double s, Rng& g) {
  Material m = in;
  m.base *= 1 + s * 0.08 * g.normal();
  m.green *= 1 + s * 0.1 * g.normal();
  m.amp *= 1 + s * 0.07 * g.normal();
  m.edge += s * 4 * g.normal();
  m.swir_drop *= 1 + s * 0.08 * g.normal();
  m.slope += s * 0.01 * g.normal();
  for (int i = 0; i < 3; ++i) m.bump_a[i] += s * 0.006 * g.normal();
  for (Dip& d : m.dips) d.depth = std::clamp(d.depth * (1 + s * 0.12 * g.normal()), 0.0, 0.95);
  return m;
}

const char* const kCropNames[] = {"corn", "soybean", "wheat", "alfalfa", "oats", "hay", "sorghum", "barley",
                                  "rye", "canola", "potato", "grapes", "lettuce", "celery", "beans", "pasture"};
const char* const kSoilNames[] = {"fallow", "stubble", "tilled", "bare"};

}  // namespace

// ---- the scene -----------------------------------------------------------------------------------

struct SynthScene::Impl {
  SynthOptions opt;
  BandInfo info;
  std::vector<float> noise_sigma;  ///< per band, reflectance units
  /// materials[kind][variant][band]: transmittance-weighted reflectance. Kinds: 0..K-1 classes 1..K,
  /// K bare soil, K+1 grass, K+2 asphalt.
  std::vector<std::array<std::vector<float>, 2>> materials;
  std::vector<std::string> class_names;
  // parcels
  double cell = 16;
  std::size_t grid_rows = 0, grid_cols = 0;  ///< including a margin ring of cells
  struct Parcel {
    double y, x;
    int kind;
    float t, bright;
  };
  std::vector<Parcel> parcels;
  // per pixel: own parcel, neighbour parcel, own fraction, road fraction
  struct Pixel {
    std::int32_t p1, p2;
    float alpha, road;
  };
  std::vector<Pixel> pixels;
  std::vector<std::int32_t> labels;
  std::uint64_t key_noise = 0, key_t = 0, key_b = 0, key_s = 0;

  void build_spectra(Rng& g);
  void build_layout(Rng& g);
  void place_parcels(Rng& g);
  // The two parcels nearest the warped point (wy, wx): ids p1 (nearest) and p2, squared distances d1, d2.
  void nearest_parcels(double wy, double wx, std::int32_t& p1, std::int32_t& p2, double& d1, double& d2) const;
  float road_weight(double y, double x) const;
  void keep_survey_plots(std::vector<std::pair<double, std::size_t>>& seed_dist);
  void pixel_weights(std::size_t r, std::size_t c, std::array<std::pair<const float*, float>, 8>& w, int& n) const;
};

void SynthScene::Impl::build_spectra(Rng& g) {
  const std::size_t B = opt.bands;
  auto& wl = info.wavelengths;
  wl.resize(B);
  info.fwhm.resize(B);
  const double step = B > 1 ? 2100.0 / static_cast<double>(B - 1) : 10.0;
  for (std::size_t b = 0; b < B; ++b) {
    wl[b] = std::round((400.0 + step * static_cast<double>(b)) * 1000.0) / 1000.0;
    info.fwhm[b] = std::round(step * 1.1 * 1000.0) / 1000.0;
  }
  info.wavelength_units = "Nanometers";
  info.scale_factor = opt.dtype == DType::f32 ? 1.0 : 10000.0;
  // Atmospheric transmittance: O2 A band and water vapour.
  const Dip atmosphere[] = {{760, 6, 0.5}, {940, 25, 0.25}, {1140, 30, 0.3}, {1390, 40, 0.96}, {1880, 50, 0.97}};
  std::vector<double> T(B);
  info.bbl.assign(B, 1);
  noise_sigma.resize(B);
  for (std::size_t b = 0; b < B; ++b) {
    double t = 1;
    for (const Dip& d : atmosphere) t *= 1 - d.depth * gaussian(wl[b], d.mu, d.sigma);
    T[b] = t;
    if (t < 0.25) info.bbl[b] = 0;
    noise_sigma[b] = static_cast<float>(0.008 + 0.006 * std::max(0.0, (wl[b] - 1000) / 1500) + 0.02 * (1 - t));
  }
  if (B >= 10) info.bbl.front() = info.bbl.back() = 0;

  const int K = opt.classes;
  std::vector<Material> bases;
  for (int k = 0; k < K; ++k) {
    const int pair = k / 2;
    const bool soil_pair = pair % 4 == 3;
    if (k % 2 == 1) {
      bases.push_back(perturb(bases.back(), 0.6, g));
    } else {
      bases.push_back(soil_pair ? soil(g) : vegetation(g));
    }
    const char* stem = soil_pair ? kSoilNames[(pair / 4) % 4] : kCropNames[(pair - pair / 4) % 16];
    class_names.push_back(std::string(stem) + (k % 2 ? "-late" : "-early") +
                          (pair >= 16 ? "-" + std::to_string(pair / 16) : std::string()));
  }
  bases.push_back(soil(g));
  bases.push_back(vegetation(g));
  bases.push_back(asphalt(g));
  materials.resize(bases.size());
  for (std::size_t m = 0; m < bases.size(); ++m) {
    for (int v = 0; v < 2; ++v) {
      const Material var = perturb(bases[m], 0.5, g);
      auto& spec = materials[m][static_cast<std::size_t>(v)];
      spec.resize(B);
      for (std::size_t b = 0; b < B; ++b) spec[b] = static_cast<float>(T[b] * var.eval(wl[b]));
    }
  }
}

// The parcel grid (one margin cell on each side): seed points, kinds (classes, bare soil, grass), and at
// least one parcel of every class inside the image when there are enough parcels.
void SynthScene::Impl::place_parcels(Rng& g) {
  const std::size_t R = opt.rows, C = opt.cols;
  const int K = opt.classes;
  cell = std::clamp(std::round(std::sqrt(static_cast<double>(R * C) / 55.0)), 10.0, 48.0);
  const auto ncell_r = static_cast<std::size_t>(std::ceil(static_cast<double>(R) / cell));
  const auto ncell_c = static_cast<std::size_t>(std::ceil(static_cast<double>(C) / cell));
  grid_rows = ncell_r + 2;  // one margin cell on each side
  grid_cols = ncell_c + 2;
  parcels.resize(grid_rows * grid_cols);
  // Class weights: mildly imbalanced, like real ground truth.
  std::vector<double> cum;
  double total = 0;
  for (int k = 0; k < K; ++k) cum.push_back(total += 1.0 / (1.0 + 0.25 * k));
  for (std::size_t i = 0; i < grid_rows; ++i) {
    for (std::size_t j = 0; j < grid_cols; ++j) {
      Parcel& p = parcels[i * grid_cols + j];
      p.y = (static_cast<double>(i) - 1 + g.uniform(0.15, 0.85)) * cell;
      p.x = (static_cast<double>(j) - 1 + g.uniform(0.15, 0.85)) * cell;
      const double u = g.uniform(0, 1);
      if (u < 0.12) {
        p.kind = K;  // bare soil
      } else if (u < 0.2) {
        p.kind = K + 1;  // grass
      } else {
        const double v = g.uniform(0, total);
        p.kind = static_cast<int>(std::upper_bound(cum.begin(), cum.end(), v) - cum.begin());
        p.kind = std::min(p.kind, K - 1);
      }
      p.t = static_cast<float>(g.uniform(0, 1));
      p.bright = static_cast<float>(g.uniform(0.88, 1.12));
    }
  }
  // Every class gets at least one parcel inside the image when there are enough parcels.
  std::vector<std::size_t> inner;
  for (std::size_t i = 1; i + 1 < grid_rows; ++i)
    for (std::size_t j = 1; j + 1 < grid_cols; ++j) inner.push_back(i * grid_cols + j);
  for (std::size_t i = inner.size(); i > 1; --i) std::swap(inner[i - 1], inner[g.below(i)]);
  if (inner.size() >= static_cast<std::size_t>(K) + 2)
    for (int k = 0; k < K; ++k) parcels[inner[static_cast<std::size_t>(k)]].kind = k;

}

void SynthScene::Impl::nearest_parcels(double wy, double wx, std::int32_t& p1, std::int32_t& p2, double& d1,
                                       double& d2) const {
  const auto ci = static_cast<long>(std::floor(wy / cell)) + 1, cj = static_cast<long>(std::floor(wx / cell)) + 1;
  d1 = 1e300, d2 = 1e300;
  p1 = 0, p2 = 0;
  for (long di = -2; di <= 2; ++di) {
    for (long dj = -2; dj <= 2; ++dj) {
      const long ii = ci + di, jj = cj + dj;
      if (ii < 0 || jj < 0 || ii >= static_cast<long>(grid_rows) || jj >= static_cast<long>(grid_cols)) continue;
      const auto id = static_cast<std::int32_t>(static_cast<std::size_t>(ii) * grid_cols + static_cast<std::size_t>(jj));
      const Parcel& p = parcels[static_cast<std::size_t>(id)];
      const double d = (p.y - wy) * (p.y - wy) + (p.x - wx) * (p.x - wx);
      if (d < d1) {
        d2 = d1, p2 = p1;
        d1 = d, p1 = id;
      } else if (d < d2) {
        d2 = d, p2 = id;
      }
    }
  }
}

// Roads: every 4th grid row and every 5th grid column, gently wavy, 2.4 px wide; 1 on a road, fading to 0.
float SynthScene::Impl::road_weight(double y, double x) const {
  double road_d = 1e9;
  for (std::size_t i = 1; i < grid_rows; i += 4) {
    const double centre = static_cast<double>(i) * cell + 1.2 * std::sin(x / 23.0 + static_cast<double>(i));
    road_d = std::min(road_d, std::fabs(y - centre) - 1.2);
  }
  for (std::size_t j = 2; j < grid_cols; j += 5) {
    const double centre = static_cast<double>(j) * cell + 1.2 * std::sin(y / 29.0 + static_cast<double>(j));
    road_d = std::min(road_d, std::fabs(x - centre) - 1.2);
  }
  return road_d <= 0 ? 1.0f : road_d < 1 ? static_cast<float>(1 - road_d) : 0.0f;
}

// Survey plots of a sparse ground truth: keep the n labeled pixels nearest their parcel's seed point (ties
// by pixel index), i.e. a disc of one common radius inside every labeled parcel.
void SynthScene::Impl::keep_survey_plots(std::vector<std::pair<double, std::size_t>>& seed_dist) {
  const auto n = static_cast<std::size_t>(
      std::max(1.0, std::round(opt.labeled_fraction * static_cast<double>(opt.rows) * static_cast<double>(opt.cols))));
  if (n < seed_dist.size()) {
    std::nth_element(seed_dist.begin(), seed_dist.begin() + static_cast<std::ptrdiff_t>(n), seed_dist.end());
    for (auto it = seed_dist.begin() + static_cast<std::ptrdiff_t>(n); it != seed_dist.end(); ++it) labels[it->second] = 0;
  }
}

void SynthScene::Impl::build_layout(Rng& g) {
  const std::size_t R = opt.rows, C = opt.cols;
  const int K = opt.classes;
  place_parcels(g);
  const std::uint64_t key_wx = g.next(), key_wy = g.next();
  const double warp_amp = cell * 0.18, warp_period = cell * 0.6;
  pixels.resize(R * C);
  labels.assign(R * C, 0);
  // Squared distance (warped coordinates) of each labeled pixel to its parcel's seed point, for the survey
  // plots of a sparse ground truth.
  std::vector<std::pair<double, std::size_t>> seed_dist;
  const bool sparse = opt.labeled_fraction < 1.0;
  const double mix_half = 1.5;  // px on each side of a border
  for (std::size_t r = 0; r < R; ++r) {
    for (std::size_t c = 0; c < C; ++c) {
      const double y = static_cast<double>(r) + 0.5, x = static_cast<double>(c) + 0.5;
      const double wy = y + warp_amp * value_noise(x, y, warp_period, key_wy);
      const double wx = x + warp_amp * value_noise(x, y, warp_period, key_wx);
      double d1 = 0, d2 = 0;
      std::int32_t p1 = 0, p2 = 0;
      nearest_parcels(wy, wx, p1, p2, d1, d2);
      const Parcel &a = parcels[static_cast<std::size_t>(p1)], &b = parcels[static_cast<std::size_t>(p2)];
      const double sep = std::sqrt((a.y - b.y) * (a.y - b.y) + (a.x - b.x) * (a.x - b.x));
      const double border = sep > 0 ? (d2 - d1) / (2 * sep) : 1e9;  // distance to the bisector
      float alpha = 1.0f;
      if (a.kind != b.kind && border < mix_half) alpha = static_cast<float>(0.5 + 0.5 * border / mix_half);
      const float road = road_weight(y, x);
      pixels[r * C + c] = {p1, p2, alpha, road};
      if (a.kind < K && alpha >= 0.8f && road < 0.2f) {
        labels[r * C + c] = a.kind + 1;
        if (sparse) seed_dist.emplace_back(d1, r * C + c);
      }
    }
  }
  if (sparse) keep_survey_plots(seed_dist);
}

void SynthScene::Impl::pixel_weights(std::size_t r, std::size_t c, std::array<std::pair<const float*, float>, 8>& w,
                                     int& n) const {
  const Pixel& px = pixels[r * opt.cols + c];
  const double y = static_cast<double>(r), x = static_cast<double>(c);
  const float tv = static_cast<float>(0.3 * value_noise(x, y, 7.0, key_t));
  const float bv = static_cast<float>(1.0 + 0.04 * value_noise(x, y, 11.0, key_b));
  n = 0;
  auto add = [&](const Parcel& p, float frac) {
    if (frac <= 0) return;
    const float t = std::clamp(p.t + tv, 0.0f, 1.0f), s = frac * p.bright * bv;
    const auto& m = materials[static_cast<std::size_t>(p.kind)];
    w[static_cast<std::size_t>(n++)] = {m[0].data(), s * (1 - t)};
    w[static_cast<std::size_t>(n++)] = {m[1].data(), s * t};
  };
  // Sub-pixel soil exposure between crop rows: 0-15 %, varying smoothly.
  const float exposed = static_cast<float>(0.075 * (1.0 + value_noise(x, y, 5.0, key_s)));
  const float keep = (1.0f - px.road) * (1.0f - exposed);
  add(parcels[static_cast<std::size_t>(px.p1)], keep * px.alpha);
  add(parcels[static_cast<std::size_t>(px.p2)], keep * (1 - px.alpha));
  {
    const auto& m = materials[static_cast<std::size_t>(opt.classes)];
    const float f = (1.0f - px.road) * exposed * bv;
    w[static_cast<std::size_t>(n++)] = {m[0].data(), 0.5f * f};
    w[static_cast<std::size_t>(n++)] = {m[1].data(), 0.5f * f};
  }
  if (px.road > 0) {
    const auto& m = materials[static_cast<std::size_t>(opt.classes + 2)];
    w[static_cast<std::size_t>(n++)] = {m[0].data(), px.road * 0.5f * bv};
    w[static_cast<std::size_t>(n++)] = {m[1].data(), px.road * 0.5f * bv};
  }
}

SynthScene::SynthScene(const SynthOptions& opt) : impl_(std::make_unique<Impl>()) {
  if (opt.rows < 1 || opt.cols < 1 || opt.bands < 1) throw ConfigError("synth: --rows, --cols and --bands must be at least 1");
  if (opt.rows > 100000 || opt.cols > 100000 || opt.bands > 10000 || opt.rows * opt.cols > (std::size_t{1} << 28)) {
    throw ConfigError("synth: scene too large (rows, cols <= 100000, rows * cols <= 2^28, bands <= 10000)");
  }
  if (opt.classes < 1 || opt.classes > 1000) throw ConfigError("synth: --classes must be in 1..1000");
  if (opt.dtype != DType::i16 && opt.dtype != DType::u16 && opt.dtype != DType::f32) {
    throw ConfigError("synth: --dtype must be int16, uint16 or float32");
  }
  if (opt.byte_order != 0 && opt.byte_order != 1) throw ConfigError("synth: --byte-order must be 0 or 1");
  if (!(opt.labeled_fraction > 0.0 && opt.labeled_fraction <= 1.0)) {
    std::ostringstream os;
    os << "synth: --labeled-fraction must be in (0, 1], got " << opt.labeled_fraction;
    throw ConfigError(os.str());
  }
  impl_->opt = opt;
  Rng g(mix64(opt.seed ^ 0x5eed5eed5eedULL));
  impl_->key_noise = g.next();
  impl_->key_t = g.next();
  impl_->key_b = g.next();
  impl_->key_s = g.next();
  impl_->build_spectra(g);
  impl_->build_layout(g);
}

SynthScene::~SynthScene() = default;

const SynthOptions& SynthScene::options() const { return impl_->opt; }
const BandInfo& SynthScene::band_info() const { return impl_->info; }
const std::vector<std::int32_t>& SynthScene::labels() const { return impl_->labels; }
const std::vector<std::string>& SynthScene::class_names() const { return impl_->class_names; }

void SynthScene::reflectance(std::size_t r0, std::size_t r1, float* out) const {
  const Impl& s = *impl_;
  const std::size_t C = s.opt.cols, B = s.opt.bands;
  std::array<std::pair<const float*, float>, 8> w{};
  for (std::size_t r = r0; r < r1; ++r) {
    for (std::size_t c = 0; c < C; ++c) {
      int n = 0;
      s.pixel_weights(r, c, w, n);
      float* o = out + ((r - r0) * C + c) * B;
      const std::uint64_t base = (static_cast<std::uint64_t>(r) * C + c) * B;
      for (std::size_t b = 0; b < B; ++b) o[b] = s.noise_sigma[b] * gauss(hash_at(s.key_noise, base + b));
      for (int i = 0; i < n; ++i) {
        const float* m = w[static_cast<std::size_t>(i)].first;
        const float f = w[static_cast<std::size_t>(i)].second;
        for (std::size_t b = 0; b < B; ++b) o[b] += f * m[b];
      }
    }
  }
}

SynthFiles write_synthetic_scene(const std::string& dir, const SynthOptions& opt) {
  SynthScene scene(opt);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw IoError(dir, "create directory: " + ec.message());
  SynthFiles files;
  files.scene_header = (std::filesystem::path(dir) / "scene.hdr").string();
  files.scene_data = (std::filesystem::path(dir) / "scene.img").string();
  files.labels_header = (std::filesystem::path(dir) / "labels.hdr").string();
  files.labels_data = (std::filesystem::path(dir) / "labels.img").string();

  EnviHeader h;
  h.samples = opt.cols;
  h.lines = opt.rows;
  h.bands = opt.bands;
  h.dtype = opt.dtype;
  h.interleave = opt.interleave;
  h.byte_order = opt.byte_order;
  h.band_info = scene.band_info();
  std::ostringstream fraction;
  fraction << opt.labeled_fraction;
  const std::string desc = "{hsipipe synthetic field scene: seed " + std::to_string(opt.seed) + ", " +
                           std::to_string(opt.classes) + " classes}";
  EnviWriter data(files.scene_header, files.scene_data, h, {{"description", desc}, {"sensor type", "hsipipe synth"}});

  EnviHeader lh;
  lh.samples = opt.cols;
  lh.lines = opt.rows;
  lh.bands = 1;
  lh.dtype = opt.classes > 254 ? DType::i16 : DType::u8;
  lh.interleave = Interleave::bsq;
  lh.byte_order = opt.byte_order;
  std::string names = "{unlabeled";
  for (const auto& n : scene.class_names()) names += ", " + n;
  names += "}";
  EnviWriter lab(files.labels_header, files.labels_data, lh,
                 {{"description", opt.labeled_fraction < 1.0
                                      ? "{hsipipe synthetic field scene labels: 0 = unlabeled; survey plots covering " +
                                            fraction.str() + " of the scene}"
                                      : "{hsipipe synthetic field scene labels: 0 = unlabeled}"},
                  {"classes", std::to_string(opt.classes + 1)},
                  {"class names", names}});

  const std::size_t C = opt.cols, B = opt.bands;
  const std::size_t block = std::max<std::size_t>(1, (4u << 20) / (C * B * sizeof(float)));
  std::vector<float> buf(std::min(block, opt.rows) * C * B);
  const float scale = static_cast<float>(scene.band_info().scale_factor);
  for (std::size_t r0 = 0; r0 < opt.rows; r0 += block) {
    const std::size_t r1 = std::min(opt.rows, r0 + block);
    scene.reflectance(r0, r1, buf.data());
    if (scale != 1.0f)
      for (std::size_t i = 0; i < (r1 - r0) * C * B; ++i) buf[i] *= scale;
    data.write_rows(r0, r1, buf.data());
  }
  const auto& labels = scene.labels();
  std::vector<float> lf(labels.begin(), labels.end());
  lab.write_rows(0, opt.rows, lf.data());
  files.class_counts.assign(static_cast<std::size_t>(opt.classes) + 1, 0);
  for (std::int32_t l : labels) ++files.class_counts[static_cast<std::size_t>(l)];
  data.commit();
  try {
    lab.commit();
  } catch (...) {
    std::filesystem::remove(files.scene_header, ec);
    std::filesystem::remove(files.scene_data, ec);
    throw;
  }
  return files;
}

}  // namespace hsipipe::io

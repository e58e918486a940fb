#include "cache/preprocess.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "core/half.hpp"
#include "core/error.hpp"

namespace hsipipe::cache {

std::string normalize_name(Normalize n) {
  switch (n) {
    case Normalize::zscore: return "zscore";
    case Normalize::minmax: return "minmax";
    case Normalize::none: return "none";
  }
  return "?";
}
Normalize normalize_from_name(const std::string& s) {
  if (s == "zscore") return Normalize::zscore;
  if (s == "minmax") return Normalize::minmax;
  if (s == "none") return Normalize::none;
  throw ConfigError("--normalize: unknown value '" + s + "' (expected zscore, minmax or none)");
}
std::string stats_over_name(StatsOver s) { return s == StatsOver::labeled ? "labeled" : "all-pixels"; }
StatsOver stats_over_from_name(const std::string& s) {
  if (s == "labeled" || s == "samples") return StatsOver::labeled;
  if (s == "all-pixels" || s == "all_pixels") return StatsOver::all_pixels;
  throw ConfigError("--stats-over: unknown value '" + s + "' (expected labeled or all-pixels)");
}
std::string border_name(Border b) { return b == Border::reflect ? "reflect" : "zero"; }
Border border_from_name(const std::string& s) {
  if (s == "reflect") return Border::reflect;
  if (s == "zero") return Border::zero;
  throw ConfigError("--border: unknown value '" + s + "' (expected reflect or zero)");
}

namespace {
/// "A-B", or "A" when the range is one band
std::string range_text(long a, long b) { return a == b ? std::to_string(a) : std::to_string(a) + "-" + std::to_string(b); }

/// The ranges of a --drop-bands list as written, 1-based and inclusive, in order; syntax errors and
/// reversed ranges throw ConfigError naming --drop-bands (the bands' range is the caller's check)
std::vector<std::pair<long, long>> parse_band_ranges(const std::string& text) {
  std::vector<std::pair<long, long>> out;
  std::string item;
  auto parse_int = [&](const std::string& s) -> long {
    if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos)
      throw ConfigError("--drop-bands: '" + item + "' is not a band number or range A-B (1-based)");
    return std::stol(s);
  };
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = text.find(',', pos);
    item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    pos = comma == std::string::npos ? text.size() + 1 : comma + 1;
    if (item.empty()) {
      if (text.find_first_not_of(" \t") == std::string::npos) continue;  // no list at all: nothing dropped
      throw ConfigError("--drop-bands: an empty entry in '" + text + "' (a doubled or trailing comma?)");
    }
    const auto dash = item.find('-');
    long a, b;
    if (dash == std::string::npos) {
      a = b = parse_int(item);
    } else {
      a = parse_int(item.substr(0, dash));
      b = parse_int(item.substr(dash + 1));
    }
    if (a > b) throw ConfigError("--drop-bands: range '" + item + "' is reversed");
    if (a < 1) throw ConfigError("--drop-bands: band 0 (in '" + item + "') is out of range: bands are 1-based");
    out.emplace_back(a, b);
  }
  return out;
}
}  // namespace

std::vector<int> parse_band_list(const std::string& text, int nbands) {
  std::vector<int> out;
  for (const auto& [a, b] : parse_band_ranges(text)) {
    if (b > nbands)
      throw ConfigError("--drop-bands: band " + std::to_string(b) + " (in '" + range_text(a, b) +
                        "') is out of range: the scenes have bands 1.." + std::to_string(nbands));
    for (long x = a; x <= b; ++x) out.push_back(static_cast<int>(x - 1));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string canonical_band_list(const std::string& text) {
  auto r = parse_band_ranges(text);
  std::sort(r.begin(), r.end());
  std::string out;
  for (std::size_t i = 0; i < r.size();) {
    auto [a, b] = r[i];
    for (++i; i < r.size() && r[i].first <= b + 1; ++i) b = std::max(b, r[i].second);  // overlapping or adjacent
    if (!out.empty()) out += ',';
    out += range_text(a, b);
  }
  return out;
}

std::vector<int> kept_bands(const std::vector<int>& drop, int nbands) {
  std::vector<int> kept;
  for (int b = 0; b < nbands; ++b)
    if (!std::binary_search(drop.begin(), drop.end(), b)) kept.push_back(b);
  if (kept.empty()) throw ConfigError("--drop-bands: every one of the " + std::to_string(nbands) + " bands is dropped");
  return kept;
}

std::vector<std::uint8_t> band_flags(const std::vector<int>& kept, std::size_t nbands) {
  std::vector<std::uint8_t> f(nbands, 0);
  for (int b : kept)
    if (b >= 0 && static_cast<std::size_t>(b) < nbands) f[static_cast<std::size_t>(b)] = 1;
  return f;
}

// ------------------------------------------------------------------------------------------------
BandStats::BandStats(int bands)
    : mean(static_cast<std::size_t>(bands), 0.0),
      m2(static_cast<std::size_t>(bands), 0.0),
      min(static_cast<std::size_t>(bands), std::numeric_limits<double>::infinity()),
      max(static_cast<std::size_t>(bands), -std::numeric_limits<double>::infinity()) {}

namespace {

// Hot per-pixel loops, compiled twice (AVX2 and the baseline ISA) and picked at load time by the dynamic
// linker (GCC target_clones). Element-wise double arithmetic without FMA: both clones give the same bits,
// so caches do not depend on the CPU they were built on.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HSIPIPE_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define HSIPIPE_CLONES
#endif

HSIPIPE_CLONES void welford_add(std::size_t B, const float* __restrict v, double inv, double* __restrict mean,
                                double* __restrict m2, double* __restrict mn, double* __restrict mx) {
  for (std::size_t b = 0; b < B; ++b) {
    const double x = v[b];
    const double d = x - mean[b];
    const double m = mean[b] + d * inv;
    mean[b] = m;
    m2[b] += d * (x - m);
    mn[b] = x < mn[b] ? x : mn[b];
    mx[b] = x > mx[b] ? x : mx[b];
  }
}

HSIPIPE_CLONES void affine(std::size_t B, const float* __restrict in, const double* __restrict shift,
                           const double* __restrict scale, float* __restrict out) {
  for (std::size_t b = 0; b < B; ++b) out[b] = static_cast<float>((static_cast<double>(in[b]) - shift[b]) / scale[b]);
}

}  // namespace

void BandStats::add(const float* v) {
  ++n;
  welford_add(mean.size(), v, 1.0 / static_cast<double>(n), mean.data(), m2.data(), min.data(), max.data());
}

void BandStats::merge(const BandStats& o) {
  if (o.n == 0) return;
  if (n == 0) {
    *this = o;
    return;
  }
  const double na = static_cast<double>(n), nb = static_cast<double>(o.n), nt = na + nb;
  for (std::size_t b = 0; b < mean.size(); ++b) {
    const double d = o.mean[b] - mean[b];
    mean[b] += d * (nb / nt);
    m2[b] += o.m2[b] + d * d * (na * nb / nt);
    min[b] = std::min(min[b], o.min[b]);
    max[b] = std::max(max[b], o.max[b]);
  }
  n += o.n;
}

std::vector<double> BandStats::variance() const {
  std::vector<double> v(mean.size(), 0.0);
  if (n == 0) return v;
  for (std::size_t b = 0; b < v.size(); ++b) v[b] = m2[b] / static_cast<double>(n);
  return v;
}

void BandStats::pack(std::vector<double>& out) const {
  out.push_back(static_cast<double>(n));
  out.insert(out.end(), mean.begin(), mean.end());
  out.insert(out.end(), m2.begin(), m2.end());
  out.insert(out.end(), min.begin(), min.end());
  out.insert(out.end(), max.begin(), max.end());
}

BandStats BandStats::unpack(const double* in, int bands) {
  BandStats s(bands);
  const auto B = static_cast<std::size_t>(bands);
  s.n = static_cast<std::uint64_t>(in[0]);
  std::copy(in + 1, in + 1 + B, s.mean.begin());
  std::copy(in + 1 + B, in + 1 + 2 * B, s.m2.begin());
  std::copy(in + 1 + 2 * B, in + 1 + 3 * B, s.min.begin());
  std::copy(in + 1 + 3 * B, in + 1 + 4 * B, s.max.begin());
  return s;
}

// ------------------------------------------------------------------------------------------------
FixedSym::FixedSym(int b) : b_(b), v_(static_cast<std::size_t>(b) * static_cast<std::size_t>(b + 1) / 2, 0) {}

void FixedSym::add(const double* m) {
  std::size_t k = 0;
  for (int i = 0; i < b_; ++i)
    for (int j = i; j < b_; ++j, ++k) {
      const double scaled = std::nearbyint(std::ldexp(m[static_cast<std::size_t>(i) * static_cast<std::size_t>(b_) + static_cast<std::size_t>(j)], 40));
      if (!std::isfinite(scaled) || std::fabs(scaled) > 0x1p120)
        throw Error("PCA: covariance entry out of range (NaN or huge values in the normalised data)");
      if (__builtin_add_overflow(v_[k], static_cast<i128>(scaled), &v_[k]))  // the sum, exact until 2^127
        throw Error("PCA: covariance sum out of range (huge values in the normalised data)");
    }
}

void FixedSym::add(const FixedSym& o) {
  for (std::size_t k = 0; k < v_.size(); ++k)
    if (__builtin_add_overflow(v_[k], o.v_[k], &v_[k]))
      throw Error("PCA: covariance sum out of range (huge values in the normalised data)");
}

std::vector<std::uint64_t> FixedSym::pack() const {
  std::vector<std::uint64_t> out(2 * v_.size());
  for (std::size_t k = 0; k < v_.size(); ++k) {
    const auto u = static_cast<u128>(v_[k]);
    out[2 * k] = static_cast<std::uint64_t>(u);
    out[2 * k + 1] = static_cast<std::uint64_t>(u >> 64);
  }
  return out;
}

FixedSym FixedSym::unpack(const std::uint64_t* in, int b) {
  FixedSym f(b);
  for (std::size_t k = 0; k < f.v_.size(); ++k) {
    const u128 u = (static_cast<u128>(in[2 * k + 1]) << 64) | in[2 * k];
    f.v_[k] = static_cast<i128>(u);
  }
  return f;
}

std::vector<double> FixedSym::to_double(double divide_by) const {
  const auto B = static_cast<std::size_t>(b_);
  std::vector<double> out(B * B);
  std::size_t k = 0;
  for (std::size_t i = 0; i < B; ++i)
    for (std::size_t j = i; j < B; ++j, ++k) {
      const double v = std::ldexp(static_cast<double>(v_[k]), -40) / divide_by;
      out[i * B + j] = out[j * B + i] = v;
    }
  return out;
}

// ------------------------------------------------------------------------------------------------
void Preprocessor::apply(const float* in, float* out) const {
  const std::size_t B = kept.size();
  // An invalid pixel (nodata, NaN or +-Inf: NaN in every band, io::Scene::read_rows) is never a sample,
  // but a patch or the cube may hold one: stored as 0, the band mean after z-score (as a zero border).
  if (B > 0 && std::isnan(in[0])) {
    std::fill(out, out + out_bands(), 0.0f);
    return;
  }
  if (pca_k <= 0) {
    affine(B, in, shift.data(), scale.data(), out);
    return;
  }
  double z[4096];
  std::vector<double> big;
  double* zp = z;
  if (B > 4096) {
    big.resize(B);
    zp = big.data();
  }
  for (std::size_t b = 0; b < B; ++b) zp[b] = (static_cast<double>(in[b]) - shift[b]) / scale[b] - pca_mean[b];
  for (int k = 0; k < pca_k; ++k) {
    const double* w = components.data() + static_cast<std::size_t>(k) * B;
    double acc = 0.0;
    for (std::size_t b = 0; b < B; ++b) acc += w[b] * zp[b];
    out[k] = static_cast<float>(acc);
  }
}

void select_bands(const float* in, std::size_t n, int src_bands, const std::vector<int>& kept, float* out) {
  const std::size_t K = kept.size(), S = static_cast<std::size_t>(src_bands);
  if (K == S) {
    std::memcpy(out, in, n * S * sizeof(float));
    return;
  }
  for (std::size_t i = 0; i < n; ++i) {
    const float* p = in + i * S;
    float* q = out + i * K;
    for (std::size_t k = 0; k < K; ++k) q[k] = p[kept[k]];
  }
}

void cut_patch(const RowWindow& w, std::size_t row, std::size_t col, int p, Border border, float* out) {
  const long h = p / 2, H = static_cast<long>(w.scene_rows), W = static_cast<long>(w.cols);
  const std::size_t pp = static_cast<std::size_t>(p) * static_cast<std::size_t>(p);
  const auto B = static_cast<std::size_t>(w.bands);
  auto reflect = [](long i, long n) {
    if (i < 0) return -i;
    if (i >= n) return 2 * (n - 1) - i;
    return i;
  };
  for (long dy = 0; dy < p; ++dy) {
    long r = static_cast<long>(row) + dy - h;
    const bool rin = r >= 0 && r < H;
    if (!rin && border == Border::reflect) r = reflect(r, H);
    for (long dx = 0; dx < p; ++dx) {
      long c = static_cast<long>(col) + dx - h;
      const bool cin = c >= 0 && c < W;
      if (!cin && border == Border::reflect) c = reflect(c, W);
      const std::size_t o = static_cast<std::size_t>(dy * p + dx);
      if ((!rin || !cin) && border == Border::zero) {
        for (std::size_t b = 0; b < B; ++b) out[b * pp + o] = 0.0f;
        continue;
      }
      const float* px = w.pixel(static_cast<std::size_t>(r), static_cast<std::size_t>(c));
      for (std::size_t b = 0; b < B; ++b) out[b * pp + o] = px[b];
    }
  }
}

void store_values(const float* in, std::size_t n, DType dt, void* out) {
  if (dt == DType::f32) {
    std::memcpy(out, in, n * sizeof(float));
  } else if (dt == DType::f16) {
    // decode checks the statistics' pixels before writing; this catches the rest (unlabeled pixels of a
    // patch or the cube, a PCA projection)
    if (!floats_to_halves(in, static_cast<std::uint16_t*>(out), n))
      throw ConfigError("--dtype float16: a normalised value from 65520 on in magnitude, which float16 stores as Inf: "
                        "use --dtype float32, or normalise (--normalize zscore or minmax)");
  } else {
    throw ConfigError("--dtype: the cache stores float32 or float16, not " + std::string(dtype_name(dt)));
  }
}

}  // namespace hsipipe::cache

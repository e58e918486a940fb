// train/compare_stats: the paired tests of `hsipipe compare` (compare.hpp): McNemar, Wilcoxon signed-rank and
// the paired t-test, with Boost.Math's distributions. Pure functions, rank-local; scipy is the reference
// (tests/train/test_compare.py checks them against scipy.stats on real runs).
#include <algorithm>
#include <cmath>
#include <numeric>

#include <boost/math/distributions/binomial.hpp>
#include <boost/math/distributions/chi_squared.hpp>
#include <boost/math/distributions/normal.hpp>
#include <boost/math/distributions/students_t.hpp>

#include "train/compare.hpp"

namespace hsipipe::train {

McNemarResult mcnemar(std::int64_t b, std::int64_t c) {
  McNemarResult r;
  r.b = b, r.c = c;
  const std::int64_t n = b + c;
  if (n == 0) return r;  // no discordant pair: no evidence either way (p = 1)
  const double diff = std::max(0.0, std::abs(static_cast<double>(b - c)) - 1.0);
  r.chi2 = diff * diff / static_cast<double>(n);
  r.p_chi2 = boost::math::cdf(boost::math::complement(boost::math::chi_squared(1.0), r.chi2));
  const boost::math::binomial bin(static_cast<double>(n), 0.5);
  r.p_exact = std::min(1.0, 2.0 * boost::math::cdf(bin, static_cast<double>(std::min(b, c))));
  return r;
}

namespace {

/// Average ranks (1-based) of |d|, doubled so that they are integers; `ties` says whether any tie occurred.
std::vector<std::int64_t> doubled_ranks(const std::vector<double>& a, bool& ties, double& tie_term) {
  const std::size_t n = a.size();
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return a[x] < a[y]; });
  std::vector<std::int64_t> r2(n);
  ties = false;
  tie_term = 0;
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i;
    while (j + 1 < n && a[order[j + 1]] == a[order[i]]) ++j;
    const auto t = static_cast<double>(j - i + 1);
    if (j > i) ties = true, tie_term += t * t * t - t;
    for (std::size_t k = i; k <= j; ++k) r2[order[k]] = static_cast<std::int64_t>(i + 1 + j + 1);  // 2 x mean rank
    i = j + 1;
  }
  return r2;
}

/// P(W+ <= x2 / 2) under H0 for the doubled ranks r2: the exact distribution of the signed-rank sum.
double exact_cdf(const std::vector<std::int64_t>& r2, std::int64_t x2) {
  std::int64_t total = 0;
  for (auto v : r2) total += v;
  std::vector<double> count(static_cast<std::size_t>(total + 1), 0.0);
  count[0] = 1;
  for (auto v : r2)
    for (std::int64_t s = total; s >= v; --s) count[static_cast<std::size_t>(s)] += count[static_cast<std::size_t>(s - v)];
  double below = 0, all = 0;
  for (std::int64_t s = 0; s <= total; ++s) {
    all += count[static_cast<std::size_t>(s)];
    if (s <= x2) below += count[static_cast<std::size_t>(s)];
  }
  return below / all;
}

}  // namespace

WilcoxonResult wilcoxon_signed_rank(const std::vector<double>& d) {
  WilcoxonResult r;
  std::vector<double> nz, mag;
  for (double v : d)
    if (v != 0.0) nz.push_back(v), mag.push_back(std::abs(v));
  r.n = static_cast<int>(nz.size());
  if (r.n == 0) return r;
  bool ties = false;
  double tie_term = 0;
  const auto r2 = doubled_ranks(mag, ties, tie_term);
  std::int64_t plus2 = 0, minus2 = 0;
  for (std::size_t i = 0; i < nz.size(); ++i) (nz[i] > 0 ? plus2 : minus2) += r2[i];
  r.w_plus = static_cast<double>(plus2) / 2, r.w_minus = static_cast<double>(minus2) / 2;
  r.statistic = std::min(r.w_plus, r.w_minus);
  const double n = r.n;
  if (r.n <= 50 && !ties) {
    r.exact = true;
    r.p = std::min(1.0, 2.0 * exact_cdf(r2, std::min(plus2, minus2)));
    return r;
  }
  const double mean = n * (n + 1) / 4;
  const double se = std::sqrt(n * (n + 1) * (2 * n + 1) / 24 - tie_term / 48);
  if (se == 0) return r;
  const double z = (r.statistic - mean) / se;
  r.p = 2.0 * boost::math::cdf(boost::math::normal(), -std::abs(z));
  return r;
}

TTestResult paired_t_test(const std::vector<double>& d) {
  TTestResult r;
  const auto n = static_cast<double>(d.size());
  if (d.size() < 2) return r;
  r.df = static_cast<int>(d.size()) - 1;
  const double m = std::accumulate(d.begin(), d.end(), 0.0) / n;
  double ss = 0;
  for (double v : d) ss += (v - m) * (v - m);
  const double sd = std::sqrt(ss / (n - 1));
  if (sd == 0) return r;
  r.t = m / (sd / std::sqrt(n));
  r.p = 2.0 * boost::math::cdf(boost::math::complement(boost::math::students_t(r.df), std::abs(*r.t)));
  return r;
}

}  // namespace hsipipe::train

#include "train/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/error.hpp"

namespace hsipipe::train {

ClassIndex::ClassIndex(std::vector<std::int32_t> label_values) : values_(std::move(label_values)) {
  if (values_.empty()) return;
  const auto [mn, mx] = std::minmax_element(values_.begin(), values_.end());
  min_ = *mn;
  const std::int64_t span = static_cast<std::int64_t>(*mx) - *mn + 1;
  if (span > (std::int64_t{1} << 24))
    throw ConfigError("label_values: range " + std::to_string(*mn) + ".." + std::to_string(*mx) + " too wide");
  lut_.assign(static_cast<std::size_t>(span), -1);
  for (std::size_t i = 0; i < values_.size(); ++i) {
    int& slot = lut_[static_cast<std::size_t>(values_[i] - min_)];
    if (slot >= 0) throw ConfigError("label_values: duplicate label value " + std::to_string(values_[i]));
    slot = static_cast<int>(i);
  }
}

std::int32_t ClassIndex::value(int index) const { return values_.at(static_cast<std::size_t>(index)); }

bool ClassIndex::contains(std::int32_t v) const noexcept {
  const std::int64_t k = static_cast<std::int64_t>(v) - min_;
  return k >= 0 && k < static_cast<std::int64_t>(lut_.size()) && lut_[static_cast<std::size_t>(k)] >= 0;
}

int ClassIndex::index(std::int32_t v) const {
  if (!contains(v)) throw ConfigError("label value " + std::to_string(v) + " is not one of the cache's label_values");
  return lut_[static_cast<std::size_t>(static_cast<std::int64_t>(v) - min_)];
}

ConfusionMatrix::ConfusionMatrix(int n_classes) : c_(n_classes) {
  if (n_classes < 0) throw std::invalid_argument("ConfusionMatrix: negative class count");
  m_.assign(static_cast<std::size_t>(n_classes) * n_classes, 0);
}

void ConfusionMatrix::add(int t, int p, std::int64_t count) {
  if (t < 0 || t >= c_ || p < 0 || p >= c_)
    throw std::out_of_range("ConfusionMatrix::add: class index (" + std::to_string(t) + ", " + std::to_string(p) +
                            ") outside 0.." + std::to_string(c_ - 1));
  m_[static_cast<std::size_t>(t) * c_ + p] += count;
}

std::int64_t ConfusionMatrix::total() const noexcept {
  std::int64_t s = 0;
  for (auto v : m_) s += v;
  return s;
}

Metrics compute_metrics(const ConfusionMatrix& cm, const ClassIndex& classes) {
  const int c = cm.n_classes();
  if (classes.size() != c)
    throw std::invalid_argument("compute_metrics: " + std::to_string(classes.size()) + " label values for " +
                                std::to_string(c) + " classes");
  Metrics m;
  m.label_values = classes.values();
  m.confusion = cm;
  m.n = cm.total();
  std::vector<std::int64_t> row(c, 0), col(c, 0);
  std::int64_t diag = 0;
  for (int i = 0; i < c; ++i)
    for (int j = 0; j < c; ++j) {
      const auto v = cm.at(i, j);
      row[i] += v;
      col[j] += v;
      if (i == j) diag += v;
    }
  m.support = row;
  m.recall.assign(c, 0.0);
  m.precision.assign(c, 0.0);
  m.f1.assign(c, 0.0);
  double aa_sum = 0;
  int aa_n = 0;
  for (int i = 0; i < c; ++i) {
    const double tp = static_cast<double>(cm.at(i, i));
    if (row[i] > 0) {
      m.recall[i] = tp / static_cast<double>(row[i]);
      aa_sum += m.recall[i];
      ++aa_n;
    }
    if (col[i] > 0) m.precision[i] = tp / static_cast<double>(col[i]);
    const double s = m.precision[i] + m.recall[i];
    m.f1[i] = s > 0 ? 2 * m.precision[i] * m.recall[i] / s : 0.0;
  }
  if (m.n > 0) {
    const double n = static_cast<double>(m.n);
    m.oa = static_cast<double>(diag) / n;
    m.aa = aa_n ? aa_sum / aa_n : 0.0;
    double pe = 0;
    for (int i = 0; i < c; ++i) pe += (static_cast<double>(row[i]) / n) * (static_cast<double>(col[i]) / n);
    if (std::abs(1.0 - pe) < 1e-15) m.kappa = (m.oa == 1.0) ? 1.0 : 0.0;
    else m.kappa = (m.oa - pe) / (1.0 - pe);
  }
  return m;
}

Metrics compute_metrics(const std::vector<int>& t, const std::vector<int>& p, const ClassIndex& classes) {
  if (t.size() != p.size())
    throw std::invalid_argument("compute_metrics: " + std::to_string(t.size()) + " true vs " +
                                std::to_string(p.size()) + " predicted labels");
  ConfusionMatrix cm(classes.size());
  for (std::size_t i = 0; i < t.size(); ++i) cm.add(t[i], p[i]);
  return compute_metrics(cm, classes);
}

nlohmann::json to_json(const Metrics& m) {
  using nlohmann::json;
  json j;
  j["n"] = m.n;
  j["oa"] = m.oa;
  j["aa"] = m.aa;
  j["kappa"] = m.kappa;
  j["label_values"] = m.label_values;
  json rows = json::array();
  const int c = m.confusion.n_classes();
  for (int i = 0; i < c; ++i) {
    json r = json::array();
    for (int k = 0; k < c; ++k) r.push_back(m.confusion.at(i, k));
    rows.push_back(r);
  }
  j["confusion"] = rows;
  json pc = json::array();
  for (int i = 0; i < c; ++i) {
    json e;
    e["label"] = m.label_values.at(static_cast<std::size_t>(i));
    e["support"] = m.support[i];
    e["accuracy"] = m.support[i] > 0 ? json(m.recall[i]) : json(nullptr);
    e["precision"] = m.precision[i];
    e["f1"] = m.f1[i];
    pc.push_back(e);
  }
  j["per_class"] = pc;
  return j;
}

Metrics metrics_from_json(const nlohmann::json& j, const std::string& file) {
  auto need = [&](const char* field) -> const nlohmann::json& {
    if (!j.is_object() || !j.contains(field)) throw FormatError(file, std::string("metrics.") + field, "missing");
    return j.at(field);
  };
  std::vector<std::int32_t> labels;
  try {
    labels = need("label_values").get<std::vector<std::int32_t>>();
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(file, "metrics.label_values", std::string("not a list of integers: ") + e.what());
  }
  const auto& rows = need("confusion");
  const int c = static_cast<int>(labels.size());
  if (!rows.is_array() || static_cast<int>(rows.size()) != c)
    throw FormatError(file, "metrics.confusion", "expected " + std::to_string(c) + " rows");
  ConfusionMatrix cm(c);
  for (int i = 0; i < c; ++i) {
    if (!rows[i].is_array() || static_cast<int>(rows[i].size()) != c)
      throw FormatError(file, "metrics.confusion[" + std::to_string(i) + "]", "expected " + std::to_string(c) + " counts");
    for (int k = 0; k < c; ++k) {
      if (!rows[i][k].is_number_integer() || rows[i][k].get<std::int64_t>() < 0)
        throw FormatError(file, "metrics.confusion[" + std::to_string(i) + "][" + std::to_string(k) + "]",
                          "expected a non-negative integer");
      cm.add(i, k, rows[i][k].get<std::int64_t>());
    }
  }
  ClassIndex ci;
  try {
    ci = ClassIndex(labels);
  } catch (const ConfigError& e) {
    throw FormatError(file, "metrics.label_values", e.what());
  }
  Metrics m = compute_metrics(cm, ci);
  for (const char* f : {"oa", "aa", "kappa"}) {
    const auto& v = need(f);
    if (!v.is_number()) throw FormatError(file, std::string("metrics.") + f, "expected a number");
    const double stored = v.get<double>();
    const double mine = f[0] == 'o' ? m.oa : (f[0] == 'a' ? m.aa : m.kappa);
    if (std::abs(stored - mine) > 1e-9)
      throw FormatError(file, std::string("metrics.") + f,
                        "value " + std::to_string(stored) + " disagrees with the confusion matrix (" + std::to_string(mine) + ")");
  }
  return m;
}

}  // namespace hsipipe::train

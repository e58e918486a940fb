#include "train/planner.hpp"

#include <malloc.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <sstream>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "core/error.hpp"
#include "train/host_memory.hpp"
#include "train/loader.hpp"
#include "train/models.hpp"
#include "train/models/torchscript.hpp"

namespace hsipipe::train {

using nlohmann::json;

std::uint64_t parse_bytes(const std::string& s, const std::string& option) {
  std::size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (const std::exception&) {
    throw ConfigError(option + ": '" + s + "' is not a size (e.g. 24GiB, 512MiB, 80GB)");
  }
  std::string unit = s.substr(pos);
  unit.erase(std::remove(unit.begin(), unit.end(), ' '), unit.end());
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  double mult = 0;
  if (unit.empty() || unit == "b") mult = 1;
  else if (unit == "k" || unit == "kib") mult = 1024.0;
  else if (unit == "m" || unit == "mib") mult = 1024.0 * 1024;
  else if (unit == "g" || unit == "gib") mult = 1024.0 * 1024 * 1024;
  else if (unit == "t" || unit == "tib") mult = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "kb") mult = 1e3;
  else if (unit == "mb") mult = 1e6;
  else if (unit == "gb") mult = 1e9;
  else if (unit == "tb") mult = 1e12;
  if (mult == 0 || !(v >= 0) || !std::isfinite(v))
    throw ConfigError(option + ": '" + s + "' is not a size (units B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)");
  return static_cast<std::uint64_t>(std::llround(v * mult));
}

std::string format_bytes(std::uint64_t b) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  std::ostringstream s;
  s << std::fixed << std::setprecision(u == 0 ? 0 : 2) << v << ' ' << units[u];
  return s.str();
}

namespace {

void validate(const PlanRequest& r) {
  const ModelInfo& info = model_info(r.model);  // throws for unknown models
  if (r.bands < 1) throw ConfigError("--bands: must be >= 1");
  if (r.batch < 1) throw ConfigError("--batch: must be >= 1");
  if (r.classes < 2) throw ConfigError("--classes: must be >= 2");
  if (r.ranks < 1) throw ConfigError("--ranks: must be >= 1");
  if (r.precision != "fp32" && r.precision != "bf16")
    throw ConfigError("--precision: '" + r.precision + "' (expected fp32 or bf16)");
  if (r.optimizer != "adam" && r.optimizer != "adamw" && r.optimizer != "sgd")
    throw ConfigError("--optimizer: '" + r.optimizer + "' (expected adam, adamw or sgd)");
  if (r.device != "cpu" && r.device != "cuda") throw ConfigError("--device: '" + r.device + "' (expected cpu or cuda)");
  if (r.cache_dtype_bytes != 2 && r.cache_dtype_bytes != 4) throw ConfigError("--cache-dtype: expected float16 or float32");
  check_model_fits(r.model, info.spatial ? cache::Layout::patch : (r.patch == 1 ? cache::Layout::pixel : cache::Layout::patch),
                   r.patch, r.bands);
}

/// A TorchScript network: no trace, so activations and workspace come from one measured CPU step (fp32).
void measured_activations(const PlanRequest& r, Plan& p) {
  PlanRequest fp32 = r;
  fp32.precision = "fp32";
  const Measured m = measure_cpu_step(fp32, 2);
  const std::uint64_t counted = p.m_param + p.m_grad + p.m_opt + p.m_input;
  p.m_act = m.peak_rss_increase > counted ? m.peak_rss_increase - counted : 0;
  p.m_workspace = 0;
  p.note = "TorchScript network: no layer trace; activations and workspace (" + format_bytes(p.m_act) +
           ") are the peak RSS of a measured CPU training step (fp32, batch " + std::to_string(p.batch_per_rank) + ") beyond "
           "parameters, gradients, optimizer state and the batch" + (m.peak_reset ? "" : " (the peak could not be reset: an upper bound)");
}

/// The cache's size per layout, and what one rank's host memory holds of it (host_memory.hpp).
void add_cache_estimates(const PlanRequest& r, Plan& p) {
  const std::uint64_t d = static_cast<std::uint64_t>(r.cache_dtype_bytes), b = static_cast<std::uint64_t>(r.bands);
  const std::uint64_t pp = static_cast<std::uint64_t>(r.patch) * static_cast<std::uint64_t>(r.patch);
  const std::uint64_t table = r.samples * 16;  // labels int32 + coords int32 x 3
  p.caches.push_back({"pixel", r.samples * b * d + table, "[N, B]: spectral models only"});
  p.caches.push_back({"patch", r.samples * b * pp * d + table,
                      "[N, B, p, p]: patches cut at decode time, each neighbour's spectrum stored p^2 times"});
  p.caches.push_back({"cube", r.rows * r.cols * b * d + table, "[H, W, B]: whole scene, patches cut by the loader"});
  const auto ranks = static_cast<std::uint64_t>(std::max(1, r.ranks)), slots = static_cast<std::uint64_t>(r.prefetch);
  const auto pr = static_cast<std::uint64_t>(r.patch), bpr = static_cast<std::uint64_t>(p.batch_per_rank);
  for (const auto& c : p.caches) {
    const std::uint64_t sp = c.layout == "patch" ? pr : 1, in = c.layout == "pixel" ? 1 : pr;
    const std::uint64_t shard = (c.bytes + ranks - 1) / ranks;
    p.host.push_back({c.layout, shard, slots * p.m_input, std::min(shard, slots * bpr * stored_item_bytes(c.layout, b, sp, in, d))});
  }
}

Plan estimate(const PlanRequest& r) {
  validate(r);
  Plan p;
  p.req = r;
  p.batch_per_rank = (r.batch + r.ranks - 1) / r.ranks;
  const std::uint64_t n = static_cast<std::uint64_t>(p.batch_per_rank);
  const bool bf16 = r.precision == "bf16";

  // Shape trace at batch 1 on the CPU. Restore the generator so planning never shifts a seeded run.
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  const auto rng_state = gen.get_state();
  auto model = make_model(r.model, r.bands, r.patch, r.classes);
  const auto x = r.patch == 1 ? torch::zeros({1, r.bands}) : torch::zeros({1, r.bands, r.patch, r.patch});
  const auto trace = model->trace(x);
  gen.set_state(rng_state);

  p.params = count_parameters(*model);
  const std::uint64_t np = static_cast<std::uint64_t>(p.params);
  p.m_param = np * 4;
  p.m_grad = np * 4;
  p.m_opt = r.optimizer != "sgd" ? 2 * 4 * np : (r.momentum != 0 ? 4 * np : 0);

  std::uint64_t act = 0, max_saved = 0, max_conv = 0;
  std::int64_t prev_out = x.numel();
  std::int64_t prev_padded = x.numel();  // input: plain layout
  // oneDNN keeps convolution tensors in channel-blocked layouts, padding the channel count to a
  // multiple of 16 (tensors with fewer than 4 channels, such as the network input, stay plain).
  auto padded = [](const std::vector<std::int64_t>& shape, std::int64_t elems) {
    if (shape.size() < 3) return elems;
    const std::int64_t c = shape[1];
    if (c < 4 || c % 16 == 0) return elems;
    return elems / c * ((c + 15) / 16 * 16);
  };
  for (const auto& t : trace) {
    PlanLayer l;
    l.name = t.name;
    l.kind = t.kind;
    l.out = t.out;
    if (!l.out.empty()) l.out[0] = p.batch_per_rank;
    l.params = t.params;
    std::uint64_t saved = static_cast<std::uint64_t>(t.saved_per_sample) * static_cast<std::uint64_t>(t.saved_elem_bytes);
    if (bf16 && t.kind != "dropout") saved /= 2;
    l.act_bytes = saved * n;
    std::int64_t out_elems = 1;
    for (std::size_t d = 1; d < t.out.size(); ++d) out_elems *= t.out[d];
    const std::int64_t out_padded = padded(t.out, out_elems);
    const std::uint64_t elem = bf16 ? 2 : 4;
    if (t.kind.rfind("conv", 0) == 0) {
      // Reorder buffers of a convolution: its input and output in the blocked layout.
      l.workspace_bytes = static_cast<std::uint64_t>(prev_padded + out_padded) * elem * n;
      max_conv = std::max(max_conv, l.workspace_bytes);
    }
    max_saved = std::max(max_saved, static_cast<std::uint64_t>(std::max(out_elems, prev_out)) * elem * n);
    act += l.act_bytes;
    if (t.kind != "reshape") prev_out = out_elems, prev_padded = out_padded;
    p.layers.push_back(std::move(l));
  }
  p.m_act = act;
  p.m_input = n * (static_cast<std::uint64_t>(x.numel()) * 4 + 8);
  p.m_workspace = max_saved + max_conv + (bf16 ? 2 * np : 0);
  if (model_info(r.model).name == kTorchScriptModel) measured_activations(r, p);
  p.m_runtime = r.device == "cuda" ? kCudaRuntimeBytes : 0;
  p.total = p.m_param + p.m_grad + p.m_opt + p.m_act + p.m_input + p.m_workspace + p.m_runtime;

  if (r.rows && r.cols && r.samples) add_cache_estimates(r, p);
  return p;
}

/// Largest value in [lo, hi] (step `step`) for which fits(v) holds, assuming monotone; lo-step if none.
template <class F>
int largest_fitting(int lo, int hi, int step, F fits) {
  int best = lo - step;
  int a = 0, b = (hi - lo) / step;
  while (a <= b) {
    const int mid = (a + b) / 2;
    const int v = lo + mid * step;
    if (fits(v)) best = v, a = mid + 1;
    else b = mid - 1;
  }
  return best;
}

}  // namespace

Plan make_plan(const PlanRequest& req) {
  if (req.prefetch < 1 || req.prefetch > kMaxPrefetch)
    throw ConfigError("--prefetch " + std::to_string(req.prefetch) + ": expected 1 .. " + std::to_string(kMaxPrefetch));
  Plan p = estimate(req);
  if (req.budget == 0 || p.total <= req.budget) return p;
  auto fits = [&](PlanRequest r) {
    try {
      return estimate(r).total <= req.budget;
    } catch (const ConfigError&) {
      return false;
    }
  };
  auto add = [&](const std::string& lever, const std::string& change, const PlanRequest& r) {
    Lever l;
    l.lever = lever;
    l.change = change;
    l.total = estimate(r).total;
    l.fits = l.total <= req.budget;
    p.levers.push_back(l);
  };
  // Cheapest first (seed 004's order): precision, then batch / ranks, patch, spectral reduction.
  if (req.precision == "fp32") {
    PlanRequest r = req;
    r.precision = "bf16";
    add("precision", "--precision bf16", r);
  }
  {
    const int per_rank = largest_fitting(1, p.batch_per_rank, 1, [&](int b) {
      PlanRequest r = req;
      r.batch = b;
      r.ranks = 1;
      return fits(r);
    });
    if (per_rank >= 1) {
      PlanRequest r = req;
      r.batch = per_rank * req.ranks;
      add("batch", "--batch " + std::to_string(r.batch) + " (per rank " + std::to_string(per_rank) + ")", r);
      const int ranks = (req.batch + per_rank - 1) / per_rank;
      PlanRequest rr = req;
      rr.ranks = ranks;
      add("ranks", "mpiexec -n " + std::to_string(ranks) + " (global batch " + std::to_string(req.batch) +
                       " kept, " + std::to_string((req.batch + ranks - 1) / ranks) + " per rank)", rr);
    }
  }
  const ModelInfo& info = model_info(req.model);
  if (info.spatial && req.patch > info.min_patch) {
    const int patch = largest_fitting(info.min_patch, req.patch - 2, 2, [&](int v) {
      PlanRequest r = req;
      r.patch = v;
      return fits(r);
    });
    if (patch >= info.min_patch) {
      PlanRequest r = req;
      r.patch = patch;
      add("patch", "--patch " + std::to_string(patch) + " (decode --layout cube, or a patch cache cut at " +
                       std::to_string(patch) + ")", r);
    }
  }
  if (req.bands > info.min_bands) {
    const int bands = largest_fitting(info.min_bands, req.bands - 1, 1, [&](int v) {
      PlanRequest r = req;
      r.bands = v;
      return fits(r);
    });
    if (bands >= info.min_bands) {
      PlanRequest r = req;
      r.bands = bands;
      add("bands", "PCA to " + std::to_string(bands) + " components at decode time (hsipipe decode --pca " +
                       std::to_string(bands) + ")", r);
    }
  }
  return p;
}

json to_json(const Plan& p) {
  json layers = json::array();
  for (const auto& l : p.layers)
    layers.push_back({{"name", l.name}, {"kind", l.kind}, {"out", l.out}, {"params", l.params},
                      {"activation_bytes", l.act_bytes}, {"workspace_bytes", l.workspace_bytes}});
  json caches = json::array();
  for (const auto& c : p.caches) caches.push_back({{"layout", c.layout}, {"bytes", c.bytes}, {"note", c.note}});
  json host = json::array();
  for (const auto& h : p.host)
    host.push_back({{"layout", h.layout}, {"shard_bytes", h.shard}, {"ring_bytes", h.ring}, {"window_bytes", h.window}});
  json levers = json::array();
  for (const auto& l : p.levers) levers.push_back({{"lever", l.lever}, {"change", l.change}, {"total_bytes", l.total}, {"fits", l.fits}});
  const auto& r = p.req;
  return json{{"model", r.model},
              {"note", p.note},
              {"bands", r.bands},
              {"patch", r.patch},
              {"batch", r.batch},
              {"ranks", r.ranks},
              {"batch_per_rank", p.batch_per_rank},
              {"classes", r.classes},
              {"precision", r.precision},
              {"optimizer", r.optimizer},
              {"params", p.params},
              {"bytes",
               {{"param", p.m_param},
                {"grad", p.m_grad},
                {"optimizer", p.m_opt},
                {"activations", p.m_act},
                {"input", p.m_input},
                {"workspace", p.m_workspace},
                {"runtime", p.m_runtime},
                {"total", p.total}}},
              {"device", r.device},
              {"budget_bytes", r.budget},
              {"fits", r.budget == 0 ? json(nullptr) : json(p.total <= r.budget)},
              {"layers", layers},
              {"caches", caches},
              {"host_memory_per_rank", host},
              {"prefetch", r.prefetch},
              {"levers", levers},
              {"method", "activations from a batch-1 shape trace of the real model, scaled by the per-rank batch"}};
}

std::string plan_text(const Plan& p) {
  std::ostringstream o;
  const auto& r = p.req;
  o << "Plan: " << r.model << ", bands " << r.bands << ", patch " << r.patch << ", global batch " << r.batch << " on "
    << r.ranks << " rank(s) (" << p.batch_per_rank << " per rank), " << r.precision << ", " << r.optimizer << ", "
    << r.classes << " classes\n\n";
  if (!p.note.empty()) o << "note: " << p.note << "\n\n";
  o << std::left << std::setw(10) << "layer" << std::setw(10) << "kind" << std::setw(28) << "output" << std::right
    << std::setw(12) << "params" << std::setw(14) << "activations" << std::setw(14) << "workspace" << "\n";
  for (const auto& l : p.layers) {
    std::string shape = "[";
    for (std::size_t i = 0; i < l.out.size(); ++i) shape += (i ? "," : "") + std::to_string(l.out[i]);
    shape += "]";
    o << std::left << std::setw(10) << l.name << std::setw(10) << l.kind << std::setw(28) << shape << std::right
      << std::setw(12) << l.params << std::setw(14) << format_bytes(l.act_bytes) << std::setw(14)
      << (l.workspace_bytes ? format_bytes(l.workspace_bytes) : std::string("-")) << "\n";
  }
  o << "\nMemory per rank (" << p.params << " parameters):\n";
  auto line = [&](const char* what, std::uint64_t b) { o << "  " << std::left << std::setw(14) << what << std::right << std::setw(12) << format_bytes(b) << "\n"; };
  line("M_param", p.m_param);
  line("M_grad", p.m_grad);
  line("M_opt", p.m_opt);
  line("M_act", p.m_act);
  line("M_input", p.m_input);
  line("M_workspace", p.m_workspace);
  if (p.m_runtime) line("M_runtime", p.m_runtime);
  line("total", p.total);
  o << "  (activations: batch-1 shape trace of the real model x per-rank batch; steady state, optimizer state allocated)\n";
  if (!p.caches.empty()) {
    o << "\nCache size for " << r.rows << " x " << r.cols << " pixels, " << r.samples << " labeled samples, "
      << (r.cache_dtype_bytes == 2 ? "float16" : "float32") << ":\n";
    for (const auto& c : p.caches)
      o << "  " << std::left << std::setw(6) << c.layout << std::right << std::setw(12) << format_bytes(c.bytes) << "  " << c.note << "\n";
    o << "\nHost memory per rank (" << r.ranks << " rank(s), --prefetch " << r.prefetch << "): the shard in memory, or streamed past\n"
      << "--shard-memory-mb (then the window of pages in flight); the loader's ring either way" << (r.device == "cpu" ? "; plus the total above" : "") << ":\n";
    o << "  " << std::left << std::setw(6) << "layout" << std::right << std::setw(12) << "shard" << std::setw(12) << "ring" << std::setw(12) << "window" << "\n";
    for (const auto& h : p.host)
      o << "  " << std::left << std::setw(6) << h.layout << std::right << std::setw(12) << format_bytes(h.shard) << std::setw(12)
        << format_bytes(h.ring) << std::setw(12) << format_bytes(h.window) << "\n";
  }
  if (r.budget) {
    o << "\nBudget " << format_bytes(r.budget) << ": ";
    if (p.total <= r.budget) {
      o << "fits (" << format_bytes(r.budget - p.total) << " headroom)\n";
    } else {
      o << "exceeded by " << format_bytes(p.total - r.budget) << ". Levers, each alone:\n";
      for (const auto& l : p.levers)
        o << "  " << std::left << std::setw(10) << l.lever << std::setw(70) << l.change << std::right << std::setw(12)
          << format_bytes(l.total) << (l.fits ? "  fits" : "  still too large") << "\n";
      if (std::none_of(p.levers.begin(), p.levers.end(), [](const Lever& l) { return l.fits; }))
        o << "  no single lever is enough: combine them (e.g. bf16 and a smaller batch per rank)\n";
    }
  }
  return o.str();
}

// ---------------------------------------------------------------------------------------------
// Measurement

namespace {

std::uint64_t status_kib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string key = std::string(field) + ":";
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) return std::stoull(line.substr(key.size()));
  return 0;
}

bool reset_peak() {
  std::ofstream f("/proc/self/clear_refs");
  if (!f) return false;
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

}  // namespace

Measured measure_cpu_step(const PlanRequest& req, int steps) {
  validate(req);
  if (req.precision != "fp32") throw ConfigError("--measure: the CPU measurement runs fp32 only (got --precision " + req.precision + ")");
  const int n = (req.batch + req.ranks - 1) / req.ranks;
  // Warm up torch's thread pool and oneDNN with a tiny unrelated step, then return freed memory.
  {
    auto w = torch::randn({8, 8}, torch::requires_grad());
    (w.matmul(w)).sum().backward();
  }
  malloc_trim(0);
  Measured m;
  const std::uint64_t base = status_kib("VmRSS");
  m.peak_reset = reset_peak();
  {
    auto model = make_model(req.model, req.bands, req.patch, req.classes, 1);
    model->train();
    std::unique_ptr<torch::optim::Optimizer> opt;
    if (req.optimizer != "sgd") opt = std::make_unique<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(1e-3));
    else opt = std::make_unique<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(1e-2).momentum(req.momentum));
    auto x = req.patch == 1 ? torch::randn({n, req.bands}) : torch::randn({n, req.bands, req.patch, req.patch});
    auto y = torch::randint(0, req.classes, {n}, torch::kLong);
    for (int s = 0; s < steps; ++s) {
      opt->zero_grad();
      auto loss = torch::nn::functional::cross_entropy(model->forward(x), y);
      loss.backward();
      opt->step();
    }
  }
  const std::uint64_t peak = status_kib("VmHWM");
  m.peak_rss_increase = peak > base ? (peak - base) * 1024 : 0;
  malloc_trim(0);
  return m;
}

}  // namespace hsipipe::train

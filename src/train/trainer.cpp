#include "train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <numeric>
#include <optional>
#include <sstream>
#include <thread>

#include <torch/cuda.h>
#include <torch/torch.h>

#include "cache/cache.hpp"
#include "cache/npy.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/hash.hpp"
#include "core/range.hpp"
#include "core/test_hook.hpp"
#include "dist/collective.hpp"
#include "dist/comm.hpp"
#include "folds/folds.hpp"
#include "folds/rng.hpp"
#include "train/checkpoint.hpp"
#include "train/loader.hpp"
#include "train/metrics.hpp"
#include "train/models.hpp"
#include "train/resources.hpp"
#include "train/results.hpp"
#include "train/step.hpp"

namespace hsipipe::train {

namespace {

// ---------------------------------------------------------------- failures of one rank
/// Runs fn. A failure on this rank alone (a libtorch error, a loader error) while the other ranks may be
/// waiting in a collective of the step it will not reach ends the whole job, message first, instead of
/// leaving them (and MPI_Finalize) hanging. On one rank the error propagates as usual.
template <class F>
void abort_on_local_error(const dist::Comm& world, F&& fn) {
  if (world.size() == 1) return fn();
  int code = 1;
  std::string what;
  try {
    return fn();
  } catch (const Error& e) {
    code = e.exit_code();
    what = e.what();
  } catch (const std::exception& e) {
    what = e.what();
  }
  std::cerr << "hsipipe train: rank " << world.rank() << ": error: " << what
            << "\n(ending every rank: the others wait in a collective this rank cannot join)\n"
            << std::flush;
  world.abort_job(code);
}

// ---------------------------------------------------------------- signals (async-signal-safe)
volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void hsipipe_on_preempt(int sig) { g_stop_signal = sig; }

class SignalGuard {
 public:
  SignalGuard() {
    g_stop_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = hsipipe_on_preempt;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &sa, &old_term_);
    sigaction(SIGUSR1, &sa, &old_usr1_);
  }
  ~SignalGuard() {
    sigaction(SIGTERM, &old_term_, nullptr);
    sigaction(SIGUSR1, &old_usr1_, nullptr);
  }
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;

 private:
  struct sigaction old_term_ {}, old_usr1_ {};
};

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::string fold_dir(const std::string& out, int f) { return out + "/fold-" + std::to_string(f); }

// Rank-local steps whose failure must reach every rank (no rank left waiting in a collective).
using dist::collective_step;

struct Timing {
  double data = 0, compute = 0, comm = 0, eval = 0, checkpoint = 0;
  nlohmann::json to_json(double total) const {
    return {{"total", total}, {"data_wait", data}, {"compute", compute}, {"communication", comm},
            {"evaluation", eval}, {"checkpoint", checkpoint}};
  }
};

std::string fmt_bytes(std::uint64_t b) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(1) << static_cast<double>(b) / (1024.0 * 1024.0) << " MiB";
  return s.str();
}

struct Validation {
  std::vector<std::uint64_t> ids;  ///< sorted, the fold's validation set
  std::vector<int> pred;           ///< class index, aligned with ids
  std::vector<float> scores;       ///< [ids.size(), C] softmax, aligned with ids
  Metrics metrics;
};

/// xxh3 over every parameter's float32 bytes, in registration order (rank-local).
std::uint64_t parameter_hash(torch::nn::Module& m) {
  Xxh3Stream h;
  for (const auto& p : m.parameters()) {
    const auto c = p.detach().to(torch::kCPU).contiguous();
    h.update(c.data_ptr(), static_cast<std::size_t>(c.numel()) * c.element_size());
  }
  return h.digest();
}

}  // namespace

nlohmann::json TrainOptions::identity() const {
  return {{"model", model},       {"epochs", epochs},       {"batch", batch},
          {"lr", lr},             {"optimizer", optimizer}, {"weight_decay", weight_decay},
          {"seed", seed},         {"augment", augment},     {"deterministic", deterministic},
          {"precision", precision}};
}

int train(const TrainOptions& opt, const dist::Comm& world, std::ostream& log) {
  const double t_job0 = now_s();
  const int rank = world.rank(), R = world.size();
  const bool root = rank == 0;
  const dist::Comm local = world.split_shared();  // COLLECTIVE

  // ------------------------------------------------------------ set-up and every refusal
  std::optional<cache::CacheReader> cache;
  folds::Folds folds;
  cache::SampleTable table;
  const ModelInfo* info = nullptr;
  std::vector<int> fold_list;
  torch::Device device = torch::kCPU;
  Precision precision = Precision::fp32;
  Augment augment;
  int patch = 1, bands = 0;
  ClassIndex classes;
  dist::Backend backend = dist::Backend::mpi;
  collective_step(world, "train set-up", [&] {
    if (opt.epochs < 1) throw ConfigError("--epochs must be at least 1");
    if (opt.batch < 1) throw ConfigError("--batch must be at least 1");
    if (!(opt.lr > 0) || !std::isfinite(opt.lr)) throw ConfigError("--lr must be a positive finite number");
    if (!(opt.weight_decay >= 0) || !std::isfinite(opt.weight_decay)) throw ConfigError("--weight-decay must be a finite number >= 0");
    if (opt.optimizer != "adam" && opt.optimizer != "sgd") throw ConfigError("--optimizer: unknown '" + opt.optimizer + "' (expected adam or sgd)");
    if (opt.checkpoint_every < 0) throw ConfigError("--checkpoint-every must be >= 0");
    if (opt.out.empty()) throw ConfigError("--out is required");
    precision = precision_from_name(opt.precision);
    augment = parse_augment(opt.augment);
    if (opt.device == "cpu") {
      device = torch::kCPU;
    } else if (opt.device == "cuda" || opt.device == "auto") {
      const bool have = torch::cuda::is_available();
      if (opt.device == "cuda" && !have) {
        throw ConfigError("--device cuda: libtorch sees no usable CUDA device (" +
                          std::string(torch_built_with_cuda() ? "none visible" : "this libtorch was built without CUDA") + ")");
      }
      if (have) device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local.rank() % static_cast<int>(torch::cuda::device_count())));
    } else {
      throw ConfigError("--device: unknown value '" + opt.device + "' (expected auto, cpu or cuda)");
    }
    backend = dist::choose_backend(opt.backend, device.is_cuda());
    if (precision == Precision::bf16 && !device.is_cuda()) {
      // CPU bf16 autocast exists in libtorch >= 1.10; it is slow without AVX512-BF16 but correct.
      if (root) log << "note: --precision bf16 on CPU runs libtorch's CPU autocast (bf16 matmul/conv, fp32 master weights)\n";
    }

    cache.emplace(cache::CacheReader::open(opt.cache));
    // a stale cache is refused (rank 0 looks, once for the job; the step ends every rank with its error)
    if (root) cache::require_current_sources(*cache, &log);
    folds = folds::load_folds(opt.folds);
    table = cache->read_sample_table();
    if (folds.n_samples != cache->n_samples()) {
      throw StaleError("folds file " + opt.folds + " was made for a cache of " + std::to_string(folds.n_samples) +
                       " samples, but cache " + opt.cache + " has " + std::to_string(cache->n_samples()) +
                       (folds.data_checksum.empty() ? std::string() : " (data_checksum " + folds.data_checksum + " vs " + cache->data_checksum() + ")") +
                       ": make the folds again with hsipipe folds");
    }
    std::vector<folds::SceneSize> sizes;
    for (const auto& s : table.scenes) sizes.push_back({s.rows, s.cols});
    folds::SampleTableView view{table.scene, table.row, table.col, table.label, sizes, cache->patch()};
    folds::require_folds_match(folds, view, cache->data_checksum(),
                               "folds file " + opt.folds + " does not belong to cache " + opt.cache);

    info = &model_info(opt.model);
    bands = cache->n_bands();
    const cache::Layout layout = cache->layout();
    const int cache_patch = layout == cache::Layout::pixel ? 1 : cache->patch();
    check_model_fits(opt.model, layout, cache_patch, bands);
    patch = info->spatial ? cache_patch : 1;

    std::vector<std::int32_t> values;
    if (cache->manifest().contains("label_values")) values = cache->manifest()["label_values"].get<std::vector<std::int32_t>>();
    else values = folds.classes;
    classes = ClassIndex(values);
    if (classes.size() < 2) throw ConfigError("cache " + opt.cache + ": fewer than 2 classes (manifest label_values)");

    if (opt.fold == "all") {
      for (int f = 0; f < folds.k; ++f) fold_list.push_back(f);
    } else {
      int f = -1;
      try {
        std::size_t used = 0;
        f = std::stoi(opt.fold, &used);
        if (used != opt.fold.size()) f = -1;
      } catch (...) {
        f = -1;
      }
      if (f < 0 || f >= folds.k) {
        throw ConfigError("--fold: expected 'all' or an index in [0, " + std::to_string(folds.k - 1) + "] (folds file " +
                          opt.folds + " has k = " + std::to_string(folds.k) + "), got '" + opt.fold + "'");
      }
      fold_list.push_back(f);
    }
    if (root) {
      std::filesystem::create_directories(opt.out);
      for (int f : fold_list) std::filesystem::create_directories(fold_dir(opt.out, f));
    }
  });

  // ------------------------------------------------------------ threads, determinism
  if (!std::getenv("OMP_NUM_THREADS")) {
    const int hw = std::max(1u, std::thread::hardware_concurrency());
    torch::set_num_threads(std::max(1, hw / std::max(1, local.size())));
  }
  if (opt.deterministic) at::globalContext().setDeterministicAlgorithms(true, false);

  // ------------------------------------------------------------ the shard, loaded once
  const std::uint64_t N = cache->n_samples();
  const Range range = split_range(N, R, rank);
  std::optional<cache::Shard> shard;
  const double t_load0 = now_s();
  collective_step(world, "loading the shard", [&] { shard.emplace(cache::Shard::load(*cache, range, patch)); });
  const double t_load = now_s() - t_load0;
  const std::vector<std::uint64_t> bytes_per_rank = world.allgatherv(std::vector<std::uint64_t>{shard->bytes_read()});
  std::vector<std::int64_t> class_of(range.size(), -1);
  for (std::uint64_t i = range.begin; i < range.end; ++i) {
    const std::int32_t lab = table.label[i];
    if (lab >= 0 && classes.contains(lab)) class_of[i - range.begin] = classes.index(lab);
  }
  LoaderOptions lopt;
  lopt.threads = opt.threads;
  lopt.prefetch = opt.prefetch;
  lopt.augment = augment;
  lopt.device = device;
  BatchLoader loader(*shard, class_of, lopt);

  auto comm = dist::make_communicator(backend, world);  // COLLECTIVE
  if (root) {
    log << "hsipipe train: " << opt.model << " on " << opt.cache << " (" << N << " samples, " << bands << " bands, patch "
        << patch << "), " << R << " rank(s), device " << device.str() << ", backend " << dist::backend_name(backend)
        << ", precision " << precision_name(precision) << ", folds " << (opt.fold == "all" ? "all" : opt.fold) << " of "
        << folds.k << "\n"
        << "shard loaded once in " << std::fixed << std::setprecision(2) << t_load << " s: cache bytes read per rank [";
    for (std::size_t r = 0; r < bytes_per_rank.size(); ++r) log << (r ? ", " : "") << bytes_per_rank[r];
    log << "], nothing decoded\n" << std::flush;
  }

  RunInfo run;
  run.config = opt.identity();
  run.cache_dir = opt.cache;
  run.cache_checksum = cache->data_checksum();
  run.folds_fingerprint = folds.fingerprint;
  run.n_folds = folds.k;
  nlohmann::json io = {{"cache_bytes_read_per_rank", bytes_per_rank},
                       {"shard_loads", 1},
                       {"scene_bytes_decoded", 0},
                       {"ranks", R},
                       {"shard_load_seconds", t_load}};

  SignalGuard signals;
  const int C = classes.size();
  // Wall time of each fold trained here (rank 0: model, epochs, validation, results), for io.json: what a
  // job spends beyond its folds is then visible (set-up before the first fold, the summary after the last).
  nlohmann::json fold_wall = nlohmann::json::array();
  const double setup_s = now_s() - t_job0;

  for (const int f : fold_list) {
    const double t_fold0 = now_s();
    const std::string fdir = fold_dir(opt.out, f);
    const std::string ckpt_path = fdir + "/checkpoint.pt";
    // ---------------------------------------------------------- resume decision (same on all ranks)
    bool skip = false;
    std::optional<CheckpointState> resume_state;
    collective_step(world, "resume", [&] {
      if (!opt.resume) return;
      const bool have_ckpt = std::filesystem::exists(ckpt_path);
      const bool have_metrics = std::filesystem::exists(fdir + "/metrics.json");
      if (have_ckpt) {
        CheckpointState st = peek_checkpoint(ckpt_path);
        if (st.fold != f) throw FormatError(ckpt_path, "fold", "is " + std::to_string(st.fold) + ", expected " + std::to_string(f));
        if (st.world_size != R) {
          throw ConfigError("--resume: " + ckpt_path + " was written by " + std::to_string(st.world_size) +
                            " ranks; resume with the same number (this run has " + std::to_string(R) + ")");
        }
        nlohmann::json want = opt.identity();
        want.erase("epochs");
        nlohmann::json have = st.config;
        have.erase("epochs");
        if (have != want) throw ConfigError("--resume: " + ckpt_path + " was trained with other options: " + st.config.dump() + " vs " + opt.identity().dump());
        if (st.finished && have_metrics) skip = true;
        else resume_state = st;
      } else if (have_metrics) {
        skip = true;
      }
    });
    if (skip) {
      if (root) log << "fold " << f << ": results exist, skipped (--resume)\n";
      continue;
    }

    // ---------------------------------------------------------- ids of this rank
    const std::vector<std::uint64_t> train_all = folds.train_ids(f), val_all = folds.val_ids(f);
    std::vector<std::uint64_t> train_ids, val_ids;
    for (auto id : train_all)
      if (range.contains(id) && class_of[id - range.begin] >= 0) train_ids.push_back(id);
    for (auto id : val_all)
      if (range.contains(id)) val_ids.push_back(id);
    for (auto id : val_ids) {
      if (class_of[id - range.begin] < 0) {
        throw FormatError(opt.cache, "labels", "validation sample " + std::to_string(id) + " has label " +
                                                   std::to_string(table.label[id]) + ", not one of manifest label_values");
      }
    }
    const std::vector<std::uint64_t> counts = world.allgatherv(std::vector<std::uint64_t>{train_ids.size()});
    const std::uint64_t n_train = std::accumulate(counts.begin(), counts.end(), std::uint64_t{0});
    if (n_train == 0) throw ConfigError("fold " + std::to_string(f) + " of " + opt.folds + " has no training samples");
    const std::vector<std::int64_t> share = split_batch(opt.batch, counts);
    const std::int64_t G = std::accumulate(share.begin(), share.end(), std::int64_t{0});
    const std::int64_t steps = static_cast<std::int64_t>((n_train + static_cast<std::uint64_t>(G) - 1) / static_cast<std::uint64_t>(G));
    const std::int64_t my_b = share[static_cast<std::size_t>(rank)];

    // ---------------------------------------------------------- model, optimizer
    auto model = make_model(opt.model, bands, patch, C, folds::derive_seed(opt.seed, static_cast<std::uint64_t>(f)));
    torch::manual_seed(folds::derive_seed(opt.seed, static_cast<std::uint64_t>(f), static_cast<std::uint64_t>(rank) + 1));
    model->to(device);
    model->train();
    std::unique_ptr<torch::optim::Optimizer> optim;
    if (opt.optimizer == "adam") {
      optim = std::make_unique<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(opt.lr).weight_decay(opt.weight_decay));
    } else {
      optim = std::make_unique<torch::optim::SGD>(model->parameters(),
                                                  torch::optim::SGDOptions(opt.lr).momentum(0.9).weight_decay(opt.weight_decay));
    }
    GradSync sync(model->parameters(), *comm);

    int start_epoch = 0;
    std::int64_t start_step = 0;
    nlohmann::json history = nlohmann::json::array();
    double part_loss = 0, part_correct = 0, part_count = 0;  // global partial sums of a resumed epoch (rank 0 only)
    Timing part_time;
    if (resume_state) {
      std::vector<torch::Tensor> rng;
      CheckpointState st;
      collective_step(world, "loading the checkpoint", [&] { st = load_checkpoint(ckpt_path, *model, *optim, rng); });
      model->to(device);
      start_epoch = st.epoch;
      start_step = st.step;
      history = st.progress.value("history", nlohmann::json::array());
      if (root) {
        part_loss = st.progress.value("loss_sum", 0.0);
        part_correct = st.progress.value("correct", 0.0);
        part_count = st.progress.value("count", 0.0);
        const auto& t = st.progress.value("time", nlohmann::json::object());
        part_time.data = t.value("data_wait", 0.0);
        part_time.compute = t.value("compute", 0.0);
        part_time.comm = t.value("communication", 0.0);
        part_time.eval = t.value("evaluation", 0.0);
        part_time.checkpoint = t.value("checkpoint", 0.0);
      }
      set_cpu_rng_state(rng.at(static_cast<std::size_t>(rank)));
      if (root) {
        log << "resumed from checkpoint " << ckpt_path << " at fold " << f << " epoch " << start_epoch + 1 << " step " << start_step
            << "\n";
        std::string lines;
        for (const auto& h : history) lines += h.dump() + "\n";
        fs::write_text_atomic(fdir + "/epochs.jsonl", lines);
      }
    } else if (root) {
      fs::write_text_atomic(fdir + "/epochs.jsonl", "");
    }

    auto save = [&](int epoch, std::int64_t step, bool finished, double loss, double correct, double count, const Timing& t) {
      // COLLECTIVE: everyone's generator state to rank 0, which writes.
      const torch::Tensor mine = cpu_rng_state().contiguous();
      std::vector<std::uint8_t> bytes(mine.data_ptr<std::uint8_t>(), mine.data_ptr<std::uint8_t>() + mine.numel());
      const auto all = world.allgatherv(bytes);
      collective_step(world, "writing the checkpoint", [&] {
        if (!root) return;
        std::vector<torch::Tensor> states;
        const std::size_t each = bytes.size();
        for (int r = 0; r < R; ++r) {
          states.push_back(torch::from_blob(const_cast<std::uint8_t*>(all.data()) + static_cast<std::size_t>(r) * each,
                                            {static_cast<std::int64_t>(each)}, torch::kUInt8)
                               .clone());
        }
        CheckpointState st;
        st.fold = f;
        st.epoch = epoch;
        st.step = step;
        st.finished = finished;
        st.world_size = R;
        st.config = opt.identity();
        st.progress = {{"history", history}, {"loss_sum", loss}, {"correct", correct}, {"count", count},
                       {"time", t.to_json(0)}};
        // the model is saved from the CPU so a checkpoint resumes on any device
        model->to(torch::kCPU);
        try {
          save_checkpoint(ckpt_path, st, *model, *optim, states);
        } catch (...) {
          model->to(device);
          throw;
        }
        model->to(device);
      });
    };

    // ---------------------------------------------------------- validation (COLLECTIVE)
    auto validate = [&]() -> Validation {
      torch::NoGradGuard ng;
      model->eval();
      std::vector<std::vector<std::uint64_t>> plan;
      const std::size_t vb = static_cast<std::size_t>(std::max<std::int64_t>(256, opt.batch));
      for (std::size_t i = 0; i < val_ids.size(); i += vb)
        plan.emplace_back(val_ids.begin() + static_cast<std::ptrdiff_t>(i),
                          val_ids.begin() + static_cast<std::ptrdiff_t>(std::min(val_ids.size(), i + vb)));
      loader.start(std::move(plan), 0, false);
      std::vector<std::uint64_t> ids;
      std::vector<std::int32_t> pred;
      std::vector<float> scores;
      std::size_t at = 0;
      while (auto b = loader.next()) {
        torch::Tensor logits;
        {
          AutocastScope ac(precision, device);
          logits = model->forward(b->x);
        }
        const auto prob = torch::softmax(logits.to(torch::kFloat32), 1).to(torch::kCPU).contiguous();
        const auto am = prob.argmax(1).to(torch::kInt32).contiguous();
        ids.insert(ids.end(), val_ids.begin() + static_cast<std::ptrdiff_t>(at),
                   val_ids.begin() + static_cast<std::ptrdiff_t>(at + b->size));
        pred.insert(pred.end(), am.data_ptr<std::int32_t>(), am.data_ptr<std::int32_t>() + am.numel());
        scores.insert(scores.end(), prob.data_ptr<float>(), prob.data_ptr<float>() + prob.numel());
        at += b->size;
      }
      model->train();
      const auto all_ids = world.allgatherv(ids);
      const auto all_pred = world.allgatherv(pred);
      const auto all_scores = world.allgatherv(scores);
      // each validation sample exactly once
      std::vector<std::size_t> order(all_ids.size());
      std::iota(order.begin(), order.end(), std::size_t{0});
      std::sort(order.begin(), order.end(), [&](auto a, auto b) { return all_ids[a] < all_ids[b]; });
      Validation v;
      v.ids.reserve(order.size());
      for (auto i : order) v.ids.push_back(all_ids[i]);
      if (v.ids != val_all) {
        std::size_t dup = 0;
        for (std::size_t i = 1; i < v.ids.size(); ++i) dup += v.ids[i] == v.ids[i - 1];
        throw Error("validation of fold " + std::to_string(f) + ": gathered " + std::to_string(v.ids.size()) + " predictions (" +
                    std::to_string(dup) + " duplicated) for the fold's " + std::to_string(val_all.size()) +
                    " validation samples: each must be predicted exactly once");
      }
      std::vector<int> truth;
      truth.reserve(order.size());
      for (auto i : order) {
        v.pred.push_back(all_pred[i]);
        truth.push_back(classes.index(table.label[all_ids[i]]));
        v.scores.insert(v.scores.end(), all_scores.begin() + static_cast<std::ptrdiff_t>(i * static_cast<std::size_t>(C)),
                        all_scores.begin() + static_cast<std::ptrdiff_t>((i + 1) * static_cast<std::size_t>(C)));
      }
      v.metrics = compute_metrics(truth, v.pred, classes);
      return v;
    };

    // ---------------------------------------------------------- epochs
    Validation last_val;
    double fold_train_s = 0;
    for (int epoch = start_epoch; epoch < opt.epochs; ++epoch) {
      const bool resumed_epoch = epoch == start_epoch && start_step > 0;
      const std::int64_t first = resumed_epoch ? start_step : 0;
      Timing t = resumed_epoch && root ? part_time : Timing{};
      const double t_epoch0 = now_s();
      reset_peak_rss();
      cuda_reset_peak_memory(device.is_cuda() ? device.index() : -1);
      loader.start(epoch_plan(train_ids, my_b, steps, opt.seed, f, epoch, rank),
                   folds::derive_seed(opt.seed, static_cast<std::uint64_t>(f), static_cast<std::uint64_t>(epoch)), true,
                   static_cast<std::size_t>(first));
      torch::Tensor acc_loss = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(device));
      torch::Tensor acc_correct = torch::zeros({}, torch::TensorOptions().dtype(torch::kInt64).device(device));
      std::int64_t acc_count = 0;
      bool preempted = false;
      std::int64_t step = first;
      // tests: a fixed pause per step, so that a signal sent during the first epoch lands mid-fold however fast
      // the machine trains (tests/slurm/test_chain.sh)
      static const long step_delay_ms = test_delay_ms("HSIPIPE_TEST_STEP_DELAY_MS");
      // (the step that sees the signal still counts as done: ++step runs before the condition ends the loop)
      for (; step < steps && !preempted; ++step) abort_on_local_error(world, [&] {
        if (step_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(step_delay_ms));
        double t0 = now_s();
        auto b = loader.next();
        if (!b) throw Error("loader ended before step " + std::to_string(step) + " of " + std::to_string(steps));
        t.data += now_s() - t0;
        StepResult r = train_step(*model, *optim, sync, b->x, b->y, G, precision);
        t.compute += r.compute_s;
        t.comm += r.comm_s;
        acc_loss += r.loss_sum.to(torch::kFloat64);
        acc_correct += r.correct;
        acc_count += static_cast<std::int64_t>(b->size);
        // agree on preemption between steps (one tiny allreduce on the host)
        t0 = now_s();
        const int stop = world.allreduce_max(static_cast<int>(g_stop_signal != 0));
        t.comm += now_s() - t0;
        if (stop) preempted = true;
      });
      // global sums of the epoch (or of its part so far)
      double sums[3] = {acc_loss.item<double>(), static_cast<double>(acc_correct.item<std::int64_t>()), static_cast<double>(acc_count)};
      {
        const double t0 = now_s();
        world.allreduce_sum(sums, 3);
        t.comm += now_s() - t0;
      }
      // the same sums on every rank: all stop here together
      if (!std::isfinite(sums[0])) {
        throw Error("fold " + std::to_string(f) + " epoch " + std::to_string(epoch + 1) + ": the training loss is " +
                    (std::isnan(sums[0]) ? "NaN" : "infinite") + " (non-finite values in the cache " + opt.cache +
                    ", or a learning rate too large: --lr " + std::to_string(opt.lr) + ")");
      }
      if (root) {
        sums[0] += resumed_epoch ? part_loss : 0;
        sums[1] += resumed_epoch ? part_correct : 0;
        sums[2] += resumed_epoch ? part_count : 0;
      }
      if (preempted) {
        loader.stop();
        const double t0 = now_s();
        save(epoch, step, false, sums[0], sums[1], sums[2], t);
        t.checkpoint += now_s() - t0;
        if (root) log << "fold " << f << " epoch " << epoch + 1 << " step " << step << "/" << steps << ": signal " << g_stop_signal
                      << " received; checkpoint written, exiting for requeue\n" << std::flush;
        return kExitPreempted;
      }
      const double t_train = t.data + t.compute + t.comm;
      // validation
      {
        const double t0 = now_s();
        abort_on_local_error(world, [&] { last_val = validate(); });
        t.eval += now_s() - t0;
      }
      const bool final_epoch = epoch + 1 == opt.epochs;
      // every rank must hold the same parameters (they applied the same summed gradients): checked
      const std::uint64_t phash = parameter_hash(*model);
      if (world.allreduce_min(phash) != world.allreduce_max(phash)) {
        throw Error("fold " + std::to_string(f) + " epoch " + std::to_string(epoch + 1) +
                    ": model parameters differ between ranks (data-parallel replicas diverged)");
      }
      const std::uint64_t rss = world.allreduce_max(peak_rss_bytes());
      const auto dev_mem = cuda_peak_memory(device.is_cuda() ? device.index() : -1);
      std::uint64_t dev_peak = dev_mem ? dev_mem->peak_allocated : 0, dev_reserved = dev_mem ? dev_mem->peak_reserved : 0;
      dev_peak = world.allreduce_max(dev_peak);
      dev_reserved = world.allreduce_max(dev_reserved);
      nlohmann::json rec;
      if (root) {
        const double total_before_ckpt = now_s() - t_epoch0 + (resumed_epoch ? part_time.data + part_time.compute + part_time.comm : 0);
        rec = {{"fold", f},
               {"epoch", epoch + 1},
               {"epochs", opt.epochs},
               {"steps", steps},
               {"global_batch", G},
               {"samples", sums[2]},
               {"loss", sums[2] > 0 ? sums[0] / sums[2] : 0.0},
               {"train_accuracy", sums[2] > 0 ? sums[1] / sums[2] : 0.0},
               {"val", {{"n", last_val.metrics.n}, {"oa", last_val.metrics.oa}, {"aa", last_val.metrics.aa}, {"kappa", last_val.metrics.kappa}}},
               {"samples_per_s", t_train > 0 ? sums[2] / t_train : 0.0},
               {"peak_rss_bytes", rss},
               {"peak_device_bytes", dev_mem ? nlohmann::json(dev_peak) : nlohmann::json(nullptr)},
               {"peak_device_reserved_bytes", dev_mem ? nlohmann::json(dev_reserved) : nlohmann::json(nullptr)},
               {"device", device.str()},
               {"precision", precision_name(precision)},
               {"ranks", R},
               {"parameter_hash", hex64(phash)},
               {"replicas_identical", true}};
        rec["time_s"] = t.to_json(total_before_ckpt);
        rec["eta"] = total_before_ckpt > 0 ? t.compute / total_before_ckpt : 0.0;
      }
      // checkpoint every N epochs; its history holds this epoch's record (timed before the checkpoint)
      if (opt.checkpoint_every > 0 && ((epoch + 1) % opt.checkpoint_every == 0) && !final_epoch) {
        const double t0 = now_s();
        if (root) history.push_back(rec);
        save(epoch + 1, 0, false, 0, 0, 0, Timing{});
        if (root) history.erase(history.end() - 1);
        t.checkpoint += now_s() - t0;
      }
      if (root) {
        const double total = now_s() - t_epoch0 + (resumed_epoch ? part_time.data + part_time.compute + part_time.comm : 0);
        rec["time_s"] = t.to_json(total);
        rec["eta"] = total > 0 ? t.compute / total : 0.0;
        history.push_back(rec);
        std::ofstream(fdir + "/epochs.jsonl", std::ios::app) << rec.dump() << "\n";
        if (opt.log_epochs) {
          std::ostringstream l;
          l << std::fixed << "fold " << f << " epoch " << epoch + 1 << "/" << opt.epochs << std::setprecision(4) << " loss "
            << rec["loss"].get<double>() << " train_acc " << rec["train_accuracy"].get<double>() << " | val oa "
            << last_val.metrics.oa << " aa " << last_val.metrics.aa << " kappa " << last_val.metrics.kappa << " | "
            << std::setprecision(0) << rec["samples_per_s"].get<double>() << " samples/s | data " << std::setprecision(1)
            << 100 * t.data / total << "% compute " << 100 * t.compute / total << "% comm " << 100 * t.comm / total
            << "% eval " << 100 * t.eval / total << "% ckpt " << 100 * t.checkpoint / total << "% eta "
            << std::setprecision(2) << t.compute / total << " | peak rss " << fmt_bytes(rss);
          if (dev_mem) l << " gpu " << fmt_bytes(dev_peak);
          log << l.str() << "\n" << std::flush;
        }
      }
      fold_train_s += now_s() - t_epoch0;
    }
    if (start_epoch >= opt.epochs) abort_on_local_error(world, [&] { last_val = validate(); });  // resumed after the last epoch

    // ---------------------------------------------------------- results (rank 0)
    collective_step(world, "writing fold results", [&] {
      if (!root) return;
      FoldResult fr;
      fr.fold = f;
      fr.metrics = last_val.metrics;
      fr.predictions.reserve(last_val.ids.size());
      for (std::size_t i = 0; i < last_val.ids.size(); ++i) {
        const auto id = last_val.ids[i];
        fr.predictions.push_back({id, table.scene[id], table.row[id], table.col[id], table.label[id], classes.value(last_val.pred[i])});
      }
      fr.extra = {{"epochs", history}, {"io", io}, {"global_batch", G}, {"steps_per_epoch", steps},
                  {"train_samples", n_train}, {"train_seconds", fold_train_s}, {"device", device.str()},
                  {"backend", dist::backend_name(backend)}, {"ranks", R}};
      write_fold_results(opt.out, run, fr, table.scenes);
      cache::write_npy(fdir + "/scores.npy", DType::f32,
                       {static_cast<std::uint64_t>(last_val.ids.size()), static_cast<std::uint64_t>(C)}, last_val.scores.data());
      log << "fold " << f << ": oa " << std::setprecision(4) << last_val.metrics.oa << " aa " << last_val.metrics.aa << " kappa "
          << last_val.metrics.kappa << " over " << last_val.metrics.n << " validation samples -> " << fdir << "\n" << std::flush;
    });
    // a finished marker so --resume skips this fold
    save(opt.epochs, 0, true, 0, 0, 0, Timing{});
    fold_wall.push_back({{"fold", f}, {"seconds", now_s() - t_fold0}});
  }

  // ------------------------------------------------------------ run summary
  // summary.json/md are a pure function of the fold-*/metrics.json files (summarize_run, the same call as
  // `hsipipe report`), so `--fold all` and `--fold I` tasks + report give identical summaries and rerunning
  // report over a --fold all run changes nothing. The I/O figures of this job (one shard load for all its
  // folds) go to RUN_DIR/io.json beside them; each fold's metrics.json also keeps them under train.io.
  collective_step(world, "writing the summary", [&] {
    if (!root) return;
    if (opt.fold != "all") {
      log << "fold " << opt.fold << " done; when every fold is, `hsipipe report " << opt.out << "` writes the summary\n";
      return;
    }
    nlohmann::json io_all = io;
    io_all["folds"] = static_cast<int>(fold_list.size());
    io_all["setup_seconds"] = setup_s;  // from train() entry to the first fold (shard load included)
    io_all["fold_wall_seconds"] = fold_wall;
    fs::write_text_atomic(opt.out + "/io.json", io_all.dump(2) + "\n");
    const nlohmann::json summary = summarize_run(opt.out);  // writes summary.json and summary.md
    log << summary_markdown(summary) << "cache bytes read per rank: ";
    for (std::size_t r = 0; r < bytes_per_rank.size(); ++r) log << (r ? ", " : "") << bytes_per_rank[r];
    log << " (one shard each, loaded once); nothing decoded\n" << std::flush;
  });
  comm->barrier();
  return 0;
}

}  // namespace hsipipe::train

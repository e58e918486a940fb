// train/trainer: train() and the job around the folds: set-up and every refusal, the shard and its
// batch source, the summary. One fold's work is fold.cpp (train/run.hpp says how the pieces fit).
#include "train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <thread>

#include <torch/cuda.h>
#include <torch/torch.h>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "cache/publish.hpp"
#include "core/seal.hpp"
#include "core/outputs.hpp"
#include "core/signals.hpp"
#include "dist/collective.hpp"
#include "train/resident.hpp"
#include "train/resources.hpp"
#include "train/run.hpp"
#include "train/schedule.hpp"
#include "train/models/torchscript.hpp"
#include "train/planner.hpp"
#include "core/dtype.hpp"

namespace hsipipe::train {

namespace detail {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::string fold_dir(const std::string& out, int f) { return out + "/fold-" + std::to_string(f); }

nlohmann::json Timing::to_json(double total) const {
  return {{"total", total}, {"data_wait", data}, {"compute", compute}, {"communication", comm},
          {"idle", idle},   {"evaluation", eval}, {"checkpoint", checkpoint}};
}

Timing Timing::from_json(const nlohmann::json& t) {
  Timing r;
  r.data = t.value("data_wait", 0.0);
  r.compute = t.value("compute", 0.0);
  r.comm = t.value("communication", 0.0);
  r.idle = t.value("idle", 0.0);
  r.eval = t.value("evaluation", 0.0);
  r.checkpoint = t.value("checkpoint", 0.0);
  return r;
}

// ---------------------------------------------------------------- set-up
torch::Device choose_device(const std::string& device, const dist::Comm& local) {
  if (device == "cpu") return torch::kCPU;
  if (device != "cuda" && device != "auto") {
    throw ConfigError("--device: unknown value '" + device + "' (expected auto, cpu or cuda)");
  }
  const bool have = torch::cuda::is_available();
  if (device == "cuda" && !have) {
    throw ConfigError("--device cuda: libtorch sees no usable CUDA device (" +
                      std::string(torch_built_with_cuda() ? "none visible" : "this libtorch was built without CUDA") + ")");
  }
  if (!have) return torch::kCPU;
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local.rank() % static_cast<int>(torch::cuda::device_count())));
}

namespace {

using dist::collective_step;

void check_options(const TrainOptions& opt) {
  if (opt.epochs < 1) throw ConfigError("--epochs must be at least 1");
  if (opt.batch < 1 || opt.batch > (std::int64_t{1} << 31))
    throw ConfigError("--batch " + std::to_string(opt.batch) + ": expected 1 .. 2147483648 (a fold's training samples at most are used)");
  if (opt.threads < 1 || opt.threads > kMaxLoaderThreads)
    throw ConfigError("--threads " + std::to_string(opt.threads) + ": expected 1 .. " + std::to_string(kMaxLoaderThreads) + " loader threads per rank");
  if (opt.prefetch < 1 || opt.prefetch > kMaxPrefetch)
    throw ConfigError("--prefetch " + std::to_string(opt.prefetch) + ": expected 1 .. " + std::to_string(kMaxPrefetch) + " batches per rank");
  if (!(opt.lr > 0) || !std::isfinite(opt.lr)) throw ConfigError("--lr must be a positive finite number");
  if (!(opt.weight_decay >= 0) || !std::isfinite(opt.weight_decay)) throw ConfigError("--weight-decay must be a finite number >= 0");
  if (opt.optimizer != "adam" && opt.optimizer != "adamw" && opt.optimizer != "sgd")
    throw ConfigError("--optimizer: unknown '" + opt.optimizer + "' (expected adam, adamw or sgd)");
  check_schedule_options(opt);
  if (opt.class_weights != "none" && opt.class_weights != "balanced")
    throw ConfigError("--class-weights: unknown '" + opt.class_weights + "' (expected none or balanced)");
  if (!(opt.label_smoothing >= 0 && opt.label_smoothing < 1))
    throw ConfigError("--label-smoothing " + std::to_string(opt.label_smoothing) + ": expected a number in [0, 1)");
  if (opt.checkpoint_every < 0) throw ConfigError("--checkpoint-every must be >= 0");
  if (opt.loader != "auto" && opt.loader != "ring" && opt.loader != "resident") {
    throw ConfigError("--loader: unknown value '" + opt.loader + "' (expected auto, ring or resident)");
  }
  if (opt.out.empty()) throw ConfigError("--out is required");
}

/// Opens the cache and the folds file and checks that they belong together (StaleError otherwise).
void open_inputs(Job& job) {
  const auto& opt = job.opt;
  job.cache.emplace(cache::CacheReader::open(opt.cache));
  // a stale cache is refused (rank 0 looks, once for the job; the step ends every rank with its error)
  if (job.root) cache::require_current_sources(*job.cache, &job.log);
  job.folds = folds::load_folds(opt.folds);
  job.table = job.cache->read_sample_table();
  job.provenance = {{"data_checksum", job.cache->data_checksum()}, {"folds_fingerprint", job.folds.fingerprint}, {"n_folds", job.folds.k}};
  if (!job.cache->manifest_seal().empty()) job.provenance["manifest_xxh3"] = job.cache->manifest_seal();
  if (job.root)
    job.preprocessing = {{"format", "hsipipe-preprocessing"}, {"version", 1}, {"cache", opt.cache},
                         {"manifest", job.cache->manifest()}, {"wavelengths", job.cache->wavelengths()},
                         {"run", run_identity(opt.identity(), job.provenance)}};
  if (job.folds.n_samples != job.cache->n_samples()) {
    throw StaleError("folds file " + opt.folds + " was made for a cache of " + std::to_string(job.folds.n_samples) +
                     " samples, but cache " + opt.cache + " has " + std::to_string(job.cache->n_samples()) +
                     (job.folds.data_checksum.empty() ? std::string()
                                                      : " (data_checksum " + job.folds.data_checksum + " vs " + job.cache->data_checksum() + ")") +
                     ": make the folds again with hsipipe folds");
  }
  std::vector<folds::SceneSize> sizes;
  for (const auto& s : job.table.scenes) sizes.push_back({s.rows, s.cols});
  folds::SampleTableView view{job.table.scene, job.table.row, job.table.col, job.table.label, sizes, job.cache->patch()};
  folds::require_folds_match(job.folds, view, job.cache->data_checksum(),
                             "folds file " + opt.folds + " does not belong to cache " + opt.cache);
}

/// The model against the cache, the classes, and the folds this job trains.
void choose_model_and_folds(Job& job) {
  const auto& opt = job.opt;
  job.info = &model_info(opt.model);
  job.bands = job.cache->n_bands();
  const cache::Layout layout = job.cache->layout();
  const int cache_patch = layout == cache::Layout::pixel ? 1 : job.cache->patch();
  check_model_fits(opt.model, layout, cache_patch, job.bands);
  job.patch = job.info->spatial ? cache_patch : 1;

  std::vector<std::int32_t> values;
  if (job.cache->manifest().contains("label_values")) values = job.cache->manifest()["label_values"].get<std::vector<std::int32_t>>();
  else values = job.folds.classes;
  job.classes = ClassIndex(values);
  if (job.classes.size() < 2) throw ConfigError("cache " + opt.cache + ": fewer than 2 classes (manifest label_values)");
  if (!opt.model_sha256.empty()) check_torchscript(opt.model, job.bands, job.patch, job.classes.size());

  if (opt.fold == "all") {
    for (int f = 0; f < job.folds.k; ++f) job.fold_list.push_back(f);
    return;
  }
  int f = -1;
  try {
    std::size_t used = 0;
    f = std::stoi(opt.fold, &used);
    if (used != opt.fold.size()) f = -1;
  } catch (...) {
    f = -1;
  }
  if (f < 0 || f >= job.folds.k) {
    throw ConfigError("--fold: expected 'all' or an index in [0, " + std::to_string(job.folds.k - 1) + "] (folds file " +
                      opt.folds + " has k = " + std::to_string(job.folds.k) + "), got '" + opt.fold + "'");
  }
  job.fold_list.push_back(f);
}

/// A fold without validation samples would train and report metrics over nothing.
void require_validation(const Job& job) {
  for (int f : job.fold_list) {
    if (job.folds.val_ids(f).empty()) {
      throw ConfigError("fold " + std::to_string(f) + " of " + job.opt.folds +
                        " has no validation samples: its metrics would describe nothing (a hand-made or foreign folds file?)");
    }
  }
}

/// Rank 0: a TorchScript network's file goes into the run as RUN/model.pt (atomically), so that predict and
/// export rebuild the network from the run alone; one already there holds the same bytes (the run identity
/// compared their SHA-256) or is replaced with the whole run (--force).
void keep_model_file(const Job& job) {
  if (job.opt.model_sha256.empty()) return;
  const std::string dst = job.opt.out + "/model.pt";
  std::error_code ec;
  if (std::filesystem::exists(dst, ec) && model_file_sha256(dst) == job.opt.model_sha256) return;
  fs::write_text_atomic(dst, fs::read_text(job.opt.model, std::uint64_t{1} << 34));
}

/// Rank 0: RUN is no cache's folder (train --out CACHE put a run inside the cache, which stage then copied); the
/// folds this job trains are locked (RUN/fold-I.lock, naming the holder: a second train --resume or --force into a
/// fold that a live train writes is refused, where it once appended duplicate epochs); and a run that exists was
/// trained with this job's options and on its data (RUN/preprocessing.json "run"), unless --force replaces all of
/// its folds. The locks go when the job ends (a killed holder's lock file is taken over by the next train).
void claim_run_dir(Job& job) {
  const auto& opt = job.opt;
  if (const auto owner = outputs::owner_of(opt.out); owner && owner->kind == outputs::Owner::Kind::cache)
    throw ConfigError("--out " + opt.out + ": lies in the cache " + owner->dir + " (a cache's folder holds its own files only): choose a run folder of its own");
  job.run_lock.made.make(opt.out);
  for (int f : job.fold_list) {
    const std::string lock = opt.out + "/fold-" + std::to_string(f) + ".lock";
    job.run_lock.locks.push_back(std::make_unique<cache::LockFile>(
        lock, cache::LockFile::Mode::build, "another hsipipe train is training fold " + std::to_string(f) + " of this run now"));
  }
  const std::string path = opt.out + "/preprocessing.json";
  if (!std::filesystem::exists(path)) return keep_model_file(job);
  const std::string text = fs::read_text(path);
  check_seal(text, "record_xxh3", path);
  nlohmann::json have;
  try {
    have = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw FormatError(path, "json", e.what());
  }
  if (!have.contains("run")) return keep_model_file(job);  // a run before run identities: checkpoints are compared one by one
  const auto d = identity_difference(job.preprocessing.at("run"), have["run"]);
  if (!d) return keep_model_file(job);
  if (opt.force && static_cast<int>(job.fold_list.size()) == job.folds.k) {
    job.log << "--force: every fold of " << opt.out << " is trained again, with this train's options and inputs\n";
    return keep_model_file(job);
  }
  if (d->field.rfind("config.", 0) != 0) {  // the data: another cache or folds file, exit 5 as --resume's check
    const bool folds_file = d->field == "folds_fingerprint" || d->field == "n_folds";
    throw StaleError("--out " + opt.out + ": the run's folds were trained with " + d->field + " " + d->want.dump() + ", but " +
                     (folds_file ? "folds file " + opt.folds : "cache " + opt.cache) + " has " + d->have.dump() + " (" + path +
                     " run." + d->field + "): a run's folds share their inputs; choose another --out, or --force with --fold all "
                     "to train the whole run again");
  }
  const bool option = d->field.rfind("config.", 0) == 0;
  std::string name = option ? d->field.substr(7) : d->field;
  if (option) std::replace(name.begin(), name.end(), '_', '-');
  if (name == "model-sha256") name = "model (the TorchScript file's SHA-256)";
  const std::string what = option                            ? "--" + name
                           : d->field == "folds_fingerprint" || d->field == "n_folds" ? "the folds file " + opt.folds + " (" + d->field + ")"
                                                                                      : "the cache " + opt.cache + " (" + d->field + ")";
  throw ConfigError("--out " + opt.out + ": " + what + " is " + d->have.dump() + " here, but the run's folds were trained with " +
                    d->want.dump() + " (" + path + " run." + d->field + "): a run's folds share their options and inputs; " +
                    "choose another --out, or --force with --fold all to train the whole run again");
}

/// Rank 0: the fold directories this job writes. One that holds an earlier run's files is refused without
/// --resume (it would be overwritten piecemeal), or removed first with --force. They are made when their
/// fold starts (FoldRun), so a refused or failed job leaves no empty fold-I/ behind.
void prepare_run_dir(const Job& job) {
  const auto& opt = job.opt;
  for (int f : job.fold_list) {
    const std::string dir = fold_dir(opt.out, f);
    const bool used = std::filesystem::is_directory(dir) && !std::filesystem::is_empty(dir);
    if (used && !opt.resume) {
      if (!opt.force) {
        throw ConfigError("--out " + opt.out + ": " + dir + " holds the files of an earlier run (" +
                          (std::filesystem::exists(dir + "/metrics.json") ? "finished" : "unfinished") +
                          "): --resume continues it, --force replaces it, or choose another --out");
      }
      std::filesystem::remove_all(dir);
      job.log << "--force: removed " << dir << " (an earlier run's fold " << f << ")\n";
    }
  }
}

/// auto: the device-resident batches on a GPU when the shard takes at most half of its free memory
/// (the step's own needs stay far below the rest: `hsipipe plan`) and the shard is held in host memory, the
/// host ring otherwise (a streamed shard's producers page in what each batch needs).
std::unique_ptr<BatchSource> make_batches(const Job& job, const LoaderOptions& lopt) {
  std::string kind = job.opt.loader;
  if (kind == "auto") {
    kind = "ring";
    if (job.device.is_cuda() && !job.shard->streamed()) {
      const auto free = cuda_free_memory(job.device.index());
      if (free && resident_bytes(*job.shard) <= *free / 2) kind = "resident";
    }
  }
  if (kind == "resident") return std::make_unique<ResidentBatches>(*job.shard, job.class_of, lopt);
  return std::make_unique<BatchLoader>(*job.shard, job.class_of, lopt);
}

/// --model FILE: every rank reads the file's SHA-256 (the run identity holds it, not the path) and agrees with
/// rank 0 (a node whose copy differs would train another network); the schedule's horizon is resolved.
void resolve_model_file(Job& job) {
  if (job.opt.schedule != "none" && job.opt.schedule_epochs == 0) job.opt.schedule_epochs = job.opt.epochs;
  if (!names_model_file(job.opt.model)) {
    (void)model_info(job.opt.model);  // an unknown name, or a file that is not there
    return;
  }
  job.opt.model_sha256 = model_file_sha256(job.opt.model);
}

/// COLLECTIVE: the TorchScript file is the same on every rank.
void check_same_model_file(const Job& job) {
  if (job.opt.model_sha256.empty() && job.world.size() == 1) return;
  const std::string root_sha = job.world.bcast_string(job.opt.model_sha256);
  collective_step(job.world, "comparing --model across ranks", [&] {
    if (root_sha != job.opt.model_sha256)
      throw ConfigError("--model " + job.opt.model + ": rank " + std::to_string(job.rank) + " reads a file of SHA-256 " +
                        job.opt.model_sha256 + ", rank 0 one of " + root_sha + ": every node must see the same network file");
  });
}

}  // namespace

void set_up(Job& job) {
  collective_step(job.world, "train set-up", [&] {
    const auto& opt = job.opt;
    check_options(opt);
    resolve_model_file(job);
    job.precision = precision_from_name(opt.precision);
    job.augment = parse_augment(opt.augment);
    job.device = choose_device(opt.device, *job.local);
    job.backend = dist::choose_backend(opt.backend, job.device.is_cuda());
    if (job.precision == Precision::bf16 && !job.device.is_cuda() && job.root) {
      // CPU bf16 autocast exists in libtorch >= 1.10; it is slow without AVX512-BF16 but correct.
      job.log << "note: --precision bf16 on CPU runs libtorch's CPU autocast (bf16 matmul/conv, fp32 master weights)\n";
    }
    open_inputs(job);
    choose_model_and_folds(job);
    require_validation(job);
    if (job.root) {
      claim_run_dir(job);
      prepare_run_dir(job);
    }
  });
  check_same_model_file(job);
  const std::size_t threads = dist::compute_threads(*job.local);  // COLLECTIVE (local)
  if (!std::getenv("OMP_NUM_THREADS")) torch::set_num_threads(static_cast<int>(threads));
  if (job.root && !job.device.is_cuda()) job.log << reference_blas_note();
  const std::size_t cpus = fs::cpus_available();
  if (job.root && job.opt.threads > 0 && cpus < static_cast<std::size_t>(job.opt.threads) + 1 && cpus < std::thread::hardware_concurrency())
    job.log << "note: rank 0 may run on " << cpus << " of this node's " << std::thread::hardware_concurrency()
            << " CPUs (the launcher bound it: mpiexec binds 1-2 ranks to a core each unless --bind-to none or --map-by slot:PE=N), "
            << "shared by its " << job.opt.threads << " loader threads and the training thread\n";
  if (job.opt.deterministic) at::globalContext().setDeterministicAlgorithms(true, false);
  configure_cudnn(job.device, job.opt.deterministic);
}

namespace {
/// COLLECTIVE. The samples the ranks read are the ones decode wrote: their hashes (computed while loading)
/// give the manifest's data_checksum, or the cache was altered after decode (a flipped byte that only
/// `hsipipe verify` would have found). Every layout: pixel and patch shards hash their samples, cube shards
/// the cube rows they own (Shard::item_hashes).
void check_samples(const Job& job) {
  const auto all = job.world.allgatherv(job.shard->item_hashes());
  dist::collective_step(job.world, "checking the samples against data_checksum", [&] {
    if (!job.root) return;
    const std::string have = cache::data_checksum_of(all, job.table), want = job.cache->data_checksum();
    if (have != want) {
      throw FormatError(job.opt.cache, "data_checksum",
                        "is " + want + " but the samples, labels and coordinates read give " + have +
                            ": the cache changed after decode (hsipipe verify " + job.opt.cache +
                            " names what differs; hsipipe decode --force rebuilds it)");
    }
  });
}
}  // namespace

namespace {
/// What this rank's host memory must hold besides its shard (train/host_memory.hpp): the ring of --prefetch
/// per-rank batches, the streaming window (stored_item_bytes per sample in flight), and on CPU the model's planned memory at the per-rank batch.
HostMemoryRequest host_request(const Job& job) {
  HostMemoryRequest r;
  const auto& opt = job.opt;
  r.local_ranks = job.local->size();
  r.budget_given = opt.host_memory_mb >= 0;
  r.budget = r.budget_given ? static_cast<std::uint64_t>(opt.host_memory_mb) << 20 : fs::memory_available() / static_cast<std::uint64_t>(r.local_ranks);
  r.shard_limit_mb = opt.shard_memory_mb;
  r.batch_per_rank = (opt.batch + job.R - 1) / job.R;
  r.prefetch = opt.prefetch;
  const auto B = static_cast<std::uint64_t>(job.bands), p = static_cast<std::uint64_t>(job.patch);
  r.sample_floats = B * p * p;
  const auto layout = job.cache->layout();
  r.stored_item_bytes = stored_item_bytes(cache::layout_name(layout), B, layout == cache::Layout::patch ? static_cast<std::uint64_t>(job.cache->patch()) : 1,
                                          p, dtype_size(job.cache->dtype()));
  if (job.device.is_cuda()) {
    r.model_note = "the model is on the device";
  } else if (names_model_file(opt.model)) {
    r.model_note = "a TorchScript model is not planned";
  } else {
    PlanRequest pr;
    pr.model = opt.model;
    pr.bands = job.bands;
    pr.patch = job.patch;
    pr.batch = static_cast<int>(opt.batch);
    pr.classes = job.classes_n();
    pr.precision = opt.precision;
    pr.optimizer = opt.optimizer == "sgd" ? "sgd" : "adam";
    pr.ranks = job.R;
    r.model = make_plan(pr).total;
  }
  return r;
}
}  // namespace

/// COLLECTIVE. Splits the host memory (refusing a job that cannot fit even streaming, before any reading),
/// then loads the shard: read into memory within the limit, streamed from the cache file past it. Returns the
/// seconds loading took.
double load_shard(Job& job) {
  collective_step(job.world, "planning host memory", [&] { job.host = plan_host_memory(host_request(job)); });
  if (job.root) {  // before the load: a job the kernel ends while loading has said what it planned
    job.log << host_memory_text(job.host) << " (rank 0)\n";
    if (const std::string w = shard_limit_warning(job.host); !w.empty()) job.log << w << "\n";
    job.log << std::flush;
  }
  const double t0 = now_s();
  collective_step(job.world, "loading the shard",
                  [&] { job.shard.emplace(cache::Shard::load(*job.cache, job.range, job.patch, job.host.shard_limit)); });
  const double t = now_s() - t0;
  job.bytes_per_rank = job.world.allgatherv(std::vector<std::uint64_t>{job.shard->bytes_read()});
  const auto streamed = job.world.allgatherv(std::vector<std::uint64_t>{job.shard->streamed() ? job.shard->shard_bytes() : 0});
  if (job.root) {
    for (std::size_t r = 0; r < streamed.size(); ++r)
      if (streamed[r])
        job.log << "rank " << r << ": shard streamed from the cache file (" << format_bytes(streamed[r])
                << " > its shard limit): mapped, paged in as the batches need it\n";
  }
  return t;
}

void load_inputs(Job& job) {
  const std::uint64_t N = job.cache->n_samples();
  job.range = split_range(N, job.R, job.rank);
  const double t_load = load_shard(job);
  check_samples(job);
  job.class_of.assign(job.range.size(), -1);
  for (std::uint64_t i = job.range.begin; i < job.range.end; ++i) {
    const std::int32_t lab = job.table.label[i];
    if (lab >= 0 && job.classes.contains(lab)) job.class_of[i - job.range.begin] = job.classes.index(lab);
  }
  LoaderOptions lopt;
  lopt.threads = job.opt.threads;
  lopt.prefetch = job.opt.prefetch;
  lopt.augment = job.augment;
  lopt.device = job.device;
  collective_step(job.world, "preparing the batches", [&] { job.batches = make_batches(job, lopt); });
  job.clock = std::make_unique<PhaseClock>(job.device);
  job.comm = dist::make_communicator(job.backend, job.world);  // COLLECTIVE

  job.run.config = job.opt.identity();
  job.run.cache_dir = job.opt.cache;
  job.run.cache_checksum = job.cache->data_checksum();
  job.run.folds_fingerprint = job.folds.fingerprint;
  job.run.n_folds = job.folds.k;
  job.io = {{"cache_bytes_read_per_rank", job.bytes_per_rank},
            {"shard_loads", 1},
            {"scene_bytes_decoded", 0},
            {"ranks", job.R},
            {"shard_load_seconds", t_load},
            {"sample_hash_seconds_per_rank", job.world.allgatherv(std::vector<double>{job.shard->hash_seconds()})},
            {"batches", job.batches->kind()},
            {"host_memory", to_json(job.host)},
            {"shard_bytes_per_rank", job.world.allgatherv(std::vector<std::uint64_t>{job.shard->shard_bytes()})},
            {"shard_streamed_per_rank", job.world.allgatherv(std::vector<std::uint64_t>{job.shard->streamed() ? 1u : 0u})}};
  if (!job.root) return;
  const auto& opt = job.opt;
  job.log << "hsipipe train: " << opt.model << " on " << opt.cache << " (" << N << " samples, " << job.bands << " bands, patch "
          << job.patch << "), " << job.R << " rank(s), device " << job.device.str() << ", backend "
          << dist::backend_name(job.backend) << ", precision " << precision_name(job.precision) << ", batches "
          << job.batches->kind() << ", folds " << (opt.fold == "all" ? "all" : opt.fold) << " of " << job.folds.k << "\n"
          << "shard loaded once in " << std::fixed << std::setprecision(2) << t_load << " s: cache bytes read per rank [";
  for (std::size_t r = 0; r < job.bytes_per_rank.size(); ++r) job.log << (r ? ", " : "") << job.bytes_per_rank[r];
  job.log << "], nothing decoded\n" << std::flush;
}

void write_preprocessing(const Job& job) {
  const std::string path = job.opt.out + "/preprocessing.json", text = seal_json(job.preprocessing, "record_xxh3", 1);
  std::ifstream in(path, std::ios::binary);
  if (in && std::string(std::istreambuf_iterator<char>(in), {}) == text) return;
  fs::write_text_atomic(path, text);
}

namespace {

// summary.json/md are a pure function of the fold-*/metrics.json files (summarize_run, the same call as
// `hsipipe report`), so `--fold all` and `--fold I` tasks + report give identical summaries and rerunning
// report over a --fold all run changes nothing. The I/O figures of this job (one shard load for all its
// folds) go to RUN_DIR/io.json beside them; each fold's metrics.json also keeps them under train.io.
void write_summary(Job& job, const nlohmann::json& fold_wall, double setup_s) {
  const auto streamed = job.world.allgatherv(std::vector<std::uint64_t>{job.shard->streamed_bytes()});
  collective_step(job.world, "writing the summary", [&] {
    if (!job.root) return;
    const auto& opt = job.opt;
    if (opt.fold != "all") {
      job.log << "fold " << opt.fold << " done; when every fold is, `hsipipe report " << opt.out << "` writes the summary\n";
      return;
    }
    nlohmann::json io_all = job.io;
    io_all["folds"] = static_cast<int>(job.fold_list.size());
    io_all["setup_seconds"] = setup_s;  // from train() entry to the first fold (shard load included)
    io_all["fold_wall_seconds"] = fold_wall;
    io_all["streamed_bytes_read_per_rank"] = streamed;
    fs::write_text_atomic(opt.out + "/io.json", io_all.dump(2) + "\n");
    const nlohmann::json summary = summarize_run(opt.out);  // writes summary.json and summary.md
    job.log << summary_markdown(summary) << "cache bytes read per rank: ";
    for (std::size_t r = 0; r < job.bytes_per_rank.size(); ++r) job.log << (r ? ", " : "") << job.bytes_per_rank[r];
    job.log << " (one shard each, loaded once)";
    if (std::any_of(streamed.begin(), streamed.end(), [](std::uint64_t b) { return b > 0; })) {
      job.log << "; streamed from the cache file per rank: ";
      for (std::size_t r = 0; r < streamed.size(); ++r) job.log << (r ? ", " : "") << format_bytes(streamed[r]);
    }
    job.log << "; nothing decoded\n" << std::flush;
  });
}

}  // namespace
}  // namespace detail

nlohmann::json TrainOptions::identity() const {
  nlohmann::json j = {{"model", model_sha256.empty() ? model : std::string(kTorchScriptModel)},
                      {"epochs", epochs},       {"batch", batch},
                      {"lr", lr},               {"optimizer", optimizer}, {"weight_decay", weight_decay},
                      {"seed", seed},           {"augment", augment},     {"deterministic", deterministic},
                      {"precision", precision}};
  // the recipe's options are recorded when they differ from the defaults, so a run trained before they
  // existed keeps its identity (absent: none, 0)
  if (!model_sha256.empty()) j["model_sha256"] = model_sha256;
  if (schedule != "none") {
    j["schedule"] = schedule;
    j["schedule_epochs"] = schedule_epochs > 0 ? schedule_epochs : epochs;
  }
  if (warmup_epochs > 0) j["warmup_epochs"] = warmup_epochs;
  if (class_weights != "none") j["class_weights"] = class_weights;
  if (label_smoothing != 0.0) j["label_smoothing"] = label_smoothing;
  return j;
}

int train(const TrainOptions& opt, const dist::Comm& world, std::ostream& log) {
  detail::Job job(opt, world, log);
  job.t0 = detail::now_s();
  const dist::Comm local = world.split_shared();  // COLLECTIVE
  job.local = &local;
  detail::set_up(job);
  detail::load_inputs(job);

  // SIGTERM/SIGUSR1 set the preemption flag from here to the end of the process (core/signals.hpp); `hsipipe
  // train` installed the handler in main already, so a signal received before this point still counts.
  install_preempt_handlers();
  // Wall time of each fold trained here (rank 0: model, epochs, validation, results), for io.json: what a
  // job spends beyond its folds is then visible (set-up before the first fold, the summary after the last).
  nlohmann::json fold_wall = nlohmann::json::array();
  const double setup_s = detail::now_s() - job.t0;
  for (const int f : job.fold_list) {
    detail::FoldRun fold(job, f);
    if (fold.run(fold_wall) == kExitPreempted) return kExitPreempted;
  }
  detail::write_summary(job, fold_wall, setup_s);
  job.comm->barrier();
  return 0;
}

}  // namespace hsipipe::train

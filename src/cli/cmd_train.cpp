// hsipipe train: phase two. Data-parallel training of one model over the folds of a cache, one rank
// per process under mpiexec (CPU: MPI allreduce; GPU: NCCL, one rank per device). The work is in
// train/trainer.hpp; this file parses the options, starts MPI (MPI_THREAD_FUNNELED: loader threads
// never call MPI) and maps the outcome to an exit code:
//   0 trained; 2 bad option / model-cache mismatch; 5 folds file for another cache (StaleError);
//   75 stopped by SIGTERM/SIGUSR1 after writing a checkpoint (requeue, then --resume).
#include <iostream>

#include "cli/collective_errors.hpp"
#include "cli/command.hpp"
#include "core/error.hpp"
#include "dist/mpi.hpp"
#include "train/host_memory.hpp"
#include "train/models.hpp"
#include "train/trainer.hpp"

namespace hsipipe::cli {
namespace {

/// The options of the command line (or INI file), as train() takes them; train() validates them.
train::TrainOptions train_options(const po::variables_map& vm) {
  train::TrainOptions o;
  o.cache = vm["cache"].as<std::string>();
  o.folds = vm["folds"].as<std::string>();
  o.model = vm["model"].as<std::string>();
  o.out = vm["out"].as<std::string>();
  o.fold = vm["fold"].as<std::string>();
  o.epochs = vm["epochs"].as<int>();
  o.batch = vm["batch"].as<std::int64_t>();
  o.lr = vm["lr"].as<double>();
  o.optimizer = vm["optimizer"].as<std::string>();
  o.weight_decay = vm["weight-decay"].as<double>();
  o.seed = vm["seed"].as<std::uint64_t>();
  o.device = vm["device"].as<std::string>();
  o.backend = vm["backend"].as<std::string>();
  o.threads = vm["threads"].as<int>();
  o.prefetch = vm["prefetch"].as<int>();
  o.loader = vm["loader"].as<std::string>();
  o.host_memory_mb = train::parse_memory_mb(vm["host-memory-mb"].as<std::string>(), "--host-memory-mb", 1);
  o.shard_memory_mb = train::parse_memory_mb(vm["shard-memory-mb"].as<std::string>(), "--shard-memory-mb", 0);
  o.augment = vm["augment"].as<std::string>();
  o.deterministic = vm["deterministic"].as<bool>();
  o.checkpoint_every = vm["checkpoint-every"].as<int>();
  o.resume = vm["resume"].as<bool>();
  o.force = vm["force"].as<bool>();
  o.precision = vm["precision"].as<std::string>();
  o.log_epochs = !vm["quiet"].as<bool>();
  o.schedule = vm["schedule"].as<std::string>();
  o.warmup_epochs = vm["warmup-epochs"].as<int>();
  o.schedule_epochs = vm["schedule-epochs"].as<int>();
  o.class_weights = vm["class-weights"].as<std::string>();
  o.label_smoothing = vm["label-smoothing"].as<double>();
  return o;

}

int run_train(int argc, char** argv) {
  train::TrainOptions d;
  po::options_description desc("train options");
  desc.add_options()
      ("cache", po::value<std::string>(), "cache directory (hsipipe decode)")
      ("folds", po::value<std::string>(), "folds file of that cache (hsipipe folds)")
      ("model", po::value<std::string>(), (train::model_names(" | ") + " (or a TorchScript file: docs/BYO_NETWORK.md)").c_str())
      ("fold", po::value<std::string>()->default_value("all"), "all (the k folds in one job, shard loaded once) or an index I")
      ("out", po::value<std::string>(), "run directory: fold-I/ results, summary.json/md")
      ("epochs", po::value<int>()->default_value(d.epochs), "training epochs per fold")
      ("batch", po::value<std::int64_t>()->default_value(d.batch), "GLOBAL batch size, split over the ranks")
      ("lr", po::value<double>()->default_value(d.lr), "learning rate")
      ("optimizer", po::value<std::string>()->default_value(d.optimizer), "adam | adamw (decoupled weight decay) | sgd (momentum 0.9)")
      ("weight-decay", po::value<double>()->default_value(d.weight_decay), "weight decay (L2 for adam and sgd, decoupled for adamw)")
      ("schedule", po::value<std::string>()->default_value(d.schedule), "learning rate per epoch: none | step (x0.1 at 1/2 and 3/4 of the horizon) | cosine")
      ("warmup-epochs", po::value<int>()->default_value(d.warmup_epochs), "linear warm-up of the learning rate over the first N epochs")
      ("schedule-epochs", po::value<int>()->default_value(d.schedule_epochs),
       "the schedule's horizon in epochs (0: --epochs); give the first start's value to extend a run with --resume --epochs N")
      ("class-weights", po::value<std::string>()->default_value(d.class_weights), "none | balanced (inverse class frequency of the fold's training samples)")
      ("label-smoothing", po::value<double>()->default_value(d.label_smoothing), "cross-entropy label smoothing in [0, 1)")
      ("seed", po::value<std::uint64_t>()->default_value(d.seed), "seed of initialisation, shuffling, augmentation")
      ("device", po::value<std::string>()->default_value(d.device), "auto | cpu | cuda (one GPU per rank: local rank)")
      ("backend", po::value<std::string>()->default_value(d.backend), "auto | nccl | mpi (auto: nccl on cuda when built with NCCL)")
      ("threads", po::value<int>()->default_value(d.threads), "loader producer threads per rank")
      ("prefetch", po::value<int>()->default_value(d.prefetch), "prepared batches in the loader's ring per rank")
      ("loader", po::value<std::string>()->default_value(d.loader),
       "auto | ring | resident: where batches are cut. ring: producer threads on the host (--threads, --prefetch); "
       "resident: the shard is copied to the device once and each batch is cut there by one gather, flips and "
       "rotations included (same values as ring). auto: resident on a GPU when the shard takes at most half of its "
       "free memory, ring otherwise")
      ("host-memory-mb", po::value<std::string>()->default_value("auto"),
       "host memory per rank in MiB (auto: the node's available memory, cgroup limits included, / its ranks); "
       "a job whose ring, streaming window and model do not fit is refused before any work")
      ("shard-memory-mb", po::value<std::string>()->default_value("auto"),
       "largest shard read into memory, MiB (auto: the host memory left after the ring, the streaming window and "
       "the model); a larger shard is streamed from the cache file with the same batches (0: always stream)")
      ("augment", po::value<std::string>()->default_value(d.augment), "flip,rot90 | flip | rot90 | none (patches only)")
      ("deterministic", po::bool_switch(), "deterministic algorithms (CPU: interrupted + resumed == uninterrupted)")
      ("checkpoint-every", po::value<int>()->default_value(d.checkpoint_every), "checkpoint every N epochs (0: only on SIGTERM/SIGUSR1)")
      ("resume", po::bool_switch(), "continue from RUN_DIR/fold-I/checkpoint.pt (same cache, folds file and options); skip folds with results")
      ("force", po::bool_switch(), "replace an earlier run's fold-I/ at --out (refused without --resume or --force)")
      ("precision", po::value<std::string>()->default_value(d.precision), "fp32 | bf16 (autocast, fp32 master weights)")
      ("quiet", po::bool_switch(), "no per-epoch log line");
  const Parsed a = parse(argc, argv, "train",
                         "--cache DIR --folds FOLDS.json --model NAME --fold all|I --out RUN_DIR [options]\n"
                         "       (under mpiexec -n R for R data-parallel ranks; exit 75 = checkpointed on a signal, requeue with --resume)",
                         desc);
  if (a.help) return 0;
  const auto& vm = a.vm;
  for (const char* req : {"cache", "folds", "model", "out"}) {
    if (!vm.count(req)) throw ConfigError(std::string("hsipipe train: --") + req + " is required");
  }
  const train::TrainOptions o = train_options(vm);

  dist::Environment env(&argc, &argv);
  const dist::Comm world(MPI_COMM_WORLD);
  return run_reporting_errors("train", world, [&] { return train::train(o, world, std::cout); });
}

}  // namespace

HSIPIPE_COMMAND("train", "data-parallel training of a model over the k folds of a cache (MPI/NCCL)", run_train);

}  // namespace hsipipe::cli

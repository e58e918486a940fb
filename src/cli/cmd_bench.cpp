// hsipipe bench: measures the batch loader alone (samples/s delivered to a consumer that only touches
// each batch) on a cache, and this machine's memory-copy bandwidth, so scripts/bench_loader.sh can
// print the loader's rate as a fraction of the bandwidth bound. Single process, no MPI.
#include <chrono>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <limits>
#include <numeric>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/cache.hpp"
#include "cli/command.hpp"
#include "core/error.hpp"
#include "folds/rng.hpp"
#include "train/loader.hpp"

namespace hsipipe::cli {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Copy bandwidth of a large memcpy, counted as bytes read + bytes written per second (best of 5).
double memcpy_bandwidth(std::size_t mib) {
  const std::size_t n = mib << 20;
  std::vector<char> a(n, 1), b(n, 0);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(b.data(), a.data(), n);
    const double s = seconds_since(t0);
    best = std::max(best, 2.0 * static_cast<double>(n) / s);
    a[static_cast<std::size_t>(rep)] = b[n - 1 - static_cast<std::size_t>(rep)];  // keep both buffers live
  }
  return best;
}

// Batches of random labeled ids, `total` of them (fixed seed: every run times the same work).
std::vector<std::vector<std::uint64_t>> random_plan(const std::vector<std::uint64_t>& ids, int total, int batch) {
  folds::SplitMix64 rng(12345);
  std::vector<std::vector<std::uint64_t>> plan(static_cast<std::size_t>(total));
  for (auto& b : plan) {
    b.resize(static_cast<std::size_t>(batch));
    for (auto& id : b) id = ids[rng.bounded(ids.size())];
  }
  return plan;
}

// --cache: loads the whole cache as one shard, then times the loader over random batches into `out`.
void bench_loader(const po::variables_map& vm, nlohmann::json& out) {
  const int threads = vm["threads"].as<int>(), batch = vm["batch"].as<int>(), batches = vm["batches"].as<int>();
  if (threads < 1 || batch < 1 || batches < 1) throw ConfigError("bench: --threads, --batch and --batches must be >= 1");
  const auto cache = cache::CacheReader::open(vm["cache"].as<std::string>());
  const Range all{0, cache.n_samples()};
  const auto t_load = std::chrono::steady_clock::now();
  const std::int64_t limit_mb = vm["shard-memory-mb"].as<std::int64_t>();
  const auto shard = cache::Shard::load(cache, all, vm["patch"].as<int>(),
                                        limit_mb < 0 ? std::numeric_limits<std::uint64_t>::max() : static_cast<std::uint64_t>(limit_mb) << 20);
  const double load_s = seconds_since(t_load);
  const auto table = cache.read_sample_table();
  std::vector<std::int64_t> class_of(all.size(), 0);
  std::vector<std::uint64_t> ids;
  for (std::uint64_t i = 0; i < all.size(); ++i) {
    if (table.label[i] >= 0) ids.push_back(i);
    else class_of[i] = -1;
  }
  if (ids.empty()) throw ConfigError(vm["cache"].as<std::string>() + ": no labeled samples to load");
  const int total = batches + 20;
  auto plan = random_plan(ids, total, batch);
  train::LoaderOptions lopt;
  lopt.threads = threads;
  lopt.prefetch = vm["prefetch"].as<int>();
  train::BatchLoader loader(shard, class_of, lopt);
  loader.start(std::move(plan), 7, false);
  double touched = 0;
  std::chrono::steady_clock::time_point t0;
  for (int i = 0; i < total; ++i) {
    if (i == 20) t0 = std::chrono::steady_clock::now();
    auto b = loader.next();
    if (!b) throw Error("bench: loader ended early at batch " + std::to_string(i));
    const float* x = b->x.data_ptr<float>();
    const std::size_t n = static_cast<std::size_t>(b->x.numel());
    for (std::size_t j = 0; j < n; j += 1024) touched += x[j];  // touch every 4 KiB page
  }
  const double s = seconds_since(t0);
  const double per_sample_in = static_cast<double>(shard.sample_floats()) * static_cast<double>(dtype_size(cache.dtype()));
  const double per_sample_out = static_cast<double>(shard.sample_floats()) * 4.0;
  const double sps = static_cast<double>(batches) * batch / s;
  out["cache"] = cache.dir();
  out["layout"] = cache::layout_name(cache.layout());
  out["dtype"] = std::string(dtype_name(cache.dtype()));
  out["threads"] = threads;
  out["batch"] = batch;
  out["batches"] = batches;
  out["samples_per_s"] = sps;
  out["bytes_read_per_sample"] = per_sample_in;
  out["bytes_written_per_sample"] = per_sample_out;
  out["shard_load_s"] = load_s;
  out["shard_streamed"] = shard.streamed();
  out["streamed_bytes"] = shard.streamed_bytes();
  out["checksum_of_touched"] = touched;
  if (out.contains("memcpy_bytes_per_s")) {
    const double bound = out["memcpy_bytes_per_s"].get<double>() / (per_sample_in + per_sample_out);
    out["bandwidth_bound_samples_per_s"] = bound;
    out["fraction_of_bound"] = sps / bound;
  }
}

int run_bench(int argc, char** argv) {
  po::options_description desc("bench options");
  desc.add_options()
      ("cache", po::value<std::string>(), "cache directory to load batches from")
      ("threads", po::value<int>()->default_value(1), "loader producer threads")
      ("prefetch", po::value<int>()->default_value(4), "ring slots")
      ("batch", po::value<int>()->default_value(256), "samples per batch")
      ("batches", po::value<int>()->default_value(400), "batches to time (after 20 warm-up batches)")
      ("patch", po::value<int>()->default_value(0), "patch side for cube caches (0: the cache's)")
      ("shard-memory-mb", po::value<std::int64_t>()->default_value(-1), "stream the shard from the cache file past this many MiB (-1: hold it; 0: always stream)")
      ("memcpy-mib", po::value<int>()->default_value(1024), "size of the memcpy bandwidth test, 0 to skip")
      ("json", "print one JSON object instead of text");
  const Parsed p = parse(argc, argv, "bench", "--cache DIR [--threads N] [--batch B]", desc);
  if (p.help) return 0;
  const auto& vm = p.vm;
  nlohmann::json out;
  const int mem_mib = vm["memcpy-mib"].as<int>();
  if (mem_mib > 0) out["memcpy_bytes_per_s"] = memcpy_bandwidth(static_cast<std::size_t>(mem_mib));

  if (vm.count("cache")) bench_loader(vm, out);
  if (vm.count("json")) {
    std::cout << out.dump() << "\n";
  } else {
    std::cout << out.dump(2) << "\n";
  }
  return 0;
}

}  // namespace
HSIPIPE_COMMAND("bench", "time the batch loader on a cache and this machine's memcpy bandwidth", run_bench);
}  // namespace hsipipe::cli

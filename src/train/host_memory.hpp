#pragma once
// train/host_memory: what one rank's host memory must hold while it trains, decided before the shard is
// loaded. The budget is --host-memory-mb, or the node's available memory (core/fs memory_available: the
// kernel's MemAvailable lowered by the job's cgroup limit) divided by the node's ranks. Out of it come the
// loader's ring (prefetch slots of a per-rank batch), the streaming window (the stored bytes of the batches in
// flight, paged in from the cache file) and, on CPU, the model's planned memory (train/planner.hpp). What is
// left is the shard limit (or --shard-memory-mb): a shard within it is read into memory, a larger one is
// streamed from the cache file (cache/cache.hpp Shard::load), with the same batches bit for bit.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace hsipipe::train {

struct HostMemoryRequest {
  std::uint64_t budget = 0;   ///< bytes per rank
  bool budget_given = false;  ///< --host-memory-mb (else the node's available memory / local ranks)
  std::int64_t shard_limit_mb = -1;  ///< --shard-memory-mb; -1: auto (what the budget leaves)
  int local_ranks = 1;
  std::int64_t batch_per_rank = 1;
  int prefetch = 4;
  std::uint64_t sample_floats = 1;     ///< floats per sample the loader delivers (B, or B * p * p)
  std::uint64_t stored_item_bytes = 1; ///< stored bytes a sample's gather touches (its sample, or p cube row segments)
  std::uint64_t model = 0;             ///< the model's planned host memory (CPU), 0 when not planned
  std::string model_note;              ///< why the model is not counted, when it is not
};

struct HostMemory {
  HostMemoryRequest req;
  std::uint64_t ring = 0, window = 0, model = 0;
  std::uint64_t shard_limit = 0;  ///< a shard of more stored bytes is streamed
  std::uint64_t floor() const noexcept { return ring + window + model; }  ///< what training needs besides the shard
};

/// Stored bytes one sample's gather touches, as whole pages (an upper bound: its bytes rounded up to pages,
/// plus a page it may straddle): pixel and patch layouts its stored sample (B * sp * sp values), cube its p row
/// segments of p * B values.
std::uint64_t stored_item_bytes(const std::string& layout, std::uint64_t bands, std::uint64_t stored_patch, std::uint64_t patch,
                                std::uint64_t elem);

/// Throws ConfigError, with the figures, when the budget cannot hold even the ring, the window and the model.
HostMemory plan_host_memory(const HostMemoryRequest& req);

/// "--host-memory-mb" / "--shard-memory-mb": "auto" -> -1, else a whole number of MiB >= minimum.
std::int64_t parse_memory_mb(const std::string& value, const std::string& option, std::int64_t minimum);

nlohmann::json to_json(const HostMemory& m);
std::string host_memory_text(const HostMemory& m);  ///< one line: budget, ring, window, model, shard limit
/// A warning when --shard-memory-mb holds shards larger than the budget leaves after the ring, window and model
/// (a shard that size, held, may run the node out of memory); empty otherwise (auto never exceeds it).
std::string shard_limit_warning(const HostMemory& m);

}  // namespace hsipipe::train

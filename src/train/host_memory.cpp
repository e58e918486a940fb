// train/host_memory: the per-rank host memory split (see host_memory.hpp).
#include "train/host_memory.hpp"

#include <limits>

#include "core/error.hpp"
#include "train/planner.hpp"

namespace hsipipe::train {

std::int64_t parse_memory_mb(const std::string& value, const std::string& option, std::int64_t minimum) {
  if (value == "auto") return -1;
  std::size_t used = 0;
  long long n = -1;
  try {
    n = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || n < minimum || n > (std::numeric_limits<std::int64_t>::max() >> 20))
    throw ConfigError(option + " " + value + ": expected auto or a whole number of MiB >= " + std::to_string(minimum));
  return n;
}

std::uint64_t stored_item_bytes(const std::string& layout, std::uint64_t bands, std::uint64_t stored_patch, std::uint64_t patch,
                                std::uint64_t elem) {
  constexpr std::uint64_t page = 4096;
  const auto pages = [](std::uint64_t bytes) { return (bytes + page - 1) / page * page + page; };
  if (layout == "cube") return patch * pages(patch * bands * elem);
  if (layout == "patch") return pages(bands * stored_patch * stored_patch * elem);
  return pages(bands * elem);
}

HostMemory plan_host_memory(const HostMemoryRequest& req) {
  HostMemory m;
  m.req = req;
  const auto b = static_cast<std::uint64_t>(req.batch_per_rank), slots = static_cast<std::uint64_t>(req.prefetch);
  m.ring = slots * b * (req.sample_floats * sizeof(float) + sizeof(std::int64_t));
  m.window = slots * b * req.stored_item_bytes;
  m.model = req.model;
  if (req.budget < m.floor()) {
    throw ConfigError("host memory: a rank needs " + format_bytes(m.floor()) + " besides its shard (loader ring " +
                      format_bytes(m.ring) + " = --prefetch " + std::to_string(req.prefetch) + " x " + std::to_string(b) +
                      " samples, streaming window " + format_bytes(m.window) + ", model " + format_bytes(m.model) +
                      (req.model_note.empty() ? "" : " (" + req.model_note + ")") + ") but has " + format_bytes(req.budget) +
                      (req.budget_given ? " (--host-memory-mb)"
                                        : " (the node's available memory / " + std::to_string(req.local_ranks) + " local ranks)") +
                      ": lower --batch or --prefetch, run fewer ranks per node, or give the job more memory");
  }
  const std::uint64_t left = req.budget - m.floor();
  m.shard_limit = req.shard_limit_mb >= 0 ? static_cast<std::uint64_t>(req.shard_limit_mb) << 20 : left;
  return m;
}

nlohmann::json to_json(const HostMemory& m) {
  return {{"budget_bytes", m.req.budget},
          {"budget_from", m.req.budget_given ? "--host-memory-mb" : "available memory / local ranks"},
          {"local_ranks", m.req.local_ranks},
          {"ring_bytes", m.ring},
          {"window_bytes", m.window},
          {"model_bytes", m.model},
          {"shard_limit_bytes", m.shard_limit},
          {"shard_limit_from", m.req.shard_limit_mb >= 0 ? "--shard-memory-mb" : "budget - ring - window - model"}};
}

std::string host_memory_text(const HostMemory& m) {
  std::string s = "host memory per rank: " + format_bytes(m.req.budget) +
                  (m.req.budget_given ? " (--host-memory-mb)" : " (available / " + std::to_string(m.req.local_ranks) + " local ranks)") +
                  ", ring " + format_bytes(m.ring) + ", streaming window " + format_bytes(m.window) + ", model " + format_bytes(m.model);
  if (!m.req.model_note.empty()) s += " (" + m.req.model_note + ")";
  s += "; shard limit " + format_bytes(m.shard_limit) + (m.req.shard_limit_mb >= 0 ? " (--shard-memory-mb)" : "");
  return s;
}

std::string shard_limit_warning(const HostMemory& m) {
  const std::uint64_t left = m.req.budget - m.floor();  // plan_host_memory refused a floor above the budget
  if (m.req.shard_limit_mb < 0 || m.shard_limit <= left) return "";
  return "warning: --shard-memory-mb holds shards up to " + format_bytes(m.shard_limit) + " in memory, more than the " +
         format_bytes(left) + " a rank has left for one (host memory less ring, window and model): a larger shard held " +
         "may run the node out of memory; leave --shard-memory-mb at auto to stream it";
}

}  // namespace hsipipe::train

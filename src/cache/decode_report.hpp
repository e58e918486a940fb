#pragma once
// cache/decode_report: what a decode prints on stdout: the sizes of the cache by layout before it is built,
// the summary after it (per-rank bytes and times, the phases, how the passes kept their data, remote
// scenes' requests), and the line of a reused cache. Printed by rank 0.
#include <cstdint>
#include <string>

#include "cache/decode_plan.hpp"
#include "cache/decode_timing.hpp"
#include "cache/kept_samples.hpp"
#include "cache/sink.hpp"

namespace hsipipe::cache {

/// 1536 -> "1.5 KiB".
std::string human_bytes(double b);

/// Rank-local (rank 0). Prints the cache's sizes in each layout and returns the bytes the chosen one needs.
std::uint64_t print_sizes(const DecodePlan& plan);

/// Rank-local (rank 0). The summary of a run that reused the cache at `out`: `hashed` source bytes read to
/// compare it, `pixels` the scenes' bytes read (all ranks).
void print_reuse_summary(const DecodePlan& plan, const std::string& out, const std::string& checksum, double seconds,
                         std::uint64_t hashed, std::uint64_t pixels);

/// What this rank did, for the summary.
struct RankReport {
  const Timers& t;
  const Sink& sink;
  std::uint64_t bytes_read = 0;         ///< this rank's readers
  std::string write_mode;               ///< WriteOutput::mode
  std::uint64_t kept_window_bytes = 0;  ///< RowWindows::kept_bytes
  KeptSamples::State keep_state = KeptSamples::State::not_kept;
  bool staged = false;
};

/// COLLECTIVE (gathers every rank's report; rank 0 prints the summary).
void print_summary(const DecodePlan& plan, const dist::Comm& comm, const RankReport& mine, double total_seconds);

}  // namespace hsipipe::cache

#pragma once
// cache/decode_timing: where a decode's time goes (per-rank timers and phases, printed by the summary) and
// rank 0's progress lines of a pass. Rank-local; internal to cache.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <utility>
#include <vector>

namespace hsipipe::cache {

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// This rank's time by kind of work, and the wall time of each phase.
struct Timers {
  double read = 0, compute = 0, write = 0;
  double placing = 0;  ///< writing time spent by the building thread (npy: the file's pages); write is the writer's
  /// Wall time of each phase on this rank, in order (printed by rank 0: where a decode's time goes).
  std::vector<std::pair<const char*, double>> phases;
  Clock::time_point phase_start = Clock::now();
  void phase(const char* name) {
    const auto now = Clock::now();
    phases.emplace_back(name, std::chrono::duration<double>(now - phase_start).count());
    phase_start = now;
  }
};

/// Rank 0's progress lines for one pass: at most one a second, the first after a second, and a final one at
/// 100% when an earlier line was printed (a pass under a second prints none). Counts rank 0's own range: the
/// ranks' ranges are the same size (within a row or a sample), so its share is the job's, give or take the
/// slowest rank. With more than one scene (`scenes`), a line also names the scene rank 0 is at ("scene 37/150").
class ProgressLine {
 public:
  ProgressLine(bool on, const char* pass, const char* unit, std::uint64_t total, std::size_t scenes = 0)
      : on_(on), pass_(pass), unit_(unit), total_(total), scenes_(scenes), t0_(Clock::now()), last_(t0_) {}
  /// `done` of total so far.
  void update(std::uint64_t done) {
    done_ = done;
    if (on_ && std::chrono::duration<double>(Clock::now() - last_).count() >= 1.0) print();
  }
  /// `done` of total so far, at scene `scene` (0-based).
  void update(std::uint64_t done, std::size_t scene) {
    scene_ = scene + 1;
    update(done);
  }
  /// The final line, unless none was printed or the last one already showed this count.
  void finish() {
    if (on_ && last_ > t0_ && printed_ != done_) print();
  }

 private:
  void print() {
    last_ = Clock::now();
    printed_ = done_;
    const double el = std::chrono::duration<double>(last_ - t0_).count();
    const double rate = el > 0 ? static_cast<double>(done_) / el : 0;
    const double eta = rate > 0 ? static_cast<double>(total_ - done_) / rate : 0;
    char at[64] = "";
    if (scenes_ > 1 && scene_ > 0) std::snprintf(at, sizeof at, ", scene %zu/%zu", scene_, scenes_);
    std::fprintf(stderr, "decode: %s, rank 0: %llu/%llu %s (%.1f%%)%s, %.0f %s/s, ETA %.0f s\n", pass_,
                 static_cast<unsigned long long>(done_), static_cast<unsigned long long>(total_), unit_,
                 total_ ? 100.0 * static_cast<double>(done_) / static_cast<double>(total_) : 100.0, at, rate, unit_, eta);
  }
  bool on_;
  const char* pass_;
  const char* unit_;
  std::uint64_t total_, done_ = 0, printed_ = 0;
  std::size_t scenes_ = 0, scene_ = 0;
  Clock::time_point t0_, last_;
};

}  // namespace hsipipe::cache

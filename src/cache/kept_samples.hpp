#pragma once
// cache/kept_samples: a rank's sample pixels (kept bands) kept by the statistics pass for the write pass of
// the pixel layout, so that nothing is decoded twice: in a buffer of their own, or in their own output slots
// in the npy file's pages ("staged"), as float32 or as the 16-bit integers they are. Rank-local.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cache/decode_plan.hpp"
#include "cache/sink.hpp"
#include "core/big_alloc.hpp"

namespace hsipipe::cache {

class KeptSamples {
 public:
  /// How this rank's samples went to the write pass, for the summary (gathered as int32, names in
  /// decode_report.cpp)
  enum class State : std::int32_t { not_kept, f32, i16, u16, dropped };

  /// Before the statistics pass: whether it keeps the samples, how, and where (see the members). Reads the
  /// HSIPIPE_TEST_KEEP_* and HSIPIPE_TEST_NO_STAGE hooks. The same on every rank but for --memory-mb's limit.
  void choose(const DecodePlan& plan, const Sink& sink);
  /// Inside the statistics pass: sets the state and sizes the buffer (when kept and not staged).
  void allocate();
  /// Whether the samples are kept (false after drop()).
  bool active() const { return active_; }
  /// Whether they wait in their output slots (the memory Sink::place gave), not in a buffer of ours.
  bool staged() const { return staged_; }
  State state() const { return state_; }

  /// Where sample id's kept values are: its output slot in `stage` (the memory place() gave for items
  /// from `stage_first` on) when staged(), else this rank's buffer.
  void* slot(std::uint64_t id, char* stage, std::uint64_t stage_first);
  /// Stores a sample's kept bands at `slot` (slot()) in the chosen type; false when a value is not exactly
  /// representable there (nothing to undo: the caller then calls drop()).
  bool keep(void* slot, const float* px) const;
  /// The kept bands at `slot` as float32: in place, or converted into `buf`. A staged slot is the sample's
  /// output slot: read it all before storing the sample's output values.
  const float* get(const void* slot, std::vector<float>& buf) const;
  /// Gives up keeping (a value that is not a 16-bit integer): the write pass decodes again, and overwrites
  /// any staged slot.
  void drop();

 private:
  /// How the kept samples are stored: float32, or the 16-bit integers they are when every scene holds
  /// u8/i16 (int16) or u16 (uint16) values, which those types hold exactly: half the memory, and half
  /// the fresh pages to fault in and the bytes for the write pass to read (`scripts/bench_decode_ab.sh
  /// "HSIPIPE_TEST_KEEP_F32=1" "" R 5`, 1 Dec 2026, min wall: 1 rank 0.888 -> 0.717 s, 2 ranks 0.564 ->
  /// 0.473 s). A value that does not fit bit for bit drops this rank's kept samples and the write pass
  /// decodes again: a safety net, as the readers give u8/i16/u16 scenes' values unscaled and a NaN sample
  /// pixel fails the statistics pass.
  enum class Type : std::uint8_t { f32, i16, u16 };

  std::size_t bands_ = 0;       ///< kept bands
  std::uint64_t first_ = 0;     ///< this rank's first sample
  std::uint64_t count_ = 0;     ///< this rank's samples
  Type type_ = Type::f32;
  /// Pixel layout, statistics over the samples, no PCA, and within --memory-mb: the statistics pass keeps
  /// just this rank's sample pixels (kept bands, in sample order) for the write pass, not whole row windows
  /// (with sparse labels a tiny fraction of them), and decodes into one reused window.
  bool active_ = false;
  /// Where the kept samples wait for the write pass: in memory of our own (raw_ / s16_), or, when the sink
  /// builds items in the file's pages (npy) and a kept sample fits in its output slot (kept bands x 2 or 4
  /// bytes <= output bands x dtype bytes), in that slot itself, which the write pass then overwrites with
  /// the sample's final values. Those pages are the cache's anyway: the separate buffer's fresh memory is
  /// never touched (on this project's virtual machines a fresh page costs a host fault; measured in
  /// scripts/bench_decode_ab.sh "HSIPIPE_TEST_NO_STAGE=1" "", see choose()).
  bool staged_ = false;
  std::size_t stride_ = 0;  ///< bytes from one staged sample to the next: the output item
  State state_ = State::not_kept;
  BigFloats raw_;
  std::vector<std::uint16_t, BigAllocator<std::uint16_t>> s16_;
};

}  // namespace hsipipe::cache

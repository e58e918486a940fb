#pragma once
// cache/row_windows: rows of scenes decoded to float32, kept bands only (RowWindow), where the rows that
// several ranks need are decoded by one rank and sent to the others (exchange), and where a pass's decoded
// windows may wait for a later pass within a memory budget (window_for). What `decode` reads its scenes
// through; independent of the sample table, so that another whole-scene reader (`predict`) can use it.
//
// Contract: exchange() is COLLECTIVE over its communicator (every rank, the same `need` function);
// everything else is rank-local. Not thread-safe: one pass at a time.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "cache/decode_timing.hpp"
#include "cache/preprocess.hpp"
#include "core/big_alloc.hpp"
#include "core/range.hpp"
#include "dist/mpi.hpp"
#include "io/scene.hpp"

namespace hsipipe::cache {

class RowWindows {
 public:
  /// `scenes` outlive this object; `kept`: the source bands kept (0-based, in order); decoding time is
  /// booked in `t` (read: the readers, compute: the band selection); `memory_bytes`: the windows kept
  /// between passes (window_for), per rank.
  RowWindows(std::vector<const io::Scene*> scenes, std::vector<int> kept, Timers& t, std::uint64_t memory_bytes);

  /// Rows [r0, r1) of scene s, decoded by this rank, kept bands only.
  void read_kept_rows(std::size_t s, std::size_t r0, std::size_t r1, float* out);
  /// Decodes rows [rr0, rr1) of scene s into w (its buffer is reused: no fresh pages per block); rows
  /// received in exchange() are copied.
  void read_window(std::size_t s, std::size_t rr0, std::size_t rr1, RowWindow& w);

  /// COLLECTIVE. `need(s, q)`: the rows of scene s that rank q will read (empty when none), the same
  /// function on every rank. Each block of the scene's block_rows() rows is decoded by one rank only, the
  /// lowest that needs it, which sends the rows of that block other ranks need; read_window then copies
  /// them. Decoded bytes are then exactly the scenes', for any rank count.
  void exchange(const dist::Comm& comm, const std::function<Range(std::size_t, int)>& need);
  /// Forgets the rows of scene s that this rank decoded itself in exchange() (not those received), so
  /// that the next read_window decodes them again here: each row is decoded once per pass.
  void forget_decoded_here(std::size_t s);

  /// The window of rows [rr0, rr1) of scene s known as `key` (a block's index): the one kept earlier, or
  /// decoded into `scratch` and, when `keep` and within the memory budget, kept under `key`.
  const RowWindow& window_for(std::size_t key, std::size_t s, std::size_t rr0, std::size_t rr1, RowWindow& scratch,
                              bool keep);
  /// Whether the window `key` is kept.
  bool holds(std::size_t key) const { return kept_windows_.count(key) != 0; }
  /// Gives the window `key` back (its bytes stay counted in kept_bytes()).
  void release(std::size_t key) { kept_windows_.erase(key); }
  /// Bytes of the windows kept so far (for the summary).
  std::uint64_t kept_bytes() const { return kept_bytes_; }

  /// Rows per slice when a block is decoded a few rows at a time (about 1 MiB of float32 rows: they are
  /// consumed while in cache).
  std::size_t slice_rows(std::size_t s) const;
  /// Whether any few rows of the scene decode at the cost of their bytes (io::Scene::rereads_cheaply, rows
  /// not in tiles): it can be read a slice at a time, and again.
  static bool reads_slices_cheaply(const io::Scene& scene) {
    return scene.rereads_cheaply() && scene.block_rows() <= 1;
  }

 private:
  void send_shared_rows(std::size_t s, int rank, const std::vector<Range>& need, std::vector<std::vector<char>>& send);
  void receive_rows(const std::vector<std::vector<char>>& recv);

  std::vector<const io::Scene*> scenes_;
  std::vector<int> kept_;
  int src_bands_ = 0;
  Timers& t_;
  std::uint64_t memory_bytes_ = 0;
  /// Per scene: rows decoded during exchange (received from the rank that decoded them, or decoded here
  /// for a neighbour and needed here too), kept bands; read_window copies them.
  std::vector<std::map<std::size_t, std::vector<float>>> predecoded_;
  /// Per scene: the rows of predecoded_ this rank decoded itself (not received).
  std::vector<std::vector<std::size_t>> decoded_here_;
  /// All source bands of a row block before band selection (reused, see read_kept_rows).
  BigFloats select_buf_;
  std::map<std::size_t, RowWindow> kept_windows_;
  std::uint64_t kept_bytes_ = 0;
};

}  // namespace hsipipe::cache

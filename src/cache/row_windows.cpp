// cache/row_windows: decoded rows, the boundary-row exchange, windows kept between passes (see row_windows.hpp).
#include "cache/row_windows.hpp"

#include <algorithm>
#include <cstring>

#include "dist/collective.hpp"

namespace hsipipe::cache {

RowWindows::RowWindows(std::vector<const io::Scene*> scenes, std::vector<int> kept, Timers& t, std::uint64_t memory_bytes)
    : scenes_(std::move(scenes)), kept_(std::move(kept)), t_(t), memory_bytes_(memory_bytes) {
  src_bands_ = scenes_.empty() ? 0 : static_cast<int>(scenes_[0]->bands());
}

void RowWindows::read_kept_rows(std::size_t s, std::size_t r0, std::size_t r1, float* out) {
  const io::Scene& scene = *scenes_[s];
  const std::size_t npx = (r1 - r0) * scene.cols();
  const auto t0 = Clock::now();
  if (static_cast<int>(kept_.size()) == src_bands_) {
    scene.read_rows(r0, r1, out);
    t_.read += seconds_since(t0);
    return;
  }
  select_buf_.resize(npx * static_cast<std::size_t>(src_bands_));
  scene.read_rows(r0, r1, select_buf_.data());
  t_.read += seconds_since(t0);
  const auto t1 = Clock::now();
  select_bands(select_buf_.data(), npx, src_bands_, kept_, out);
  t_.compute += seconds_since(t1);
}

void RowWindows::read_window(std::size_t s, std::size_t rr0, std::size_t rr1, RowWindow& w) {
  const io::Scene& scene = *scenes_[s];
  w.row0 = rr0;
  w.nrows = rr1 - rr0;
  w.cols = scene.cols();
  w.scene_rows = scene.rows();
  w.bands = static_cast<int>(kept_.size());
  const std::size_t row_floats = w.cols * kept_.size();
  w.data.resize(w.nrows * row_floats);
  // Rows another rank decoded (received in exchange) are copied; runs of the others are read.
  static const std::map<std::size_t, std::vector<float>> none;
  const auto& pre = predecoded_.empty() ? none : predecoded_[s];
  std::size_t r = rr0;
  while (r < rr1) {
    if (const auto it = pre.find(r); it != pre.end()) {
      std::copy(it->second.begin(), it->second.end(), w.data.begin() + static_cast<std::ptrdiff_t>((r - rr0) * row_floats));
      ++r;
      continue;
    }
    std::size_t e = r + 1;
    while (e < rr1 && !pre.count(e)) ++e;
    read_kept_rows(s, r, e, w.data.data() + (r - rr0) * row_floats);
    r = e;
  }
}

void RowWindows::exchange(const dist::Comm& comm, const std::function<Range(std::size_t, int)>& need) {
  const int R = comm.size();
  predecoded_.assign(scenes_.size(), {});
  decoded_here_.assign(scenes_.size(), {});
  if (R == 1) return;
  std::vector<std::vector<char>> send(static_cast<std::size_t>(R));
  dist::collective_step(comm, "exchanging boundary rows", [&] {
    for (std::size_t s = 0; s < scenes_.size(); ++s) {
      std::vector<Range> needs(static_cast<std::size_t>(R));
      for (int q = 0; q < R; ++q) needs[static_cast<std::size_t>(q)] = need(s, q);
      send_shared_rows(s, comm.rank(), needs, send);
    }
  });
  receive_rows(comm.alltoallv(send));
}

/// Scene s's part of exchange(): decodes the blocks this rank owns that other ranks need rows of, keeps the
/// rows it needs itself, and appends the others' rows to their send buffers as [s, first row, rows] + floats.
void RowWindows::send_shared_rows(std::size_t s, int rank, const std::vector<Range>& need,
                                  std::vector<std::vector<char>>& send) {
  const io::Scene& scene = *scenes_[s];
  const int R = static_cast<int>(need.size());
  const std::size_t rows = scene.rows(), bh = std::max<std::size_t>(1, scene.block_rows());
  auto owner = [&](std::size_t block) {
    const std::size_t lo = block * bh, hi = std::min(rows, lo + bh);
    for (int q = 0; q < R; ++q) {
      const Range& n = need[static_cast<std::size_t>(q)];
      if (n.begin < n.end && n.begin < hi && lo < n.end) return q;
    }
    return -1;
  };
  // The blocks other ranks need rows of, each read once (the rows any of them needs), then sliced.
  std::map<std::size_t, Range> wanted;  // block -> rows wanted from it by other ranks
  for (int q = 0; q < R; ++q) {
    const Range& n = need[static_cast<std::size_t>(q)];
    if (q == rank || n.begin >= n.end) continue;
    for (std::size_t j = n.begin / bh; j * bh < n.end; ++j) {
      if (owner(j) != rank) continue;
      const std::size_t a = std::max(n.begin, j * bh), b = std::min(n.end, (j + 1) * bh);
      auto [it, fresh] = wanted.try_emplace(j, Range{a, b});
      if (!fresh) it->second = {std::min(it->second.begin, a), std::max(it->second.end, b)};
    }
  }
  // ... together with the rows of those blocks this rank needs itself: one read per shared block
  const Range& me = need[static_cast<std::size_t>(rank)];
  for (auto& [j, w] : wanted) {
    const std::size_t a = std::max(me.begin, j * bh), b = std::min(me.end, (j + 1) * bh);
    if (a < b) w = {std::min(w.begin, a), std::max(w.end, b)};
  }
  const std::size_t row_floats = scene.cols() * kept_.size();
  std::vector<float> buf;
  for (const auto& [j, w] : wanted) {
    buf.resize(w.size() * row_floats);
    read_kept_rows(s, w.begin, w.end, buf.data());
    auto row_at = [&](std::size_t r) { return buf.begin() + static_cast<std::ptrdiff_t>((r - w.begin) * row_floats); };
    // the rows this rank needs are kept, so its own windows do not decode the block again
    for (std::size_t r = std::max(w.begin, me.begin); r < std::min(w.end, me.end); ++r) {
      predecoded_[s][r].assign(row_at(r), row_at(r + 1));
      decoded_here_[s].push_back(r);
    }
    for (int q = 0; q < R; ++q) {
      const Range& n = need[static_cast<std::size_t>(q)];
      const std::size_t a = std::max(n.begin, w.begin), b = std::min(n.end, w.end);
      if (q == rank || a >= b) continue;
      const std::uint64_t head[3] = {s, a, b - a};
      auto& out = send[static_cast<std::size_t>(q)];
      const char* hp = reinterpret_cast<const char*>(head);
      out.insert(out.end(), hp, hp + sizeof head);
      const char* dp = reinterpret_cast<const char*>(&*row_at(a));
      out.insert(out.end(), dp, dp + (b - a) * row_floats * sizeof(float));
    }
  }
}

void RowWindows::receive_rows(const std::vector<std::vector<char>>& recv) {
  for (const auto& buf : recv) {
    std::size_t off = 0;
    while (off < buf.size()) {
      std::uint64_t head[3];
      std::memcpy(head, buf.data() + off, sizeof head);
      off += sizeof head;
      const std::size_t row_floats = scenes_[head[0]]->cols() * kept_.size();
      for (std::uint64_t i = 0; i < head[2]; ++i) {
        auto& row = predecoded_[head[0]][head[1] + i];
        row.resize(row_floats);
        std::memcpy(row.data(), buf.data() + off, row_floats * sizeof(float));
        off += row_floats * sizeof(float);
      }
    }
  }
}

void RowWindows::forget_decoded_here(std::size_t s) {
  if (s >= decoded_here_.size()) return;
  for (const std::size_t r : decoded_here_[s]) predecoded_[s].erase(r);
  decoded_here_[s].clear();
}

const RowWindow& RowWindows::window_for(std::size_t key, std::size_t s, std::size_t rr0, std::size_t rr1,
                                        RowWindow& scratch, bool keep) {
  if (auto it = kept_windows_.find(key); it != kept_windows_.end()) return it->second;
  read_window(s, rr0, rr1, scratch);
  const std::uint64_t bytes = scratch.data.size() * sizeof(float);
  if (keep && kept_bytes_ + bytes <= memory_bytes_) {
    kept_bytes_ += bytes;
    return kept_windows_.emplace(key, std::move(scratch)).first->second;
  }
  return scratch;
}

std::size_t RowWindows::slice_rows(std::size_t s) const {
  const std::size_t cols = scenes_[s]->cols();
  return std::max<std::size_t>(1, (std::size_t{1} << 20) / std::max<std::size_t>(1, cols * kept_.size() * sizeof(float)));
}

}  // namespace hsipipe::cache

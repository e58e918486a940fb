// cache/decode_report: what a decode prints (see decode_report.hpp).
#include "cache/decode_report.hpp"

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <vector>

namespace hsipipe::cache {

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (b >= 1024.0 && u < 5) { b /= 1024.0; ++u; }
  char buf[64];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", b, units[u]);
  return buf;
}

std::uint64_t print_sizes(const DecodePlan& plan) {
  const DecodeOptions& opts = plan.opts;
  const std::uint64_t OB = plan.out_bands();
  const std::uint64_t es = dtype_size(opts.dtype), N = plan.table.size();
  std::uint64_t cube = 0;
  for (const auto& st : plan.scenes) cube += st.rows * st.cols;
  const std::uint64_t pp = static_cast<std::uint64_t>(plan.p) * static_cast<std::uint64_t>(plan.p);
  const std::uint64_t sz_pixel = N * OB * es, sz_patch = N * OB * pp * es, sz_cube = cube * OB * es;
  const std::uint64_t need = opts.layout == Layout::pixel ? sz_pixel : opts.layout == Layout::patch ? sz_patch : sz_cube;
  std::cout << "decode: " << plan.scenes.size() << (plan.scenes.size() == 1 ? " scene, " : " scenes, ") << N << " samples x " << OB
            << " bands (" << dtype_name(opts.dtype) << "); size by layout: pixel "
            << human_bytes(static_cast<double>(sz_pixel)) << ", patch " << plan.p << "x" << plan.p << " "
            << human_bytes(static_cast<double>(sz_patch)) << ", cube " << human_bytes(static_cast<double>(sz_cube))
            << "; building " << layout_name(opts.layout) << " (" << human_bytes(static_cast<double>(need)) << ")\n";
  return need;
}

void print_reuse_summary(const DecodePlan& plan, const std::string& out, const std::string& checksum, double seconds,
                         std::uint64_t hashed, std::uint64_t pixels) {
  const int R = plan.R;
  std::cout << "decode skipped: cache is current (" << out << ", data_checksum " << checksum << ")\n"
            << "decode summary (" << R << " rank" << (R > 1 ? "s" : "") << ", " << seconds
            << " s wall): cache reused; read " << human_bytes(static_cast<double>(hashed))
            << " (hashing the sources) and " << human_bytes(static_cast<double>(pixels))
            << " of the scenes' pixels, decoded 0 samples, wrote 0 B\n";
}

namespace {

/// Every rank's gathered numbers, for rank 0's summary.
struct Gathered {
  std::vector<double> io;          ///< per rank: bytes read, written, decode s, write s
  std::vector<double> remote;      ///< per rank: remote?, requests, fetched, decoded, retries
  std::vector<std::int32_t> kept;  ///< per rank: KeptSamples::State, staged
  std::vector<double> req_ms, blk_ms;
  std::vector<double> readers;  ///< per rank: scene readers open at once at most, readers opened
};

/// COLLECTIVE. Remote scenes (io::Scene::remote_stats, rank-local): requests, bytes fetched vs decoded,
/// retries, latencies; gathered by every rank (same calls on all ranks).
Gathered gather(const DecodePlan& plan, const dist::Comm& comm, const RankReport& r) {
  Gathered g;
  g.io = comm.allgatherv(std::vector<double>{static_cast<double>(r.bytes_read), static_cast<double>(r.sink.bytes_written()),
                                             r.t.read + r.t.compute, r.t.write + r.t.placing});
  std::vector<double> rmine(5, 0.0), req_ms, blk_ms;
  for (const auto& st : plan.scenes) {
    if (const auto rs = st.scene->remote_stats()) {
      rmine[0] = 1;
      rmine[1] += static_cast<double>(rs->requests);
      rmine[2] += static_cast<double>(rs->bytes_fetched);
      rmine[3] += static_cast<double>(rs->bytes_decoded);
      rmine[4] += static_cast<double>(rs->retries);
      req_ms.insert(req_ms.end(), rs->request_latencies_ms.begin(), rs->request_latencies_ms.end());
      blk_ms.insert(blk_ms.end(), rs->latencies_ms.begin(), rs->latencies_ms.end());
    }
  }
  g.remote = comm.allgatherv(rmine);
  // per rank: how its samples were kept, and whether in the file's pages
  g.kept = comm.allgatherv(std::vector<std::int32_t>{static_cast<std::int32_t>(r.keep_state), r.staged ? 1 : 0});
  g.req_ms = comm.allgatherv(req_ms);
  g.blk_ms = comm.allgatherv(blk_ms);
  g.readers = comm.allgatherv(
      std::vector<double>{static_cast<double>(plan.pool.peak_open()), static_cast<double>(plan.pool.opens())});
  return g;
}

/// The table of bytes and times per rank, and its total.
void rank_table(std::ostringstream& o, const std::vector<double>& all, int R, double total_seconds) {
  double tr = 0, tw = 0, dec = 0, wr = 0;
  char line[256];
  std::snprintf(line, sizeof line, "  %-6s %12s %12s %10s %10s %10s %10s\n", "rank", "read", "written", "decode s",
                "write s", "read MB/s", "write MB/s");
  o << line;
  for (int r = 0; r < R; ++r) {
    const double* v = all.data() + 4 * r;
    tr += v[0];
    tw += v[1];
    dec = std::max(dec, v[2]);
    wr = std::max(wr, v[3]);
    std::snprintf(line, sizeof line, "  %-6d %12s %12s %10.2f %10.2f %10.1f %10.1f\n", r, human_bytes(v[0]).c_str(),
                  human_bytes(v[1]).c_str(), v[2], v[3], v[2] > 0 ? v[0] / 1e6 / v[2] : 0.0,
                  v[3] > 0 ? v[1] / 1e6 / v[3] : 0.0);
    o << line;
  }
  std::snprintf(line, sizeof line, "  %-6s %12s %12s %10.2f %10.2f %10.1f %10.1f   (MB/s over the wall time: %.1f in, %.1f out)\n",
                "total", human_bytes(tr).c_str(), human_bytes(tw).c_str(), dec, wr, dec > 0 ? tr / 1e6 / dec : 0.0,
                wr > 0 ? tw / 1e6 / wr : 0.0, total_seconds > 0 ? tr / 1e6 / total_seconds : 0.0,
                total_seconds > 0 ? tw / 1e6 / total_seconds : 0.0);
  o << line;
}

/// How the write pass got its data: decoded rows kept (patch, cube, PCA) and samples kept (pixel).
void kept_lines(std::ostringstream& o, const DecodePlan& plan, const std::vector<std::int32_t>& kept_all,
                std::uint64_t kept_window_bytes) {
  const int R = plan.R;
  if (plan.opts.layout != Layout::pixel || plan.opts.pca > 0) {
    o << "  decoded rows kept for the write pass (rank 0): "
      << (kept_window_bytes > 0 ? human_bytes(static_cast<double>(kept_window_bytes)) : std::string("none, decoded again"))
      << "\n";
  }
  if (plan.opts.layout != Layout::pixel) return;
  // indexed by KeptSamples::State
  static const char* const kept_name[] = {"no (the write pass decodes them again)", "as float32", "as int16",
                                          "as uint16", "dropped (a value is not a 16-bit integer; decoded again)"};
  const auto name = [&](int r) {
    const auto i = 2 * static_cast<std::size_t>(r);
    return std::string(kept_name[kept_all.at(i)]) + (kept_all.at(i + 1) ? " in the output file's pages" : "");
  };
  bool same = true;
  for (int r = 1; r < R; ++r) same = same && name(r) == name(0);
  o << "  samples kept for the write pass:";
  if (same) {
    o << " " << name(0) << "\n";
  } else {
    for (int r = 0; r < R; ++r) o << (r ? "," : "") << " rank " << r << " " << name(r);
    o << "\n";
  }
}

/// Remote scenes: requests, bytes fetched against decoded, retries and latencies (nothing when none).
void remote_lines(std::ostringstream& o, const Gathered& g, int R) {
  double remote = 0, rq = 0, fetched = 0, decoded = 0, retries = 0;
  for (int r = 0; r < R; ++r) {
    const double* v = g.remote.data() + 5 * r;
    remote += v[0], rq += v[1], fetched += v[2], decoded += v[3], retries += v[4];
  }
  if (remote == 0) return;
  char line[256];
  std::snprintf(line, sizeof line, "  remote: %.0f requests, fetched %s for %s decoded (%.2f), retries %.0f\n", rq,
                human_bytes(fetched).c_str(), human_bytes(decoded).c_str(), decoded > 0 ? fetched / decoded : 0.0, retries);
  o << line;
  for (int r = 0; r < R; ++r) {
    const double* v = g.remote.data() + 5 * r;
    std::snprintf(line, sizeof line, "  remote rank %d: fetched %.0f B in %.0f requests, decoded %.0f B, retries %.0f\n", r,
                  v[2], v[1], v[3], v[4]);
    o << line;
  }
  auto pct = [&](const std::vector<double>& ms, const char* what) {
    if (ms.empty()) return;
    std::snprintf(line, sizeof line, "  remote %s latency p50/p95/p99: %.1f / %.1f / %.1f ms (%zu)\n", what,
                  io::latency_percentile(ms, 50), io::latency_percentile(ms, 95), io::latency_percentile(ms, 99), ms.size());
    o << line;
  };
  pct(g.req_ms, "request");
  pct(g.blk_ms, "block-read");
}

}  // namespace

void print_summary(const DecodePlan& plan, const dist::Comm& comm, const RankReport& mine, double total_seconds) {
  const Gathered g = gather(plan, comm, mine);
  if (plan.rank != 0) return;
  const int R = plan.R;
  std::ostringstream o;
  o << "decode summary (" << R << " rank" << (R > 1 ? "s" : "") << ", " << total_seconds << " s wall):\n";
  rank_table(o, g.io, R, total_seconds);
  o << "  phases (rank 0):";
  for (std::size_t i = 0; i < mine.t.phases.size(); ++i)
    o << (i ? "," : "") << " " << mine.t.phases[i].first << " " << std::fixed << std::setprecision(2)
      << mine.t.phases[i].second << " s";
  o << std::defaultfloat << "\n";
  o << "  writes: " << mine.write_mode << "\n";
  kept_lines(o, plan, g.kept, mine.kept_window_bytes);
  remote_lines(o, g, R);
  if (plan.scenes.size() > 1) {  // the bound of io::ScenePool, and what each rank's readers did
    const auto count = [&](int r, std::size_t k) {
      return static_cast<std::uint64_t>(g.readers[2 * static_cast<std::size_t>(r) + k]);
    };
    o << "  scene files: " << plan.scenes.size() << " scenes, at most " << plan.pool.max_open() << " open at once per rank; peak";
    for (int r = 0; r < R; ++r) o << (r ? ", " : " ") << count(r, 0);
    o << "; opened";
    for (int r = 0; r < R; ++r) o << (r ? ", " : " ") << count(r, 1);
    o << " times\n";
  }
  std::cout << o.str() << std::flush;
}

}  // namespace hsipipe::cache

// hsipipe info: what a scene or label raster holds (dims, type, storage details, band range, size on
// disk, per-class counts for a label raster), and --decode-all, which times a full decode of every
// row into float32 BIP in row blocks with reused buffers (the reader speed benchmark). Rank-local.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "cli/command.hpp"
#include "core/error.hpp"
#include "core/hash.hpp"
#include "io/scene.hpp"

namespace hsipipe::cli {
namespace {

std::string fmt(double v, int prec = 6) {
  std::ostringstream s;
  s << std::setprecision(prec) << v;
  return s.str();
}

std::string mib(std::uint64_t n) {
  std::ostringstream s;
  s << n << " bytes (" << std::fixed << std::setprecision(1) << static_cast<double>(n) / (1024.0 * 1024.0) << " MiB)";
  return s.str();
}

/// "1, 96-100, 140" from a sorted index list (1-based).
std::string ranges(const std::vector<std::size_t>& idx) {
  std::string out;
  for (std::size_t i = 0; i < idx.size();) {
    std::size_t j = i;
    while (j + 1 < idx.size() && idx[j + 1] == idx[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(idx[i] + 1);
    if (j > i) out += "-" + std::to_string(idx[j] + 1);
    i = j + 1;
  }
  return out;
}

void line(const std::string& key, const std::string& value) {
  std::cout << std::left << std::setw(15) << (key + ":") << value << "\n";
}

/// Decodes every row in blocks of `block` rows on `threads` threads, each with its own reused buffer.
/// Returns wall seconds; `checksum` (threads == 1 only) gets the XXH3-64 of the whole float32 BIP cube.
double decode_all(const io::Scene& s, std::size_t block, int threads, std::uint64_t* checksum) {
  const std::size_t R = s.rows(), per_row = s.cols() * s.bands();
  std::atomic<std::size_t> next{0};
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(threads));
  Xxh3Stream hash;
  const auto t0 = std::chrono::steady_clock::now();
  auto work = [&](int t) {
    try {
      std::vector<float> buf(std::min(block, R) * per_row);
      for (;;) {
        const std::size_t r0 = next.fetch_add(block);
        if (r0 >= R) break;
        const std::size_t r1 = std::min(R, r0 + block);
        s.read_rows(r0, r1, buf.data());
        if (checksum) hash.update(buf.data(), (r1 - r0) * per_row * sizeof(float));
      }
    } catch (...) {
      errors[static_cast<std::size_t>(t)] = std::current_exception();
    }
  };
  if (threads == 1) {
    work(0);
  } else {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back(work, t);
    for (auto& th : pool) th.join();
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  if (checksum) *checksum = hash.digest();
  return secs;
}

// Dims, type, format details, wavelengths, bad bands, scale, ignore value and size on disk.
void describe_scene(const io::SceneSpec& spec, const io::Scene& s) {
  line("scene", spec.str());
  line("format", s.format());
  line("dims", std::to_string(s.rows()) + " rows x " + std::to_string(s.cols()) + " cols x " +
                   std::to_string(s.bands()) + " bands");
  line("type", std::string(dtype_name(s.source_type())));
  for (const auto& [k, v] : s.details()) line(k, v);
  const io::BandInfo& bi = s.band_info();
  if (!bi.wavelengths.empty()) {
    const auto [lo, hi] = std::minmax_element(bi.wavelengths.begin(), bi.wavelengths.end());
    std::string w = fmt(*lo) + " - " + fmt(*hi) + " " + (bi.wavelength_units.empty() ? "(units not given)" : bi.wavelength_units);
    if (!bi.fwhm.empty()) {
      const auto [flo, fhi] = std::minmax_element(bi.fwhm.begin(), bi.fwhm.end());
      w += ", fwhm " + fmt(*flo) + " - " + fmt(*fhi);
    }
    line("wavelengths", w);
  } else {
    line("wavelengths", "not given");
  }
  if (!bi.bbl.empty()) {
    std::vector<std::size_t> bad;
    for (std::size_t b = 0; b < bi.bbl.size(); ++b)
      if (!bi.bbl[b]) bad.push_back(b);
    line("bad bands", std::to_string(bad.size()) + " of " + std::to_string(bi.bbl.size()) +
                          (bad.empty() ? "" : " (bbl = 0, 1-based): " + ranges(bad)));
  }
  if (bi.scale_factor != 1.0) line("scale factor", fmt(bi.scale_factor, 10) + " (not applied by hsipipe)");
  line("ignore value", s.ignore_value() ? fmt(*s.ignore_value(), 17) : std::string("none"));
  std::uint64_t disk = 0;
  for (const std::string& f : s.source_files()) {
    std::error_code ec;
    const auto n = std::filesystem::file_size(f, ec);
    if (!ec) disk += n;
  }
  line("size on disk", mib(disk) + " in " + std::to_string(s.source_files().size()) + " file(s)");
}

// A label raster (one band of integers): the count per class.
void describe_labels(const io::Scene& s) {
  std::vector<float> buf(s.rows() * s.cols());
  s.read_rows(0, s.rows(), buf.data());
  std::map<long long, std::uint64_t> counts;
  bool integral = true;
  std::uint64_t invalid = 0;
  for (float v : buf) {
    if (std::isnan(v)) {
      ++invalid;
      continue;
    }
    if (v != std::floor(v) || std::fabs(v) > 2e9f) {
      integral = false;
      break;
    }
    ++counts[static_cast<long long>(v)];
  }
  if (integral) {
    std::uint64_t labeled = 0;
    for (const auto& [k, n] : counts)
      if (k != 0) labeled += n;
    line("labels", std::to_string(counts.size() - (counts.count(0) ? 1 : 0)) + " classes, " +
                       std::to_string(labeled) + " of " + std::to_string(buf.size()) + " pixels labeled" +
                       (invalid ? ", " + std::to_string(invalid) + " invalid (ignore value)" : ""));
    // a measured band or a [bands x pixels] matrix read as a raster has thousands of values: not classes
    constexpr std::size_t kMaxClasses = 1000;
    if (counts.size() > kMaxClasses) {
      std::cout << "  (" << counts.size() << " distinct values, more than " << kMaxClasses
                << ": not listed; a label raster holds class ids; a 2-D MATLAB [bands x pixels] matrix needs --image-size ROWSxCOLS)\n";
      counts.clear();
    }
    for (const auto& [k, n] : counts) {
      std::cout << "  class " << std::right << std::setw(6) << k << ": " << std::setw(10) << n << (k == 0 ? "  (unlabeled)" : "")
                << "\n";
    }
  }
}

// --decode-all: times a decode of every row into float32 BIP (and --checksum hashes it).
void time_decode_all(const io::Scene& s, const po::variables_map& vm, int threads, bool want_checksum) {
  const std::size_t row_floats = s.cols() * s.bands();
  // ~1 MiB of floats, so the consumer's buffer stays in L2 as a streaming consumer's would (--block-rows
  // overrides it; scripts/bench_decode.sh reports the rate this default gives).
  std::size_t block = std::max<std::size_t>(1, (1u << 20) / (row_floats * sizeof(float)));
  if (vm.count("block-rows")) {
    const long b = vm["block-rows"].as<long>();
    if (b < 1) throw ConfigError("--block-rows: expected at least 1");
    block = static_cast<std::size_t>(b);
  }
  const std::uint64_t before = s.bytes_read();
  std::uint64_t sum = 0;
  const double secs = decode_all(s, block, threads, want_checksum ? &sum : nullptr);
  const std::uint64_t src = s.bytes_read() - before;
  const double out_bytes = static_cast<double>(s.rows() * row_floats * sizeof(float));
  std::ostringstream o;
  o << std::fixed << std::setprecision(4) << secs << " s, " << std::setprecision(1)
    << static_cast<double>(src) / secs / 1e6 << " MB/s of source, " << out_bytes / secs / 1e6
    << " MB/s of float32 out (" << s.rows() << " rows in blocks of " << block << ", " << threads << " thread"
    << (threads > 1 ? "s" : "") << ", " << src << " bytes read)";
  line("decode-all", o.str());
  if (want_checksum) line("checksum", "xxh3-64 " + hex64(sum) + " of the float32 BIP cube");
}

int run_info(int argc, char** argv) {
  po::options_description desc("info options");
  desc.add_options()
      ("scene", po::value<std::string>(), "FILE[:VAR] (ENVI header or data file, .mat:var, .h5:/dataset, GDAL raster)")
      ("axes", po::value<std::string>()->default_value("hwb"), "HDF5 input: axis order hwb | bhw | whb")
      ("image-size", po::value<std::string>(), "ROWSxCOLS of a 2-D MATLAB [bands x pixels] matrix (default: the file's nRow/nCol, lines/cols or nr/nc)")
      ("decode-all", po::bool_switch(), "time a decode of every row into float32 BIP and print MB/s")
      ("block-rows", po::value<long>(), "--decode-all: rows per read_rows call (default: about 1 MiB of floats)")
      ("threads", po::value<int>()->default_value(1), "--decode-all: threads decoding disjoint row blocks")
      ("checksum", po::bool_switch(), "--decode-all: also print the XXH3-64 of the decoded float32 cube (1 thread)");
  po::positional_options_description pos;
  pos.add("scene", 1);
  const Parsed a = parse(argc, argv, "info", "FILE[:VAR] [--decode-all [--block-rows N] [--threads N] [--checksum]]",
                         desc, &pos);
  if (a.help) return 0;
  const auto& vm = a.vm;
  if (!vm.count("scene")) throw ConfigError("hsipipe info: give a scene FILE[:VAR]");
  const int threads = vm["threads"].as<int>();
  if (threads < 1 || threads > 256) throw ConfigError("--threads: expected 1..256");
  const bool want_checksum = vm["checksum"].as<bool>();
  if (want_checksum && threads != 1) throw ConfigError("--checksum: needs --threads 1 (rows are hashed in order)");
  if (want_checksum && !vm["decode-all"].as<bool>()) throw ConfigError("--checksum: only with --decode-all");

  io::SceneSpec spec = io::SceneSpec::parse(vm["scene"].as<std::string>());
  spec.axes = vm["axes"].as<std::string>();
  if (vm.count("image-size")) spec.set_image_size(vm["image-size"].as<std::string>(), "--image-size");
  const auto scene = io::open_scene(spec);
  const io::Scene& s = *scene;

  describe_scene(spec, s);
  if (s.bands() == 1) describe_labels(s);
  if (vm["decode-all"].as<bool>()) time_decode_all(s, vm, threads, want_checksum);
  return 0;
}

}  // namespace

HSIPIPE_COMMAND("info", "describe a scene or label raster (dims, type, bands, classes); --decode-all times a decode",
                run_info);

}  // namespace hsipipe::cli

// io/envi_scene: the ENVI Scene (pread, then convert + byte-swap + de-interleave to float32 BIP) and the
// ENVI writer.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "core/error.hpp"
#include "core/fd.hpp"
#include "core/fs.hpp"
#include "io/envi.hpp"
#include "io/envi_decode.hpp"
#include "io/readers.hpp"

namespace hsipipe::io {

namespace {

void pwrite_all(int fd, const unsigned char* src, std::size_t n, std::uint64_t off, const std::string& path) {
  while (n > 0) {
    const ssize_t put = ::pwrite(fd, src, n, static_cast<off_t>(off));
    if (put < 0) {
      if (errno == EINTR) continue;
      throw IoError(path, "pwrite", errno);
    }
    src += put;
    off += static_cast<std::uint64_t>(put);
    n -= static_cast<std::size_t>(put);
  }
}

std::string human_bytes(std::uint64_t n) { return std::to_string(n) + " bytes"; }

class EnviScene final : public Scene {
 public:
  EnviScene(EnviFiles files, EnviHeader h) : files_(std::move(files)), h_(std::move(h)), fd_(files_.data) {
    struct stat st {};
    if (::fstat(fd_.get(), &st) != 0) throw IoError(files_.data, "fstat", errno);
    if (!S_ISREG(st.st_mode)) throw IoError(files_.data, "not a regular file");
    const std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
    const std::uint64_t expect = h_.header_offset + h_.data_bytes();
    const std::string dims = "samples " + std::to_string(h_.samples) + " x lines " + std::to_string(h_.lines) +
                             " x bands " + std::to_string(h_.bands) + " x " + std::to_string(dtype_size(h_.dtype)) +
                             " bytes (data type " + std::to_string(h_.data_type) + ") + header offset " +
                             std::to_string(h_.header_offset) + " = " + human_bytes(expect);
    if (size < expect) {
      throw FormatError(files_.data, "samples, lines, bands, data type, header offset",
                        "data file is truncated: header " + files_.header + " promises " + dims + ", the file has " +
                            human_bytes(size));
    }
    if (size > expect) {
      throw FormatError(files_.data, "samples, lines, bands, data type, header offset",
                        "data file size disagrees with header " + files_.header + ": " + dims + ", the file has " +
                            human_bytes(size) + " (" + std::to_string(size - expect) + " extra)");
    }
    // Access: pread into a scratch buffer that stays in L2 (read_rows). A read-only mapping decoded in place
    // (HSIPIPE_ENVI_PREAD=0 until issue 34) saves at most that copy: 0.03 s for a 448 MiB scene, a 512 KiB
    // buffer, against 0.19 s for the mapping's page-table updates on the development VM, and the
    // benchmark's reader (`hsipipe info --decode-all`, 1 thread) ran 0.29-0.37 s mapped against 0.11 s
    // with pread (2 Dec 2026). docs/KNOBS.md says why the mapped path was retired.
    // Scenes are decoded front to back in row blocks: let the kernel read ahead generously.
    ::posix_fadvise(fd_.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
    decoder_ = Decoder(h_.dtype, h_.byte_order == 1 ? std::endian::big : std::endian::little, h_.ignore_value);
  }

  std::size_t rows() const override { return h_.lines; }
  std::size_t cols() const override { return h_.samples; }
  std::size_t bands() const override { return h_.bands; }
  DType source_type() const override { return h_.dtype; }
  const BandInfo& band_info() const override { return h_.band_info; }
  std::optional<double> ignore_value() const override { return h_.ignore_value; }
  std::optional<std::uint64_t> declared_classes() const override { return h_.classes; }
  std::string format() const override { return "ENVI"; }
  bool uses_hdf5() const override { return false; }  // pread of the data file, nothing else
  bool rereads_cheaply() const override { return true; }  // raw samples: a read is a conversion at memory speed
  std::vector<std::string> source_files() const override { return {files_.header, files_.data}; }
  std::uint64_t bytes_read() const override { return bytes_read_.load(std::memory_order_relaxed); }

  std::vector<std::pair<std::string, std::string>> details() const override {
    return {{"header", files_.header},
            {"data file", files_.data},
            {"interleave", std::string(interleave_name(h_.interleave))},
            {"byte order", std::to_string(h_.byte_order) + (h_.byte_order ? " (big-endian)" : " (little-endian)") +
                               (h_.byte_order_given ? "" : ", assumed: key missing")},
            {"header offset", std::to_string(h_.header_offset)},
            {"data type", std::to_string(h_.data_type)}};
  }

  void read_rows(std::size_t r0, std::size_t r1, float* out) const override {
    if (r0 > r1 || r1 > h_.lines) {
      throw Error(files_.data + ": read_rows [" + std::to_string(r0) + ", " + std::to_string(r1) +
                  ") is outside the scene's " + std::to_string(h_.lines) + " rows");
    }
    if (r0 == r1) return;
    const std::size_t C = h_.samples, B = h_.bands, es = dtype_size(h_.dtype);
    const std::size_t nrows = r1 - r0;
    bytes_read_.fetch_add(static_cast<std::uint64_t>(nrows) * C * B * es, std::memory_order_relaxed);
    // Row sub-blocks read into a scratch buffer laid out as the file is (BSQ: one run per band),
    // then decoded from there. BIL/BIP pieces of ~512 KiB (at least one row) stay in L2 between the copy
    // and the decode; BSQ pieces are larger so that each band's run is one long read.
    const std::size_t row_bytes = C * B * es;
    const std::size_t piece = h_.interleave == Interleave::bsq ? (16u << 20) : (512u << 10);
    const std::size_t step = std::max<std::size_t>(1, piece / row_bytes);
    // One scratch per thread (read_rows may run on several threads), kept between calls: no page faults.
    thread_local std::vector<unsigned char> scratch;
    if (scratch.size() < std::min(step, nrows) * row_bytes) scratch.resize(std::min(step, nrows) * row_bytes);
    for (std::size_t a = r0; a < r1; a += step) {
      const std::size_t b = std::min(r1, a + step), n = b - a;
      Strides s{};
      if (h_.interleave == Interleave::bsq) {
        for (std::size_t band = 0; band < B; ++band) {
          fd_.pread_all(scratch.data() + band * n * C * es, n * C * es,
                        h_.header_offset + (static_cast<std::uint64_t>(band) * h_.lines + a) * C * es);
        }
        s = {C * es, es, n * C * es};
      } else {
        fd_.pread_all(scratch.data(), n * row_bytes, h_.header_offset + static_cast<std::uint64_t>(a) * row_bytes);
        s = file_strides();
      }
      decoder_(scratch.data(), s, n, C, B, out + (a - r0) * C * B, validity_bands());
    }
  }

 private:
  Strides file_strides() const {
    const std::size_t C = h_.samples, B = h_.bands, L = h_.lines, es = dtype_size(h_.dtype);
    switch (h_.interleave) {
      case Interleave::bip: return {C * B * es, B * es, es};
      case Interleave::bil: return {B * C * es, es, C * es};
      case Interleave::bsq: return {C * es, es, L * C * es};
    }
    return {};
  }

  EnviFiles files_;
  EnviHeader h_;
  ReadFile fd_;  // after files_: opened from files_.data in the constructor's initialiser list
  Decoder decoder_;
  mutable std::atomic<std::uint64_t> bytes_read_{0};
};

}  // namespace

std::unique_ptr<Scene> open_envi(const SceneSpec& spec) {
  if (!spec.variable.empty()) {
    throw ConfigError(spec.str() + ": an ENVI scene has no variables (remove ':" + spec.variable + "')");
  }
  EnviFiles files = find_envi_files(spec.path);
  const std::string text = fs::read_text(files.header, fs::kMaxHeaderBytes);
  EnviHeader h = parse_envi_header(text, files.header);
  return std::make_unique<EnviScene>(std::move(files), std::move(h));
}

// ---------------------------------------------------------------------------------------------
// Writer

EnviWriter::EnviWriter(std::string header_path, std::string data_path, EnviHeader header,
                       std::vector<std::pair<std::string, std::string>> extra_fields)
    : header_path_(std::move(header_path)),
      data_path_(std::move(data_path)),
      h_(std::move(header)),
      extra_(std::move(extra_fields)) {
  if (dtype_to_envi(h_.dtype) == 0) {
    throw ConfigError(header_path_ + ": ENVI has no data type code for " + std::string(dtype_name(h_.dtype)));
  }
  if (h_.samples == 0 || h_.lines == 0 || h_.bands == 0) throw ConfigError(header_path_ + ": empty scene");
  h_.data_type = dtype_to_envi(h_.dtype);
  tmp_path_ = data_path_ + ".tmp-" + std::to_string(::getpid());
  fd_ = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw IoError(tmp_path_, "open for writing", errno);
  if (::ftruncate(fd_, static_cast<off_t>(h_.header_offset + h_.data_bytes())) != 0) {
    const int e = errno;
    ::close(fd_);
    ::unlink(tmp_path_.c_str());
    fd_ = -1;
    throw IoError(tmp_path_, "ftruncate", e);
  }
}

EnviWriter::~EnviWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_path_.c_str());
}

void EnviWriter::write_rows(std::size_t r0, std::size_t r1, const float* bip) {
  if (r0 > r1 || r1 > h_.lines) throw Error(data_path_ + ": write_rows outside the scene");
  const std::size_t C = h_.samples, B = h_.bands, es = dtype_size(h_.dtype), n = r1 - r0;
  if (n == 0) return;
  buf_.resize(n * C * B * es);
  const auto order = h_.byte_order == 1 ? std::endian::big : std::endian::little;
  const std::uint64_t off = h_.header_offset;
  switch (h_.interleave) {
    case Interleave::bip:
      encode_samples(bip, n * C * B, h_.dtype, order, buf_.data());
      pwrite_all(fd_, buf_.data(), buf_.size(), off + static_cast<std::uint64_t>(r0) * C * B * es, tmp_path_);
      break;
    case Interleave::bil: {
      std::vector<float> plane(C);
      for (std::size_t r = 0; r < n; ++r)
        for (std::size_t b = 0; b < B; ++b) {
          for (std::size_t c = 0; c < C; ++c) plane[c] = bip[(r * C + c) * B + b];
          encode_samples(plane.data(), C, h_.dtype, order, buf_.data() + (r * B + b) * C * es);
        }
      pwrite_all(fd_, buf_.data(), buf_.size(), off + static_cast<std::uint64_t>(r0) * C * B * es, tmp_path_);
      break;
    }
    case Interleave::bsq: {
      std::vector<float> plane(n * C);
      for (std::size_t b = 0; b < B; ++b) {
        for (std::size_t i = 0; i < n * C; ++i) plane[i] = bip[i * B + b];
        encode_samples(plane.data(), n * C, h_.dtype, order, buf_.data());
        pwrite_all(fd_, buf_.data(), n * C * es, off + (static_cast<std::uint64_t>(b) * h_.lines + r0) * C * es, tmp_path_);
      }
      break;
    }
  }
}

void EnviWriter::commit() {
  if (committed_) return;
  if (::fsync(fd_) != 0) throw IoError(tmp_path_, "fsync", errno);
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) throw IoError(tmp_path_, "close", errno);
  if (::rename(tmp_path_.c_str(), data_path_.c_str()) != 0) throw IoError(data_path_, "rename", errno);
  committed_ = true;
  try {
    fs::write_text_atomic(header_path_, format_envi_header(h_, extra_));
  } catch (...) {
    ::unlink(data_path_.c_str());  // a data file without its header is half-written
    throw;
  }
}

}  // namespace hsipipe::io

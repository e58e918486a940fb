#pragma once
// io/scene: the one interface every scene format implements (ENVI, MATLAB, GDAL rasters, HDF5).
// Callers see rows x cols x bands of float32, pixel-major (BIP), decoded a block of rows at a time;
// interleave, byte order, storage type and file layout stay inside the reader.
//
// Thread-safety: read_rows() is const and may be called concurrently on one Scene from several
// threads (readers use pread/mmap or their own lock). A Scene is rank-local: no MPI here.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.hpp"

namespace hsipipe::io {

/// Per-band metadata. Vectors are empty when the source does not provide them; when present they
/// have exactly bands() entries.
struct BandInfo {
  std::vector<double> wavelengths;
  std::vector<double> fwhm;
  std::string wavelength_units;  ///< as written by the source ("Nanometers", "Micrometers", ...)
  std::vector<int> bbl;          ///< bad-band list: 1 = good, 0 = bad (ENVI `bbl`)
  double scale_factor = 1.0;     ///< ENVI `reflectance scale factor`; informational, not applied
};

/// What the user named: a path (file, ENVI header, URL) plus an optional variable or dataset
/// (`file.mat:var`, `file.h5:/data`) and, for HDF5 input, the axis order of the stored array.
struct SceneSpec {
  /// What the file is opened as. It decides only what a 2-D MATLAB variable is without an image size
  /// (below): a label raster H x W (labels, any) or nothing (scene: refused, naming the options to add).
  enum class Role { any, scene, labels };

  std::string path;
  std::string variable;     ///< empty = the format's default
  std::string axes = "hwb";  ///< HDF5 input only: hwb | bhw | whb
  /// MATLAB only: a 2-D variable [bands x pixels] (the unmixing data sets' `Y`) is an image of
  /// image_rows x image_cols pixels in column-major order: column p of the matrix is pixel
  /// (row p % image_rows, col p / image_rows), i.e. MATLAB's reshape(Y', rows, cols, bands). 0 x 0: as the
  /// file names them (nRow/nCol, lines/cols or nr/nc), else the variable is a label raster or refused (role).
  /// Never applied to labels (a label raster is H x W).
  std::size_t image_rows = 0, image_cols = 0;
  Role role = Role::any;

  /// Parses "PATH[:VAR]". A ':' inside a URL scheme ("https://") or a Windows-free POSIX path is
  /// handled: the variable is what follows the last ':' when the part before it names an existing
  /// .mat/.h5/.hdf5/.nc file.
  static SceneSpec parse(const std::string& text);
  std::string str() const { return variable.empty() ? path : path + ":" + variable; }
  /// "ROWSxCOLS" (--image-size, INI image_size) into image_rows/image_cols; throws ConfigError naming `what`
  void set_image_size(const std::string& text, const std::string& what);
  /// "ROWSxCOLS", or empty when not set
  std::string image_size() const;
};

struct RemoteStats;     // below: network statistics of a remote scene
struct SourceIdentity;  // below: manifest identity of a remote source

class Scene {
 public:
  virtual ~Scene() = default;
  Scene() = default;
  Scene(const Scene&) = delete;
  Scene& operator=(const Scene&) = delete;

  virtual std::size_t rows() const = 0;
  virtual std::size_t cols() const = 0;
  virtual std::size_t bands() const = 0;
  /// Type of the stored samples before decoding to float32.
  virtual DType source_type() const = 0;
  virtual const BandInfo& band_info() const = 0;
  /// ENVI `data ignore value` (or the format's nodata). A pixel is invalid when ANY of its bands
  /// equals it (or is NaN or infinite in float32, from a float source): read_rows() then writes NaN into
  /// ALL its bands.
  virtual std::optional<double> ignore_value() const = 0;
  /// The bands whose values decide whether a pixel is valid (the rule above): every band unless set. Decode
  /// sets its kept bands, so that a band it drops (a water-absorption band of nodata or NaN) costs no pixel;
  /// the NaN read_rows() writes into an invalid pixel still goes into all its bands. `counts` has bands()
  /// entries (non-zero: the band counts) or none (every band). Set before reading, not beside read_rows().
  /// Throws std::invalid_argument for another size, or when no band counts.
  virtual void set_validity_bands(std::vector<std::uint8_t> counts);
  /// nullptr: every band counts; else bands() flags
  const std::uint8_t* validity_bands() const noexcept { return validity_.empty() ? nullptr : validity_.data(); }

  /// Decodes rows [r0, r1) into `out`, which holds (r1 - r0) * cols() * bands() floats, BIP order:
  /// out[((r - r0) * cols() + c) * bands() + b]. Reads only the bytes those rows need.
  /// Throws FormatError/IoError naming the file on short reads or corrupt blocks.
  virtual void read_rows(std::size_t r0, std::size_t r1, float* out) const = 0;

  /// Rows the format decodes as one unit (a GDAL tile or strip row: asking for any row of it decodes
  /// all of it). Ranks split rows at multiples of it so that no unit is decoded twice. 1 for ENVI.
  virtual std::size_t block_rows() const { return 1; }

  /// Whether read_rows() may call into the HDF5 library (MATLAB v7.3 through matio, HDF5 input, GDAL's HDF
  /// drivers). Debian's parallel HDF5 is not thread-safe: such a scene is never read beside another thread's
  /// HDF5 calls (see cache::overlap_writes, cache/write_pass.cpp). True unless a reader knows better.
  virtual bool uses_hdf5() const { return true; }

  /// Whether rows cost the same to decode in any grouping and again: a raw file read in place (ENVI: the
  /// page cache's bytes, converted at memory speed). Decode then reads such a scene a few rows at a time
  /// (each slice used while in cache), and for the cube layout once per pass (twice, three times with PCA)
  /// rather than holding its decoded float32 rows (twice an int16 scene's size) between passes. False unless
  /// a reader knows better: compressed tiles or chunks (GDAL, HDF5, MATLAB v7.3: a read of part of a chunk
  /// decompresses all of it), MATLAB v5 and remote files are slow to read in slices or again.
  virtual bool rereads_cheaply() const { return false; }

  /// How many classes the file says a classification image holds (ENVI `classes`: ids 0 .. N - 1), when it
  /// says; read_labels() refuses an id beyond.
  virtual std::optional<std::uint64_t> declared_classes() const { return std::nullopt; }

  /// The variable or dataset read (MATLAB, HDF5): the one named, or the default the reader chose; empty for
  /// formats without variables. Recorded in the cache's manifest.
  virtual std::string variable() const { return {}; }
  /// MATLAB [bands x pixels] matrices: the image size used ("ROWSxCOLS", see SceneSpec), else empty.
  virtual std::string image_size() const { return {}; }

  /// Format name for `info` ("ENVI", "MATLAB v5", "GTiff", "HDF5", ...).
  virtual std::string format() const = 0;
  /// Human-readable storage details for `info`: interleave, byte order, compression, tiling.
  virtual std::vector<std::pair<std::string, std::string>> details() const { return {}; }
  /// Files (or URLs) whose bytes this scene reads: the manifest records and hashes them.
  virtual std::vector<std::string> source_files() const = 0;
  /// Bytes read from storage so far by this object (all threads), for decode summaries.
  virtual std::uint64_t bytes_read() const { return 0; }

  /// Remote scenes only (http(s)://, s3://, /vsicurl/, /vsis3/): network statistics of THIS object in
  /// this process so far (rank-local; merge across ranks by summing and pooling latencies_ms).
  /// nullopt for local files.
  virtual std::optional<RemoteStats> remote_stats() const;
  /// Remote scenes only: what the manifest records for the source (URL without credentials, size,
  /// ETag / Last-Modified, content hash). Issues at most one HEAD and one range request; rank-local.
  /// nullopt for local files (the manifest hashes those itself).
  virtual std::optional<SourceIdentity> source_identity() const;

 private:
  std::vector<std::uint8_t> validity_;  ///< set_validity_bands(); empty: every band
};

/// Network statistics of one remote scene; see Scene::remote_stats().
struct RemoteStats {
  std::uint64_t requests = 0;       ///< HTTP requests GDAL issued for this object (GET + HEAD)
  std::uint64_t bytes_fetched = 0;  ///< bytes downloaded for this object
  std::uint64_t bytes_decoded = 0;  ///< float32 bytes read_rows() produced from them
  std::uint64_t retries = 0;        ///< requests GDAL retried after 429/5xx/timeouts
  std::uint64_t block_reads = 0;    ///< read_rows() calls that went to the network
  /// Wall time of each read_rows() call that went to the network, milliseconds (the block reads).
  /// Percentiles: latency_percentile().
  std::vector<double> latencies_ms;
  /// Latency of each HTTP range request (request sent to last byte received), milliseconds, taken
  /// from GDAL's network trace; may be empty for paths GDAL does not trace (then use latencies_ms).
  std::vector<double> request_latencies_ms;
};
/// Nearest-rank percentile (q in [0, 100]) of `ms`; 0 when empty.
inline double latency_percentile(std::vector<double> ms, double q) {
  if (ms.empty()) return 0.0;
  std::sort(ms.begin(), ms.end());
  const double rank = std::ceil(q / 100.0 * static_cast<double>(ms.size()));
  const std::size_t i = rank < 1.0 ? 0 : std::min(ms.size() - 1, static_cast<std::size_t>(rank) - 1);
  return ms[i];
}

/// Identity of a remote source for the manifest; `verify` re-opens the URL and compares.
struct SourceIdentity {
  std::string url;            ///< as given, with user:password and signature/token query values redacted
  std::uint64_t size = 0;     ///< object size in bytes
  std::string etag;           ///< ETag header, empty when the server sends none
  std::string last_modified;  ///< Last-Modified header, empty when absent
  /// "xxh3:<16 hex>" of the object's first `hashed_bytes` = min(size, 64 KiB) bytes: for a COG the
  /// header, IFDs and tile index (tile offsets and byte counts), read with one range request.
  std::string content_hash;
  std::uint64_t hashed_bytes = 0;
};

inline std::optional<RemoteStats> Scene::remote_stats() const { return std::nullopt; }
inline std::optional<SourceIdentity> Scene::source_identity() const { return std::nullopt; }

/// Opens any supported scene: dispatches on the path (".hdr", ENVI data files next to a header,
/// ".mat", ".h5/.hdf5", otherwise GDAL when built with it). Throws FormatError/IoError/ConfigError.
std::unique_ptr<Scene> open_scene(const SceneSpec& spec);
/// Whether open_scene reads `path` as an HDF5 dataset (.h5, .hdf5, .he5: SceneSpec::axes applies)
bool opens_as_hdf5(const std::string& path);

/// An integer label raster (H x W), row-major. `unlabeled` marks pixels that are not samples.
struct LabelImage {
  std::size_t rows = 0, cols = 0;
  std::vector<std::int32_t> labels;  ///< rows * cols, row-major
  std::string source;
  std::string variable;  ///< the variable or dataset read (Scene::variable), empty for formats without
  /// The raster's integral nodata / data ignore value, when it has one: its pixels are not samples (decode),
  /// whatever --ignore-label says
  std::optional<std::int32_t> nodata;
  /// The file's own count of classes (ENVI `classes = N`: ids 0 .. N - 1), when it gives one: decode refuses a
  /// sample's id beyond it (a lying header or the wrong file)
  std::optional<std::uint64_t> declared_classes;
  std::int32_t at(std::size_t r, std::size_t c) const { return labels[r * cols + c]; }
};

/// Reads a label raster in any scene format (must have one band and integral values);
/// throws FormatError naming the file when a value is not an integer or there is more than one band.
/// A pixel equal to the raster's integral nodata/ignore value (masked to NaN by read_rows()) comes back
/// as that integer, and the value is in `nodata`; an ENVI header's `classes = N` is in `declared_classes`.
LabelImage read_labels(const SceneSpec& spec);

/// Throws FormatError naming the label file (field "dimensions") when `labels` is not rows() x cols()
/// of `scene`: every place where a scene and its labels meet calls this before using them together.
void check_labels_match(const Scene& scene, const LabelImage& labels);

}  // namespace hsipipe::io

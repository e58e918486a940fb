#pragma once
// cache/decode: `hsipipe decode`, the collective decode of scenes into one cache (see cache.hpp for
// the format) and `hsipipe verify`.
//
// decode() is COLLECTIVE over `comm`. How the work is shared (every rank computes the same plan):
//  - Sample table: labels are read on every rank (small). For a scene without labels every valid
//    pixel is a sample (label -1); validity needs the pixels, so those scenes get a validity pass:
//    each rank decodes rows split_range(H, R, rank) of the scene, marks pixels whose bands are not
//    NaN, and the masks are all-gathered. The table is then identical on every rank.
//  - Layouts pixel/patch: samples split_range(N, R, rank); a rank decodes only the rows of its
//    samples plus p/2 halo rows, in blocks of rows (bounded memory), and writes its samples.
//    Layout cube: each scene's rows split_range(H_s, R, rank); the rank writes those cube rows.
//    labels/coords: every rank writes its sample range.
//  - Statistics are per scene ROW partials (see preprocess.hpp), each row owned by one rank: the rank
//    holding the row's first sample (labeled statistics, pixel/patch) or the rank whose cube row split
//    holds it (cube, --stats-over all-pixels, scenes without labels). Partials are all-gathered and
//    merged in row order, so statistics (and the cache bytes) do not depend on R.
//  - Passes: 1 statistics; 2 PCA covariance (only with --pca); 3 normalise + write. When a rank's
//    statistics rows are its write rows, the decoded blocks of pass 1 are kept for passes 2 and 3 up
//    to --memory-mb per rank; beyond that blocks are decoded again.
//  - Publication: rank 0 takes PATH.lock (flock; removed when the decode ends), checks an existing PATH
//    (reuse / refuse / --force; a PATH holding files a cache does not is never replaced),
//    builds PATH.tmp-<job> and renames it to PATH after every rank succeeded and the manifest is
//    written. On any failure every rank exits non-zero and rank 0 removes the temporary directory.
//
// Memory between the passes (what would otherwise wait is fresh memory: float32 windows, twice an int16
// scene, or the kept samples):
//  - A scene that decodes again at memory speed (Scene::rereads_cheaply(): ENVI) is not kept between the
//    passes in the pixel and cube layouts: each later pass decodes its rows again, ~1 MiB at a time, and
//    the write pass builds the final bytes (into the npy file's pages, or ~2 MiB row-aligned pieces for h5)
//    while the disk writes back the ones before. Its source_bytes_read is then twice the scene's (three
//    times with --pca) for any rank count: after the statistics pass a rank forgets the shared rows it
//    decoded itself, so each row is decoded once per pass.
//  - Other scenes (GeoTIFF tiles, MATLAB, HDF5, remote): in the pixel layout the statistics pass keeps the
//    rank's sample pixels for the write pass (within --memory-mb), as int16/uint16 when every scene holds
//    such integers; with npy they wait in each sample's own output slot in the file's pages, overwritten in
//    place by the write pass. A value that is not a 16-bit integer drops them and the write pass decodes
//    again (the summary's "samples kept for the write pass:" line; HSIPIPE_TEST_KEEP_SAMPLES=1 keeps an
//    ENVI scene's samples too, for tests and A/B runs).
//  - When the statistics pass reads the write pass's blocks (labeled statistics, the cube layout), its row
//    windows wait for the write pass within --memory-mb (else the write pass decodes again).
//  - Neighbouring ranks need some of the same rows (boundary row, halo, a tiled GeoTIFF's tile row,
//    Scene::block_rows()): each such block is decoded by one rank only and exchanged (Comm::alltoallv), so
//    the bytes decoded are the scene's for any rank count.
//  - Meanwhile every rank hashes a share of the sources' 16 MiB chunks on a thread (source_hasher); the
//    chunked XXH3-64 of core/hash.hpp does not depend on who hashed what. The sink reserves every file's
//    blocks (fallocate) before the statistics pass, so a full disk fails before any write, naming the file.
//  - After the last write rank 0 starts the fsync on a sink thread, beside the checksum and the manifest:
//    the manifest is written only after every file is durable, so a manifest stands for a whole cache.
//
// decode.cpp runs these steps; each lives in its own unit: decode_plan (options, scenes, sample table,
// blocks), row_windows (decoded rows and the boundary-row exchange), decode_passes (statistics, PCA),
// kept_samples, write_pass, source_hasher, reuse (reuse / refuse), publish (lock, rename),
// decode_manifest and decode_report (progress in decode_timing). verify() is verify.cpp.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/cache.hpp"
#include "cache/preprocess.hpp"
#include "dist/mpi.hpp"
#include "io/scene.hpp"

namespace hsipipe::cache {

struct SceneInput {
  std::string name;
  io::SceneSpec scene;
  std::optional<io::SceneSpec> labels;
  /// Where the scene was given, appended to any error opening it: " (scene list FILE line N)"; empty for
  /// --scene and [scene.NAME].
  std::string origin;
};

struct DecodeOptions {
  std::vector<SceneInput> scenes;
  std::string drop_bands;  ///< "108-112,154-167,224", 1-based
  bool bad_bands_from_header = false;
  int ignore_label = 0;
  Layout layout = Layout::pixel;
  int patch = 0;  ///< 0 = not given (patch layout requires it; cube records it, default 1)
  Border border = Border::reflect;
  DType dtype = DType::f32;
  Normalize normalize = Normalize::zscore;
  StatsOver stats_over = StatsOver::labeled;
  int pca = 0;
  std::string backend = "npy";  ///< npy | h5
  std::string out;
  bool force = false;
  std::uint64_t memory_bytes = 1ull << 30;  ///< per rank, decoded blocks kept between passes
  bool progress = true;
};

struct DecodeResult {
  bool reused = false;
  std::string path, data_checksum;
  std::uint64_t n_samples = 0;
};

/// COLLECTIVE. Throws (on every rank) ConfigError for bad options before anything is written.
DecodeResult decode(const DecodeOptions& opts, const dist::Comm& comm);

/// The parameters a cache is built from, as stored in manifest["params"] (compared for reuse), drop_bands
/// in one spelling (canonical_band_list). Throws ConfigError for a malformed --drop-bands.
nlohmann::json decode_params_json(const DecodeOptions& opts);

struct VerifyOptions {
  bool deep = false;        ///< also hash the sources
  std::uint64_t samples = 16;  ///< random items re-decoded from the sources
  std::uint64_t seed = 1;
};
struct VerifyReport {
  std::vector<std::string> problems;  ///< one line per disagreement
  std::vector<std::string> notes;     ///< what was checked
  bool ok() const { return problems.empty(); }
};
/// Rank-local. Manifest vs current sources, data checksum, K random items re-decoded.
/// Throws StaleError/FormatError when the directory is not an openable cache.
VerifyReport verify(const std::string& dir, const VerifyOptions& opts);

}  // namespace hsipipe::cache

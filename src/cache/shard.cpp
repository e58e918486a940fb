// cache/shard: one rank's contiguous range of the cache in memory, and gather(), the loader's hot path.
//
// What is read (and counted in bytes_read()):
//   pixel/patch  rows [begin, end) of samples.npy (pread of exactly that byte range) or of /samples
//                (HDF5 hyperslab, file opened read-only), kept in the cache's element type (float16
//                stays 2 bytes a value in memory and is widened in gather()).
//   cube         coords of [begin, end) (to know the rows), then per scene the rows
//                [min_row - h, max_row + h] of cube_<s>.npy or /cube/<s> (h = p/2), clipped to the scene;
//                and, for the data checksum, the rows the shard owns but does not hold (hash_cube_rows).
//                Out-of-scene neighbours come from the manifest's `border`: "reflect" (numpy's mode
//                'reflect': -1 -> 1, H -> H-2) or "zero".
// gather() output is band-first: [n, B] (p = 1) or [n, B, p, p], the models' input contract.
#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cache/cache.hpp"
#include "cache/npy.hpp"
#include "core/error.hpp"
#include "core/fd.hpp"
#include "core/half.hpp"
#include "core/hash.hpp"
#include "core/simd.hpp"

namespace hsipipe::cache {

namespace {

// ---- float16 -> float32: core's halves_to_floats (F16C where the CPU has it; exact either way) ----

/// Copies n values of the cache's element type at `src` to float32.
inline void to_float(const char* src, bool f16, float* out, std::size_t n) {
  if (f16) halves_to_floats(reinterpret_cast<const std::uint16_t*>(src), out, n);
  else std::memcpy(out, src, n * sizeof(float));
}

// ---- one patch row: p pixels x B values (pixel-major) -> out[b * pp + j], NaN -> 0 ----

void patch_row_scalar(const float* src, std::size_t p, std::size_t B, std::size_t pp, float* out) {
  for (std::size_t j = 0; j < p; ++j)
    for (std::size_t b = 0; b < B; ++b) {
      const float x = src[j * B + b];
      out[b * pp + j] = x == x ? x : 0.0f;
    }
}

#if HSIPIPE_X86
/// AVX2 (p >= 8, B >= 8): 8 pixels x 8 bands per step, NaN masked to 0 and transposed in registers. The
/// last block of each axis is shifted back to end at p (or B), overlapping the one before: the overlap
/// is written twice with the same values, and no scalar tail is left.
/// T: float (float32 cache) or std::uint16_t (float16 cache, widened by F16C in the same loads).
template <class T>
__attribute__((target("avx2,f16c"))) void patch_row_avx2(const T* src, std::size_t p, std::size_t B, std::size_t pp,
                                                         float* out) {
  for (std::size_t jb = 0; jb < p; jb += 8) {
    const std::size_t j0 = std::min(jb, p - 8);
    for (std::size_t bb = 0; bb < B; bb += 8) {
      const std::size_t b0 = std::min(bb, B - 8);
      __m256 r[8];
      for (std::size_t k = 0; k < 8; ++k) {
        const T* q = src + (j0 + k) * B + b0;
        __m256 x;
        if constexpr (std::is_same_v<T, float>) x = _mm256_loadu_ps(q);
        else x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
        r[k] = _mm256_and_ps(x, _mm256_cmp_ps(x, x, _CMP_ORD_Q));  // NaN -> +0
      }
      simd::transpose8(r);
      for (std::size_t k = 0; k < 8; ++k) _mm256_storeu_ps(out + (b0 + k) * pp + j0, r[k]);
    }
  }
}
#endif

void patch_row(const char* src, bool f16, std::size_t p, std::size_t B, std::size_t pp, float* out) {
#if HSIPIPE_X86
  if (p >= 8 && B >= 8 && simd::have_avx2()) {
    if (f16) return patch_row_avx2(reinterpret_cast<const std::uint16_t*>(src), p, B, pp, out);
    return patch_row_avx2(reinterpret_cast<const float*>(src), p, B, pp, out);
  }
#endif
  if (f16) {  // widen the whole run first (F16C where available): the transposes then move floats only
    thread_local std::vector<float> wide;
    wide.resize(p * B);
    halves_to_floats(reinterpret_cast<const std::uint16_t*>(src), wide.data(), p * B);
    src = reinterpret_cast<const char*>(wide.data());
  }
  patch_row_scalar(reinterpret_cast<const float*>(src), p, B, pp, out);
}

// ---- raw reads ----


// ---- HDF5, read-only, RAII ----

class H5Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  H5Handle() = default;
  H5Handle(hid_t id, Closer c, const std::string& what) : id_(id), close_(c) {
    if (id < 0) throw H5Error("HDF5: " + what + " failed");
  }
  ~H5Handle() {
    if (id_ >= 0 && close_) close_(id_);
  }
  H5Handle(H5Handle&& o) noexcept : id_(std::exchange(o.id_, -1)), close_(o.close_) {}
  H5Handle& operator=(H5Handle&& o) noexcept {
    std::swap(id_, o.id_);
    std::swap(close_, o.close_);
    return *this;
  }
  hid_t get() const noexcept { return id_; }

 private:
  hid_t id_ = -1;
  Closer close_ = nullptr;
};

void check_h5(herr_t rc, const std::string& what) {
  if (rc < 0) throw H5Error("HDF5: " + what + " failed");
}

struct H5File {
  std::string path;
  H5Handle file;
  explicit H5File(const std::string& p) : path(p) {
    if (!std::filesystem::exists(p)) throw IoError(p, "open", ENOENT);
    file = H5Handle(H5Fopen(p.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose, "H5Fopen(" + p + ", read-only)");
  }
  /// Reads rows [r0, r0 + nrows) of dataset `name` (first dimension) as raw little-endian elements of
  /// `elem` bytes into dst; returns the dataset's dims.
  std::vector<hsize_t> read_rows(const std::string& name, std::uint64_t r0, std::uint64_t nrows, std::size_t elem,
                                 bool is_float, void* dst) const {
    H5Handle ds(H5Dopen2(file.get(), name.c_str(), H5P_DEFAULT), H5Dclose, "H5Dopen2(" + path + ":" + name + ")");
    H5Handle space(H5Dget_space(ds.get()), H5Sclose, "H5Dget_space(" + name + ")");
    const int rank = H5Sget_simple_extent_ndims(space.get());
    if (rank < 1) throw FormatError(path, name, "not an array");
    std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
    H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
    if (r0 + nrows > dims[0]) {
      throw FormatError(path, name, "has " + std::to_string(dims[0]) + " rows, need rows up to " + std::to_string(r0 + nrows));
    }
    if (nrows == 0) return dims;
    H5Handle ftype(H5Dget_type(ds.get()), H5Tclose, "H5Dget_type(" + name + ")");
    if (H5Tget_size(ftype.get()) != elem) {
      throw FormatError(path, name, "element size " + std::to_string(H5Tget_size(ftype.get())) + " bytes, manifest says " +
                                        std::to_string(elem));
    }
    // Memory type: native float for 4-byte floats (HDF5 converts byte order); for 2-byte halves and
    // integers a little-endian copy of the file type (raw bytes, no conversion).
    H5Handle mtype;
    if (is_float && elem == 4) {
      mtype = H5Handle(H5Tcopy(H5T_NATIVE_FLOAT), H5Tclose, "H5Tcopy");
    } else {
      mtype = H5Handle(H5Tcopy(ftype.get()), H5Tclose, "H5Tcopy");
      check_h5(H5Tset_order(mtype.get(), H5T_ORDER_LE), "H5Tset_order");
    }
    std::vector<hsize_t> start(dims.size(), 0), count = dims;
    start[0] = r0;
    count[0] = nrows;
    check_h5(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
             "H5Sselect_hyperslab(" + name + ")");
    H5Handle mspace(H5Screate_simple(rank, count.data(), nullptr), H5Sclose, "H5Screate_simple");
    check_h5(H5Dread(ds.get(), mtype.get(), mspace.get(), space.get(), H5P_DEFAULT, dst),
             "H5Dread(" + path + ":" + name + " rows " + std::to_string(r0) + ".." + std::to_string(r0 + nrows) + ")");
    return dims;
  }
};

}  // namespace

int reflect_index(long i, long n) {
  if (n == 1) return 0;
  const long period = 2 * (n - 1);
  i %= period;
  if (i < 0) i += period;
  return static_cast<int>(i < n ? i : period - i);
}

struct Shard::Impl {
  Range range;
  Layout layout = Layout::pixel;
  bool f16 = false;
  std::size_t elem = 4;
  int bands = 0;
  int stored_patch = 1;  ///< p of the stored samples (patch layout) or of decode (cube)
  int patch = 1;         ///< p of gather()'s output
  bool zero_border = false;
  std::uint64_t bytes_read = 0;
  std::vector<std::uint64_t> item_hashes;  ///< pixel / patch: its samples'; cube: the rows it owns (hash_cube_rows)
  double hash_seconds = 0;

  // pixel / patch: [range.size(), B, sp, sp] raw
  std::vector<char> samples;

  // cube
  struct SceneRows {
    std::uint32_t rows = 0, cols = 0;  ///< scene size
    std::uint32_t row0 = 0, nrows = 0; ///< rows held
    std::vector<char> data;            ///< [nrows, cols, B] raw
  };
  std::vector<SceneRows> scenes;
  std::vector<std::int32_t> s_scene, s_row, s_col;  ///< per local sample

  void gather_stored(const std::uint64_t* ids, std::size_t n, float* out) const;
  void gather_cube(const std::uint64_t* ids, std::size_t n, float* out) const;
};

namespace {

std::string manifest_str(const nlohmann::json& m, const char* key, const std::string& dir, const std::string& dflt = {}) {
  if (!m.contains(key)) {
    if (!dflt.empty()) return dflt;
    throw FormatError(dir + "/manifest.json", key, "missing");
  }
  if (!m[key].is_string()) throw FormatError(dir + "/manifest.json", key, "expected a string");
  return m[key].get<std::string>();
}
std::int64_t manifest_int(const nlohmann::json& m, const char* key, const std::string& dir, std::int64_t dflt = -1) {
  if (!m.contains(key)) {
    if (dflt >= 0) return dflt;
    throw FormatError(dir + "/manifest.json", key, "missing");
  }
  if (!m[key].is_number_integer()) throw FormatError(dir + "/manifest.json", key, "expected an integer");
  return m[key].get<std::int64_t>();
}

}  // namespace

static void hash_cube_rows(Shard::Impl& impl, const CacheReader& cache, const std::vector<std::int32_t>& coords,
                    std::uint64_t n_samples);

namespace {

/// The manifest's description of the samples (layout, dtype, bands, patch, border, backend) into `impl`,
/// checked against the range and the patch asked for. Returns the cache's n_samples.
std::uint64_t read_layout(const CacheReader& cache, Range range, int patch_override, Shard::Impl& impl, std::string& backend) {
  const auto& m = cache.manifest();
  const std::string& dir = cache.dir();
  const std::string mpath = dir + "/manifest.json";
  impl.range = range;
  impl.layout = layout_from_name(manifest_str(m, "layout", dir));
  const std::string dtype = manifest_str(m, "dtype", dir);
  if (dtype == "float16") impl.f16 = true;
  else if (dtype != "float32") throw FormatError(mpath, "dtype", "expected float32 or float16, found '" + dtype + "'");
  impl.elem = impl.f16 ? 2 : 4;
  impl.bands = static_cast<int>(manifest_int(m, "n_bands", dir));
  const auto n_samples = static_cast<std::uint64_t>(manifest_int(m, "n_samples", dir));
  impl.stored_patch = impl.layout == Layout::pixel ? 1 : static_cast<int>(manifest_int(m, "patch", dir, 1));
  backend = manifest_str(m, "backend", dir);
  const std::string border = manifest_str(m, "border", dir, "reflect");
  if (border != "reflect" && border != "zero") throw FormatError(mpath, "border", "expected reflect or zero, found '" + border + "'");
  impl.zero_border = border == "zero";
  if (range.end > n_samples || range.begin > range.end) {
    throw ConfigError("shard [" + std::to_string(range.begin) + ", " + std::to_string(range.end) + ") outside the cache's " +
                      std::to_string(n_samples) + " samples (" + dir + ")");
  }
  if (impl.bands <= 0) throw FormatError(mpath, "n_bands", "must be positive");
  if (backend != "npy" && backend != "h5") throw FormatError(mpath, "backend", "expected npy or h5, found '" + backend + "'");

  const int p = patch_override > 0 ? patch_override : impl.stored_patch;
  if (p % 2 == 0) throw ConfigError("patch size " + std::to_string(p) + " must be odd");
  if (impl.layout == Layout::pixel && p != 1) {
    throw ConfigError("cache " + dir + " has layout pixel: it cannot give patches of " + std::to_string(p));
  }
  if (impl.layout == Layout::patch && p > impl.stored_patch) {
    throw ConfigError("cache " + dir + " stores " + std::to_string(impl.stored_patch) + "x" +
                      std::to_string(impl.stored_patch) + " patches: cannot give " + std::to_string(p) + "x" + std::to_string(p));
  }
  impl.patch = p;
  return n_samples;
}

/// Pixel and patch layouts: the range's samples, each hashed as read (data_checksum's items).
void load_items(const CacheReader& cache, Shard::Impl& impl) {
  const std::uint64_t nloc = impl.range.size();
  const std::size_t sp = static_cast<std::size_t>(impl.stored_patch);
  const std::uint64_t row_bytes = static_cast<std::size_t>(impl.bands) * sp * sp * impl.elem;
  impl.samples = read_items_raw(cache, impl.range.begin, impl.range.end);
  if (impl.samples.size() != nloc * row_bytes) {
    throw FormatError(cache.dir(), "samples", "read " + std::to_string(impl.samples.size()) + " bytes for " + std::to_string(nloc) +
                                                  " samples, expected " + std::to_string(nloc * row_bytes));
  }
  impl.bytes_read = nloc * row_bytes;
  const auto t0 = std::chrono::steady_clock::now();
  impl.item_hashes.resize(nloc);
  for (std::uint64_t i = 0; i < nloc; ++i) impl.item_hashes[i] = xxh3_64(impl.samples.data() + i * row_bytes, row_bytes);
  impl.hash_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Cube layout: the coordinates of the range's samples, and of the sample after it (where the next rank's
/// checksum rows begin), from coords.npy or the h5 file's /coords.
std::vector<std::int32_t> read_cube_coords(const CacheReader& cache, const Shard::Impl& impl, const std::string& backend,
                                           std::uint64_t n_samples) {
  const std::string& dir = cache.dir();
  const Range range = impl.range;
  const std::uint64_t nloc = range.size();
  const std::uint64_t ncoords = nloc + (nloc > 0 && range.end < n_samples ? 1 : 0);
  std::vector<std::int32_t> coords(ncoords * 3);
  if (backend == "npy") {
    const std::string path = dir + "/coords.npy";
    const NpyHeader h = read_npy_header(path);
    if (h.dtype != DType::i32 || h.shape != std::vector<std::uint64_t>{n_samples, 3}) {
      throw FormatError(path, "shape", "expected int32 [n_samples, 3]");
    }
    if (ncoords) ReadFile(path).pread_all(coords.data(), ncoords * 12, h.data_offset + range.begin * 12);
  } else {
    H5File f(dir + "/cache.h5");
    f.read_rows("/coords", range.begin, ncoords, 4, false, coords.data());
  }
  return coords;
}

/// Cube layout: each sample's scene, row and column, checked against the scenes; per scene, the first and
/// last row of the range's samples (-1: none).
void index_cube_samples(const std::string& dir, const std::vector<std::int32_t>& coords, const std::vector<SceneDims>& sdims,
                        Shard::Impl& impl, std::vector<long>& rmin, std::vector<long>& rmax) {
  const std::uint64_t nloc = impl.range.size(), ncoords = coords.size() / 3;
  impl.s_scene.resize(nloc);
  impl.s_row.resize(nloc);
  impl.s_col.resize(nloc);
  rmin.assign(sdims.size(), std::numeric_limits<long>::max());
  rmax.assign(sdims.size(), -1);
  for (std::uint64_t i = 0; i < ncoords; ++i) {
    const std::int32_t s = coords[i * 3], r = coords[i * 3 + 1], c = coords[i * 3 + 2];
    if (s < 0 || static_cast<std::size_t>(s) >= sdims.size() || r < 0 || c < 0 ||
        static_cast<std::uint32_t>(r) >= sdims[static_cast<std::size_t>(s)].rows ||
        static_cast<std::uint32_t>(c) >= sdims[static_cast<std::size_t>(s)].cols) {
      throw FormatError(dir + "/coords", "sample " + std::to_string(impl.range.begin + i),
                        "coordinates (" + std::to_string(s) + ", " + std::to_string(r) + ", " + std::to_string(c) +
                            ") outside the manifest's scenes");
    }
    if (i == nloc) break;  // the next range's first sample: only its row is used
    impl.s_scene[i] = s;
    impl.s_row[i] = r;
    impl.s_col[i] = c;
    rmin[static_cast<std::size_t>(s)] = std::min<long>(rmin[static_cast<std::size_t>(s)], r);
    rmax[static_cast<std::size_t>(s)] = std::max<long>(rmax[static_cast<std::size_t>(s)], r);
  }
}

/// Cube layout: per scene, the rows of the range's samples plus the patch halo.
void read_cube_rows(const CacheReader& cache, const std::vector<SceneDims>& sdims, const std::vector<long>& rmin,
                    const std::vector<long>& rmax, Shard::Impl& impl) {
  const int h = impl.patch / 2;
  const std::size_t B = static_cast<std::size_t>(impl.bands);
  impl.scenes.resize(sdims.size());
  for (std::size_t s = 0; s < sdims.size(); ++s) {
    auto& sr = impl.scenes[s];
    sr.rows = sdims[s].rows;
    sr.cols = sdims[s].cols;
    if (rmax[s] < 0) continue;  // no sample of this range in scene s
    const long lo = std::max<long>(0, rmin[s] - h), hi = std::min<long>(static_cast<long>(sr.rows) - 1, rmax[s] + h);
    sr.row0 = static_cast<std::uint32_t>(lo);
    sr.nrows = static_cast<std::uint32_t>(hi - lo + 1);
    const std::uint64_t row_bytes = static_cast<std::uint64_t>(sr.cols) * B * impl.elem;
    sr.data = read_items_raw(cache, sr.row0, sr.row0 + sr.nrows, static_cast<int>(s));
    if (sr.data.size() != sr.nrows * row_bytes) {
      throw FormatError(cache.dir(), "cube_" + std::to_string(s), "rows are not " + std::to_string(sr.cols) + " x " + std::to_string(B) +
                                                                      " values as the manifest says");
    }
    impl.bytes_read += sr.data.size();
  }
}

}  // namespace

Shard Shard::load(const CacheReader& cache, Range range, int patch_override) {
  auto impl = std::make_shared<Impl>();
  std::string backend;
  const std::uint64_t n_samples = read_layout(cache, range, patch_override, *impl, backend);
  if (impl->layout != Layout::cube) {
    load_items(cache, *impl);
    return Shard{std::move(impl)};
  }
  const auto& m = cache.manifest();
  if (!m.contains("scenes") || !m["scenes"].is_array() || m["scenes"].empty())
    throw FormatError(cache.dir() + "/manifest.json", "scenes", "missing or empty");
  std::vector<SceneDims> sdims;
  for (const auto& s : m["scenes"]) {
    SceneDims d;
    d.name = s.value("name", std::string());
    d.rows = s.value("rows", 0u);
    d.cols = s.value("cols", 0u);
    sdims.push_back(d);
  }
  const std::vector<std::int32_t> coords = read_cube_coords(cache, *impl, backend, n_samples);
  impl->bytes_read += coords.size() * 4;
  std::vector<long> rmin, rmax;
  index_cube_samples(cache.dir(), coords, sdims, *impl, rmin, rmax);
  read_cube_rows(cache, sdims, rmin, rmax, *impl);
  hash_cube_rows(*impl, cache, coords, n_samples);
  return Shard{std::move(impl)};
}

/// The cube layout's items of data_checksum are its rows (scenes in order, rows top-down). Rows are given to
/// ranks by their samples: with G(i) the row of sample i counted over the scenes in order, the shard of
/// samples [b, e) hashes rows [start(b), start(e)), start(0) = 0, start(N) = all rows, start(i) = G(i)
/// otherwise (G grows with i: samples are in scene, then row-major order). The shards of split_range's
/// ranges, in rank order, thus hash every row once, in order. The rows a shard holds (its samples' rows and
/// the halo) are hashed in memory; the others it owns (rows without a sample near them) are read for this.
static void hash_cube_rows(Shard::Impl& impl, const CacheReader& cache, const std::vector<std::int32_t>& coords,
                    std::uint64_t n_samples) {
  const auto t0 = std::chrono::steady_clock::now();
  const Range range = impl.range;
  const std::uint64_t nloc = range.size();
  if (nloc == 0) return;  // start(b) = start(e): no rows
  std::vector<std::uint64_t> offset(impl.scenes.size() + 1, 0);
  for (std::size_t s = 0; s < impl.scenes.size(); ++s) offset[s + 1] = offset[s] + impl.scenes[s].rows;
  const auto global_row = [&](std::uint64_t k) {  // k: index into coords
    return offset[static_cast<std::size_t>(coords[k * 3])] + static_cast<std::uint64_t>(coords[k * 3 + 1]);
  };
  const std::uint64_t g0 = range.begin == 0 ? 0 : global_row(0);
  const std::uint64_t g1 = range.end == n_samples ? offset.back() : global_row(nloc);
  for (std::size_t s = 0; s < impl.scenes.size(); ++s) {
    const auto& sr = impl.scenes[s];
    const std::uint64_t a = std::max(g0, offset[s]) - offset[s], b = std::min(g1, offset[s + 1]);
    if (b <= offset[s] || a >= sr.rows) continue;
    const std::uint64_t e = b - offset[s];
    const std::uint64_t row_bytes = static_cast<std::uint64_t>(sr.cols) * static_cast<std::uint64_t>(impl.bands) * impl.elem;
    // rows [lo, hi) read from the file, a block of at most ~64 MiB at a time
    const auto hash_read = [&](std::uint64_t lo, std::uint64_t hi) {
      const std::uint64_t per_block = std::max<std::uint64_t>(1, (64ull << 20) / std::max<std::uint64_t>(1, row_bytes));
      for (std::uint64_t r = lo; r < hi; r += per_block) {
        const std::uint64_t r1 = std::min(hi, r + per_block);
        const auto raw = read_items_raw(cache, r, r1, static_cast<int>(s));
        if (raw.size() != (r1 - r) * row_bytes)
          throw FormatError(cache.dir(), "cube_" + std::to_string(s), "rows are not " + std::to_string(sr.cols) + " x " +
                                                                         std::to_string(impl.bands) + " values as the manifest says");
        impl.bytes_read += raw.size();
        for (std::uint64_t i = 0; i < r1 - r; ++i) impl.item_hashes.push_back(xxh3_64(raw.data() + i * row_bytes, row_bytes));
      }
    };
    const std::uint64_t h0 = sr.row0, h1 = static_cast<std::uint64_t>(sr.row0) + sr.nrows;  // held (empty if nrows 0)
    if (sr.nrows == 0 || e <= h0 || a >= h1) {
      hash_read(a, e);
      continue;
    }
    if (a < h0) hash_read(a, h0);
    for (std::uint64_t r = std::max(a, h0); r < std::min(e, h1); ++r)
      impl.item_hashes.push_back(xxh3_64(sr.data.data() + (r - h0) * row_bytes, row_bytes));
    if (e > h1) hash_read(h1, e);
  }
  impl.hash_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Range Shard::range() const noexcept { return impl_->range; }
std::size_t Shard::sample_floats() const noexcept {
  return static_cast<std::size_t>(impl_->bands) * static_cast<std::size_t>(impl_->patch * impl_->patch);
}
int Shard::patch() const noexcept { return impl_->patch; }
int Shard::bands() const noexcept { return impl_->bands; }
std::uint64_t Shard::bytes_read() const noexcept { return impl_->bytes_read; }
const std::vector<std::uint64_t>& Shard::item_hashes() const noexcept { return impl_->item_hashes; }
double Shard::hash_seconds() const noexcept { return impl_->hash_seconds; }

Shard::Raw Shard::raw() const {
  const Impl& s = *impl_;
  Raw r;
  r.layout = s.layout;
  r.f16 = s.f16;
  r.bands = s.bands;
  r.stored_patch = s.layout == Layout::patch ? s.stored_patch : 1;
  r.patch = s.patch;
  r.zero_border = s.zero_border;
  r.samples = s.samples.data();
  for (const auto& sr : s.scenes) r.scenes.push_back({sr.rows, sr.cols, sr.row0, sr.nrows, sr.data.data()});
  r.scene = s.s_scene.data();
  r.row = s.s_row.data();
  r.col = s.s_col.data();
  return r;
}

void Shard::gather(const std::uint64_t* ids, std::size_t n, float* out) const {
  const Impl& s = *impl_;
  for (std::size_t k = 0; k < n; ++k) {
    if (!s.range.contains(ids[k])) {
      throw std::out_of_range("Shard::gather: sample " + std::to_string(ids[k]) + " outside this shard [" +
                              std::to_string(s.range.begin) + ", " + std::to_string(s.range.end) + ")");
    }
  }
  if (s.layout == Layout::cube) s.gather_cube(ids, n, out);
  else s.gather_stored(ids, n, out);
}

void Shard::Impl::gather_stored(const std::uint64_t* ids, std::size_t n, float* out) const {
  const std::size_t B = static_cast<std::size_t>(bands), sp = static_cast<std::size_t>(stored_patch);
  const std::size_t p = static_cast<std::size_t>(patch);
  const std::size_t in_vals = B * sp * sp, out_vals = B * p * p;
  const std::size_t off = (sp - p) / 2;
  for (std::size_t k = 0; k < n; ++k) {
    const char* src = samples.data() + (ids[k] - range.begin) * in_vals * elem;
    float* dst = out + k * out_vals;
    if (p == sp) {
      to_float(src, f16, dst, in_vals);
      continue;
    }
    // centre crop: [B, sp, sp] -> [B, p, p]
    for (std::size_t b = 0; b < B; ++b) {
      for (std::size_t i = 0; i < p; ++i) {
        to_float(src + ((b * sp + off + i) * sp + off) * elem, f16, dst + (b * p + i) * p, p);
      }
    }
  }
}

void Shard::Impl::gather_cube(const std::uint64_t* ids, std::size_t n, float* out) const {
  const std::size_t B = static_cast<std::size_t>(bands), p = static_cast<std::size_t>(patch), pp = p * p;
  const long h = static_cast<long>(p / 2);
  // One patch row at a time: its p pixels are p * B contiguous values in the cube (pixel-major) unless a
  // column falls outside the scene (then they are gathered into `run` first, reflected or zero); patch_row
  // widens them, sets nodata (NaN) to 0 (the band mean after z-score) and transposes them into the
  // band-first output [B, p, p].
  thread_local std::vector<char> run;
  run.resize(p * B * elem);
  for (std::size_t k = 0; k < n; ++k) {
    const std::uint64_t li = ids[k] - range.begin;
    const SceneRows& sr = scenes[static_cast<std::size_t>(s_scene[li])];
    const long r = s_row[li], c = s_col[li];
    float* dst = out + k * B * pp;
    const std::size_t row_bytes = static_cast<std::size_t>(sr.cols) * B * elem;
    if (p == 1) {
      to_float(sr.data.data() + (static_cast<std::size_t>(r) - sr.row0) * row_bytes + static_cast<std::size_t>(c) * B * elem, f16,
               dst, B);
      continue;
    }
    const bool cols_inside = c - h >= 0 && c + h < static_cast<long>(sr.cols);
    for (std::size_t i = 0; i < p; ++i) {
      long rr = r + static_cast<long>(i) - h;
      const bool row_out = rr < 0 || rr >= static_cast<long>(sr.rows);
      if (row_out && zero_border) {
        for (std::size_t b = 0; b < B; ++b) std::fill_n(dst + b * pp + i * p, p, 0.0f);
        continue;
      }
      if (row_out) rr = reflect_index(rr, sr.rows);
      const char* row = sr.data.data() + (static_cast<std::size_t>(rr) - sr.row0) * row_bytes;
      const char* src = row + static_cast<std::size_t>(c - h) * B * elem;
      if (!cols_inside) {
        for (std::size_t j = 0; j < p; ++j) {
          long cc = c + static_cast<long>(j) - h;
          char* q = run.data() + j * B * elem;
          if (cc < 0 || cc >= static_cast<long>(sr.cols)) {
            if (zero_border) {
              std::memset(q, 0, B * elem);  // +0 in float16 and float32
              continue;
            }
            cc = reflect_index(cc, sr.cols);
          }
          std::memcpy(q, row + static_cast<std::size_t>(cc) * B * elem, B * elem);
        }
        src = run.data();
      }
      patch_row(src, f16, p, B, pp, dst + i * p);
    }
  }
}

}  // namespace hsipipe::cache

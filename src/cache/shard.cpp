// cache/shard: one rank's contiguous range of the cache, loaded: held in memory, or streamed (mapped from the
// cache file) when it exceeds the memory it may take. gather() is in shard_gather.cpp.
//
// What is read (and counted in bytes_read()):
//   pixel/patch  rows [begin, end) of samples.npy (pread of exactly that byte range) or of /samples
//                (HDF5 hyperslab, file opened read-only), kept in the cache's element type (float16
//                stays 2 bytes a value in memory and is widened in gather()). Streamed: the same rows
//                through the mapping, once, for their hashes.
//   cube         coords of [begin, end) (to know the rows), then per scene the rows
//                [min_row - h, max_row + h] of cube_<s>.npy or /cube/<s> (h = p/2), clipped to the scene;
//                and, for the data checksum, the rows the shard owns but does not hold (hash_cube_rows).
#include <hdf5.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <filesystem>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "cache/cache.hpp"
#include "cache/npy.hpp"
#include "cache/shard_impl.hpp"
#include "core/error.hpp"
#include "core/fd.hpp"
#include "core/hash.hpp"

namespace hsipipe::cache {

namespace {

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

/// Hashes items [first, first + count) of `items` into `hashes`. Streamed, the mapping is read in order
/// (MADV_SEQUENTIAL) and each 64 MiB block let go once hashed (MADV_DONTNEED: the pages stay in the page
/// cache, reclaimable, and out of this process's memory); then the mapping is marked for random access,
/// the order of the epochs' shuffled batches.
void hash_items(const StoredItems& items, std::uint64_t first, std::uint64_t count, std::vector<std::uint64_t>& hashes) {
  const std::uint64_t ib = items.item_bytes, per_block = std::max<std::uint64_t>(1, (64ull << 20) / std::max<std::uint64_t>(1, ib));
  for (std::uint64_t b = first; b < first + count; b += per_block) {
    const std::uint64_t e = std::min(first + count, b + per_block);
    if (items.streamed())
      for (std::uint64_t g = b; g < e; g += items.mapped.chunk_items ? items.mapped.chunk_items : e - b)
        advise_pages(items.item(g), std::min(e - g, items.mapped.chunk_items ? items.mapped.chunk_items : e - g) * ib, MADV_SEQUENTIAL);
    for (std::uint64_t g = b; g < e; ++g) hashes.push_back(xxh3_64(items.item(g), ib));
    if (items.streamed())
      for (std::uint64_t g = b; g < e; ++g) advise_pages(items.item(g), ib, MADV_DONTNEED);
  }
  if (items.streamed() && items.mapped.file->size()) advise_pages(items.mapped.file->data(), items.mapped.file->size(), MADV_RANDOM);
}

/// Items [begin, end) of the samples array (pixel/patch) or of scene `scene`'s cube rows: read into memory,
/// or mapped when `stream`.
StoredItems stored_items(const CacheReader& cache, std::uint64_t begin, std::uint64_t end, std::uint64_t item_bytes, int scene,
                         bool stream, const std::string& array) {
  StoredItems it;
  it.first = begin;
  it.count = end - begin;
  it.item_bytes = item_bytes;
  if (stream) {
    it.mapped = map_items(cache, begin, end, scene);
    if (it.mapped.item_bytes != item_bytes)
      throw FormatError(cache.dir(), array, "items of " + std::to_string(it.mapped.item_bytes) + " bytes, the manifest says " + std::to_string(item_bytes));
    return it;
  }
  it.owned = read_items_raw(cache, begin, end, scene);
  if (it.owned.size() != it.count * item_bytes)
    throw FormatError(cache.dir(), array, "read " + std::to_string(it.owned.size()) + " bytes for " + std::to_string(it.count) +
                                               " items, expected " + std::to_string(it.count * item_bytes));
  return it;
}

/// Pixel and patch layouts: the range's samples (held, or mapped past `memory_limit`), each hashed
/// (data_checksum's items).
void load_items(const CacheReader& cache, Shard::Impl& impl, std::uint64_t memory_limit) {
  const std::uint64_t nloc = impl.range.size();
  const std::size_t sp = static_cast<std::size_t>(impl.stored_patch);
  const std::uint64_t row_bytes = static_cast<std::size_t>(impl.bands) * sp * sp * impl.elem;
  impl.streamed = nloc * row_bytes > memory_limit;
  impl.samples = stored_items(cache, impl.range.begin, impl.range.end, row_bytes, -1, impl.streamed, "samples");
  impl.bytes_read = nloc * row_bytes;
  const auto t0 = std::chrono::steady_clock::now();
  impl.item_hashes.reserve(nloc);
  hash_items(impl.samples, impl.range.begin, nloc, impl.item_hashes);
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

/// Cube layout: per scene, the rows of the range's samples plus the patch halo (held, or mapped when they
/// exceed `memory_limit` together).
void read_cube_rows(const CacheReader& cache, const std::vector<SceneDims>& sdims, const std::vector<long>& rmin,
                    const std::vector<long>& rmax, Shard::Impl& impl, std::uint64_t memory_limit) {
  const int h = impl.patch / 2;
  const std::size_t B = static_cast<std::size_t>(impl.bands);
  impl.scenes.resize(sdims.size());
  std::uint64_t total = 0;
  for (std::size_t s = 0; s < sdims.size(); ++s) {
    auto& sr = impl.scenes[s];
    sr.rows = sdims[s].rows;
    sr.cols = sdims[s].cols;
    if (rmax[s] < 0) continue;  // no sample of this range in scene s
    const long lo = std::max<long>(0, rmin[s] - h), hi = std::min<long>(static_cast<long>(sr.rows) - 1, rmax[s] + h);
    sr.row0 = static_cast<std::uint32_t>(lo);
    sr.nrows = static_cast<std::uint32_t>(hi - lo + 1);
    total += static_cast<std::uint64_t>(sr.nrows) * sr.cols * B * impl.elem;
  }
  impl.streamed = total > memory_limit;
  for (std::size_t s = 0; s < sdims.size(); ++s) {
    auto& sr = impl.scenes[s];
    if (sr.nrows == 0) continue;
    const std::uint64_t row_bytes = static_cast<std::uint64_t>(sr.cols) * B * impl.elem;
    sr.data = stored_items(cache, sr.row0, sr.row0 + sr.nrows, row_bytes, static_cast<int>(s), impl.streamed, "cube_" + std::to_string(s));
    impl.bytes_read += sr.data.bytes();
  }
}

}  // namespace

Shard Shard::load(const CacheReader& cache, Range range, int patch_override, std::uint64_t memory_limit) {
  auto impl = std::make_shared<Impl>();
  std::string backend;
  const std::uint64_t n_samples = read_layout(cache, range, patch_override, *impl, backend);
  if (impl->layout != Layout::cube) {
    load_items(cache, *impl, memory_limit);
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
  read_cube_rows(cache, sdims, rmin, rmax, *impl, memory_limit);
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
    const std::uint64_t m0 = std::max(a, h0), m1 = std::min(e, h1);
    hash_items(sr.data, m0, m1 - m0, impl.item_hashes);
    if (e > h1) hash_read(h1, e);
  }
  impl.hash_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace hsipipe::cache

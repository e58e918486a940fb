// io/hdf5_input: scenes stored as one HDF5 dataset, `file.h5:/dataset`, axis order hwb | bhw | whb
// (SceneSpec::axes; the letters name the dataset's dimensions from slowest to fastest, C order as h5py
// writes them). A 2-D dataset is H x W, one band, whatever the axes. Any integer (also enum) or float
// type; a block of rows is one hyperslab read of exactly those rows, converted to float32 BIP here.
//
// Optional attributes on the dataset: `wavelength`/`wavelengths`, `fwhm`, `bbl` (numeric, one per band),
// `wavelength units` / `wavelength_units` (string), and the ignore value from `data ignore value`,
// `nodata`, `_FillValue` or `missing_value` (numeric scalar, first found).
//
// This links the PARALLEL HDF5 library but opens input files serially with the default file access
// property list (sec2 driver), which the parallel build supports.
//
// Thread-safety: the Debian HDF5 builds are not thread-safe, so every HDF5 call made by this reader
// runs under one process-wide mutex; concurrent read_rows() calls serialise on the read but convert in
// parallel.
#include <hdf5.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <utility>

#include "core/error.hpp"
#include "io/array_choice.hpp"
#include "io/readers.hpp"
#include "io/sample_kind.hpp"
#include "io/strided_decode.hpp"

namespace hsipipe::io {

namespace {

std::mutex& h5_mutex() {
  static std::mutex mu;
  return mu;
}

/// Move-only owner of one HDF5 identifier, closed with the matching H5xclose (errors ignored: a
/// destructor has no one to tell).
class H5Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  H5Handle() = default;
  H5Handle(hid_t id, Closer close) : id_(id), close_(close) {}
  H5Handle(H5Handle&& o) noexcept : id_(std::exchange(o.id_, H5I_INVALID_HID)), close_(o.close_) {}
  H5Handle& operator=(H5Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, H5I_INVALID_HID);
      close_ = o.close_;
    }
    return *this;
  }
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
  ~H5Handle() { reset(); }
  hid_t get() const noexcept { return id_; }
  explicit operator bool() const noexcept { return id_ >= 0; }
  void reset() noexcept {
    if (id_ >= 0 && close_) close_(id_);
    id_ = H5I_INVALID_HID;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer close_ = nullptr;
};

/// Turns HDF5's automatic error printing off for the current scope (restored on exit): our checks
/// walk the stack into the exception instead.
class QuietH5Errors {
 public:
  QuietH5Errors() {
    H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietH5Errors() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }
  QuietH5Errors(const QuietH5Errors&) = delete;
  QuietH5Errors& operator=(const QuietH5Errors&) = delete;

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

herr_t collect_error(unsigned n, const H5E_error2_t* e, void* data) {
  auto* s = static_cast<std::string*>(data);
  if (n > 0) *s += "; ";
  *s += std::string(e->func_name ? e->func_name : "?") + ": " + (e->desc ? e->desc : "");
  return 0;
}

/// Throws FormatError (exit 3: the input file is damaged or not what it claims, e.g. truncated, a corrupt
/// gzip chunk) naming the file and the HDF5 call, with HDF5's own error stack, when `ret` is negative.
template <class R>
R check_h5(R ret, const char* call, const std::string& file) {
  if (ret >= 0) return ret;
  std::string stack;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_error, &stack);
  H5Eclear2(H5E_DEFAULT);
  throw FormatError(file, call, std::string("failed") + (stack.empty() ? "" : " (HDF5: " + stack + ")"));
}

H5Handle make(hid_t id, H5Handle::Closer close, const char* call, const std::string& file) {
  return H5Handle(check_h5(id, call, file), close);
}

using Kind = SampleKind;

/// Storage kind of an integer/float/enum HDF5 type; nullopt for anything else.
std::optional<Kind> kind_of(hid_t type) {
  H5T_class_t cls = H5Tget_class(type);
  if (cls == H5T_ENUM) {
    H5Handle super(H5Tget_super(type), H5Tclose);
    if (!super) return std::nullopt;
    return kind_of(super.get());
  }
  const std::size_t size = H5Tget_size(type);
  if (cls == H5T_INTEGER) {
    const bool is_signed = H5Tget_sign(type) == H5T_SGN_2;
    switch (size) {
      case 1: return is_signed ? Kind::i8 : Kind::u8;
      case 2: return is_signed ? Kind::i16 : Kind::u16;
      case 4: return is_signed ? Kind::i32 : Kind::u32;
      case 8: return is_signed ? Kind::i64 : Kind::u64;
      default: return std::nullopt;
    }
  }
  if (cls == H5T_FLOAT) {
    if (size == 2) return Kind::f16;
    if (size == 4) return Kind::f32;
    if (size >= 8) return Kind::f64;
  }
  return std::nullopt;
}

std::string type_name(hid_t type) {
  if (auto k = kind_of(type)) {
    static const char* names[] = {"int8", "uint8", "int16", "uint16", "int32", "uint32",
                                  "int64", "uint64", "float16", "float32", "float64"};
    return names[static_cast<int>(*k)];
  }
  switch (H5Tget_class(type)) {
    case H5T_STRING: return "string";
    case H5T_COMPOUND: return "compound";
    case H5T_ARRAY: return "array";
    case H5T_VLEN: return "vlen";
    case H5T_REFERENCE: return "reference";
    case H5T_OPAQUE: return "opaque";
    case H5T_BITFIELD: return "bitfield";
    default: return "unsupported type";
  }
}

/// The native HDF5 memory type of T (the in-memory type with_sample_type() hands over).
template <class T>
hid_t native_type() {
  if constexpr (std::is_same_v<T, std::int8_t>) return H5T_NATIVE_INT8;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return H5T_NATIVE_UINT8;
  else if constexpr (std::is_same_v<T, std::int16_t>) return H5T_NATIVE_INT16;
  else if constexpr (std::is_same_v<T, std::uint16_t>) return H5T_NATIVE_UINT16;
  else if constexpr (std::is_same_v<T, std::int32_t>) return H5T_NATIVE_INT32;
  else if constexpr (std::is_same_v<T, std::uint32_t>) return H5T_NATIVE_UINT32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return H5T_NATIVE_INT64;
  else if constexpr (std::is_same_v<T, std::uint64_t>) return H5T_NATIVE_UINT64;
  else if constexpr (std::is_same_v<T, float>) return H5T_NATIVE_FLOAT;
  else return H5T_NATIVE_DOUBLE;
}

std::vector<std::size_t> dims_of(hid_t dset) {
  H5Handle space(H5Dget_space(dset), H5Sclose);
  if (!space) return {};
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank <= 0) return {};
  std::vector<hsize_t> d(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), d.data(), nullptr);
  return {d.begin(), d.end()};
}

struct ListState {
  std::vector<detail::ArrayEntry>* out;
};
herr_t list_dataset(hid_t group, const char* name, const H5L_info_t* info, void* data) {
  auto* st = static_cast<ListState*>(data);
  if (info->type != H5L_TYPE_HARD || st->out->size() >= 1000) return 0;
  H5Handle obj(H5Oopen(group, name, H5P_DEFAULT), H5Oclose);
  if (!obj || H5Iget_type(obj.get()) != H5I_DATASET) return 0;
  detail::ArrayEntry e;
  e.name = std::string("/") + name;
  e.dims = dims_of(obj.get());
  H5Handle type(H5Dget_type(obj.get()), H5Tclose);
  e.type = type ? type_name(type.get()) : "unknown";
  e.numeric = type && kind_of(type.get()).has_value();
  st->out->push_back(std::move(e));
  return 0;
}

std::optional<std::vector<double>> numeric_attribute(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) <= 0) return std::nullopt;
  H5Handle attr(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  if (!attr) return std::nullopt;
  H5Handle type(H5Aget_type(attr.get()), H5Tclose);
  if (!type || !kind_of(type.get())) return std::nullopt;
  H5Handle space(H5Aget_space(attr.get()), H5Sclose);
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  if (n <= 0) return std::nullopt;
  std::vector<double> v(static_cast<std::size_t>(n));
  if (H5Aread(attr.get(), H5T_NATIVE_DOUBLE, v.data()) < 0) return std::nullopt;
  return v;
}

std::optional<std::string> string_attribute(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) <= 0) return std::nullopt;
  H5Handle attr(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  H5Handle type(attr ? H5Aget_type(attr.get()) : H5I_INVALID_HID, H5Tclose);
  if (!type || H5Tget_class(type.get()) != H5T_STRING) return std::nullopt;
  H5Handle space(H5Aget_space(attr.get()), H5Sclose);
  if (H5Sget_simple_extent_npoints(space.get()) != 1) return std::nullopt;
  if (H5Tis_variable_str(type.get()) > 0) {
    H5Handle mem(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mem.get(), H5T_VARIABLE);
    H5Tset_cset(mem.get(), H5Tget_cset(type.get()));
    char* s = nullptr;
    if (H5Aread(attr.get(), mem.get(), &s) < 0 || !s) return std::nullopt;
    std::string out(s);
    H5free_memory(s);
    return out;
  }
  const std::size_t size = H5Tget_size(type.get());
  std::string out(size, '\0');
  if (H5Aread(attr.get(), type.get(), out.data()) < 0) return std::nullopt;
  out.resize(std::strlen(out.c_str()));
  return out;
}

class Hdf5Scene final : public Scene {
 public:
  Hdf5Scene(std::string path, std::string dataset, std::string axes, H5Handle file, H5Handle dset, Kind kind,
            std::vector<std::size_t> stored)
      : path_(std::move(path)), dataset_(std::move(dataset)), axes_(std::move(axes)), file_(std::move(file)),
        dset_(std::move(dset)), kind_(kind), stored_(std::move(stored)) {
    if (stored_.size() == 2) {
      axes_ = "hw";
      hpos_ = 0;
      wpos_ = 1;
    } else {
      hpos_ = axes_.find('h');
      wpos_ = axes_.find('w');
      bpos_ = axes_.find('b');
      bands_ = stored_.at(bpos_);
    }
    rows_ = stored_.at(hpos_);
    cols_ = stored_.at(wpos_);
    load_metadata();
  }
  ~Hdf5Scene() override {
    std::lock_guard lock(h5_mutex());
    dset_.reset();
    file_.reset();
  }

  std::size_t rows() const override { return rows_; }
  std::size_t cols() const override { return cols_; }
  std::size_t bands() const override { return bands_; }
  DType source_type() const override { return sample_kind_dtype(kind_); }
  const BandInfo& band_info() const override { return info_; }
  std::optional<double> ignore_value() const override { return ignore_; }
  std::string format() const override { return "HDF5"; }
  std::string variable() const override { return dataset_; }
  std::vector<std::string> source_files() const override { return {path_}; }
  std::uint64_t bytes_read() const override { return bytes_read_.load(); }
  std::vector<std::pair<std::string, std::string>> details() const override { return details_; }

  void read_rows(std::size_t r0, std::size_t r1, float* out) const override {
    if (r0 > r1 || r1 > rows_) {
      throw std::out_of_range(path_ + ": read_rows [" + std::to_string(r0) + ", " + std::to_string(r1) +
                              ") outside 0.." + std::to_string(rows_));
    }
    if (r0 == r1) return;
    const std::size_t n = r1 - r0;
    // Slab in stored order: the row axis restricted to [r0, r1), the others whole.
    const std::size_t rank = stored_.size();
    std::vector<hsize_t> start(rank, 0), count(stored_.begin(), stored_.end());
    start[hpos_] = r0;
    count[hpos_] = n;
    // Element strides of the slab (C order) for each of our axes.
    std::vector<std::ptrdiff_t> cstride(rank, 1);
    for (std::size_t i = rank; i-- > 1;) cstride[i - 1] = cstride[i] * static_cast<std::ptrdiff_t>(count[i]);
    detail::Strides s;
    s.row = cstride[hpos_];
    s.col = cstride[wpos_];
    s.band = rank == 3 ? cstride[bpos_] : 1;

    with_sample_type(kind_, [&](auto tag) {
      using T = decltype(tag);
      const hid_t memtype = native_type<T>();
      std::vector<T> buf(n * cols_ * bands_);
      {
        std::lock_guard lock(h5_mutex());
        QuietH5Errors quiet;
        H5Handle fspace = make(H5Dget_space(dset_.get()), H5Sclose, "H5Dget_space", path_);
        check_h5(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
                 "H5Sselect_hyperslab", path_);
        H5Handle mspace = make(H5Screate_simple(static_cast<int>(rank), count.data(), nullptr), H5Sclose,
                               "H5Screate_simple", path_);
        check_h5(H5Dread(dset_.get(), memtype, mspace.get(), fspace.get(), H5P_DEFAULT, buf.data()),
                 ("H5Dread of " + dataset_ + " rows " + std::to_string(r0) + ".." + std::to_string(r1 - 1)).c_str(),
                 path_);
      }
      bytes_read_ += buf.size() * storage_size_;
      detail::gather_to_bip(buf.data(), s, n, cols_, bands_, ignore_, validity_bands(), out);
    });
  }

 private:
  // Caller holds no lock; called from the constructor only.
  void load_metadata() {
    std::lock_guard lock(h5_mutex());
    QuietH5Errors quiet;
    const hid_t d = dset_.get();
    H5Handle type(H5Dget_type(d), H5Tclose);
    storage_size_ = type ? H5Tget_size(type.get()) : 0;
    auto per_band = [&](std::initializer_list<const char*> names) -> std::vector<double> {
      for (const char* nm : names) {
        if (auto v = numeric_attribute(d, nm); v && v->size() == bands_) return *v;
      }
      return {};
    };
    info_.wavelengths = per_band({"wavelength", "wavelengths"});
    info_.fwhm = per_band({"fwhm"});
    for (double b : per_band({"bbl"})) info_.bbl.push_back(b != 0.0 ? 1 : 0);
    for (const char* nm : {"wavelength units", "wavelength_units"}) {
      if (auto s = string_attribute(d, nm)) {
        info_.wavelength_units = *s;
        break;
      }
    }
    if (auto v = numeric_attribute(d, "reflectance scale factor"); v && v->size() == 1) info_.scale_factor = (*v)[0];
    for (const char* nm : {"data ignore value", "nodata", "_FillValue", "missing_value"}) {
      if (auto v = numeric_attribute(d, nm); v && v->size() == 1) {
        ignore_ = (*v)[0];
        details_.emplace_back("ignore value from", std::string("attribute '") + nm + "'");
        break;
      }
    }
    std::string dims;
    for (std::size_t i = 0; i < stored_.size(); ++i) dims += (i ? " x " : "") + std::to_string(stored_[i]);
    details_.insert(details_.begin(), {{"dataset", dataset_}, {"axes", axes_}, {"stored dims", dims},
                                       {"stored type", type ? type_name(type.get()) : "?"}});
    H5Handle dcpl(H5Dget_create_plist(d), H5Pclose);
    if (dcpl) {
      const H5D_layout_t layout = H5Pget_layout(dcpl.get());
      std::string lay = layout == H5D_CHUNKED ? "chunked" : layout == H5D_COMPACT ? "compact" : "contiguous";
      if (layout == H5D_CHUNKED) {
        std::vector<hsize_t> chunk(stored_.size());
        H5Pget_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data());
        lay += " (";
        for (std::size_t i = 0; i < chunk.size(); ++i) lay += (i ? " x " : "") + std::to_string(chunk[i]);
        lay += ")";
      }
      details_.emplace_back("layout", lay);
      const int nf = H5Pget_nfilters(dcpl.get());
      std::string filters;
      for (int i = 0; i < nf; ++i) {
        unsigned flags = 0, cd[8];
        std::size_t ncd = 8;
        char name[64] = {0};
        H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &ncd, cd, sizeof name, name, nullptr);
        filters += (i ? ", " : "") + std::string(name);
      }
      details_.emplace_back("filters", filters.empty() ? "none" : filters);
    }
  }

  std::string path_, dataset_, axes_;
  H5Handle file_, dset_;  // dset_ is destroyed first (reverse order), under h5_mutex in the destructor
  Kind kind_;
  std::vector<std::size_t> stored_;
  std::size_t rows_ = 0, cols_ = 0, bands_ = 1, storage_size_ = 0;
  std::size_t hpos_ = 0, wpos_ = 1, bpos_ = 2;  // positions of h, w, b among the stored dimensions
  BandInfo info_;
  std::optional<double> ignore_;
  std::vector<std::pair<std::string, std::string>> details_;
  mutable std::atomic<std::uint64_t> bytes_read_{0};
};

}  // namespace

std::unique_ptr<Scene> open_hdf5(const SceneSpec& spec) {
  const std::string& path = spec.path;
  std::string axes = spec.axes.empty() ? "hwb" : spec.axes;
  std::transform(axes.begin(), axes.end(), axes.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (axes != "hwb" && axes != "bhw" && axes != "whb") {
    throw ConfigError(spec.str() + ": axes '" + spec.axes + "' is not one of hwb, bhw, whb");
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw IoError(path, "no such file");

  std::unique_lock lock(h5_mutex());
  QuietH5Errors quiet;
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    throw FormatError(path, "header", "not an HDF5 file");
  }
  H5Handle file = make(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose, "H5Fopen", path);

  std::vector<detail::ArrayEntry> entries;
  ListState st{&entries};
  check_h5(H5Lvisit(file.get(), H5_INDEX_NAME, H5_ITER_INC, list_dataset, &st), "H5Lvisit", path);

  std::string want = spec.variable;
  if (!want.empty() && want.front() != '/') want = "/" + want;
  const detail::ArrayEntry& chosen = want.empty() ? detail::choose_default_array(entries, path, "dataset")
                                                  : detail::find_array(entries, want, path, "dataset");
  if (!chosen.numeric) {
    throw FormatError(path, chosen.name, "dataset holds " + chosen.type + ", not integers or floats");
  }
  if (chosen.dims.size() != 2 && chosen.dims.size() != 3) {
    throw FormatError(path, chosen.name,
                      "dataset has " + std::to_string(chosen.dims.size()) +
                          " dimensions; a scene has 3 (axes " + axes + ") or 2 (one band)");
  }
  for (std::size_t d : chosen.dims) {
    if (d == 0) throw FormatError(path, chosen.name, "dataset is empty");
  }
  H5Handle dset = make(H5Dopen2(file.get(), chosen.name.c_str(), H5P_DEFAULT), H5Dclose, "H5Dopen2", path);
  H5Handle type = make(H5Dget_type(dset.get()), H5Tclose, "H5Dget_type", path);
  const Kind kind = *kind_of(type.get());
  type.reset();
  lock.unlock();
  return std::make_unique<Hdf5Scene>(path, chosen.name, axes, std::move(file), std::move(dset), kind, chosen.dims);
}

}  // namespace hsipipe::io

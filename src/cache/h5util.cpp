#include "cache/h5util.hpp"

namespace hsipipe::cache::h5 {

namespace {
herr_t collect(unsigned n, const H5E_error2_t* e, void* data) {
  auto* out = static_cast<std::string*>(data);
  if (n > 4) return 0;
  *out += "\n    ";
  *out += e->func_name ? e->func_name : "?";
  *out += ": ";
  *out += e->desc ? e->desc : "";
  return 0;
}
}  // namespace

void fail(const char* call, const std::string& file, const std::source_location& loc) {
  std::string stack;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect, &stack);
  H5Eclear2(H5E_DEFAULT);
  throw H5Error(file + ": HDF5 call " + call + " failed at " + loc.file_name() + ":" + std::to_string(loc.line()) +
                (stack.empty() ? std::string() : "; HDF5 error stack:" + stack));
}

void Id::reset() noexcept {
  if (id_ < 0) return;
  if (H5Iis_valid(id_) > 0) {
    switch (H5Iget_type(id_)) {
      case H5I_FILE: H5Fclose(id_); break;
      case H5I_GROUP: H5Gclose(id_); break;
      case H5I_DATASET: H5Dclose(id_); break;
      case H5I_DATASPACE: H5Sclose(id_); break;
      case H5I_DATATYPE: H5Tclose(id_); break;
      case H5I_ATTR: H5Aclose(id_); break;
      case H5I_GENPROP_LST: H5Pclose(id_); break;
      default: H5Idec_ref(id_); break;
    }
  }
  id_ = H5I_INVALID_HID;
}

void Id::close(const std::string& file) {
  if (id_ < 0) return;
  const hid_t id = std::exchange(id_, H5I_INVALID_HID);
  herr_t rc = 0;
  switch (H5Iget_type(id)) {
    case H5I_FILE: rc = H5Fclose(id); break;
    case H5I_DATASET: rc = H5Dclose(id); break;
    default: rc = H5Idec_ref(id) < 0 ? -1 : 0; break;
  }
  check(rc, "H5Fclose/H5Dclose", file);
}

Silence::Silence() {
  H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}
Silence::~Silence() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }

Id file_type(DType t) {
  switch (t) {
    case DType::f16: {
      Id ty(check(H5Tcopy(H5T_IEEE_F32LE), "H5Tcopy", "float16 type"));
      check(H5Tset_fields(ty, 15, 10, 5, 0, 10), "H5Tset_fields", "float16 type");
      check(H5Tset_size(ty, 2), "H5Tset_size", "float16 type");
      check(H5Tset_ebias(ty, 15), "H5Tset_ebias", "float16 type");
      check(H5Tset_precision(ty, 16), "H5Tset_precision", "float16 type");
      return ty;
    }
    case DType::f32: return Id(check(H5Tcopy(H5T_IEEE_F32LE), "H5Tcopy", "float32 type"));
    case DType::f64: return Id(check(H5Tcopy(H5T_IEEE_F64LE), "H5Tcopy", "float64 type"));
    case DType::i32: return Id(check(H5Tcopy(H5T_STD_I32LE), "H5Tcopy", "int32 type"));
    case DType::i64: return Id(check(H5Tcopy(H5T_STD_I64LE), "H5Tcopy", "int64 type"));
    case DType::u64: return Id(check(H5Tcopy(H5T_STD_U64LE), "H5Tcopy", "uint64 type"));
    default: throw H5Error("cache: no HDF5 file type for " + std::string(dtype_name(t)));
  }
}

Id mem_type(DType t) { return file_type(t); }  // little-endian host: identical bytes, no conversion

DType dtype_of(hid_t type, const std::string& file, const std::string& dataset) {
  const H5T_class_t cls = H5Tget_class(type);
  const std::size_t size = H5Tget_size(type);
  if (cls == H5T_FLOAT) {
    if (size == 2) return DType::f16;
    if (size == 4) return DType::f32;
    if (size == 8) return DType::f64;
  } else if (cls == H5T_INTEGER) {
    const bool sgn = H5Tget_sign(type) == H5T_SGN_2;
    if (size == 4 && sgn) return DType::i32;
    if (size == 8) return sgn ? DType::i64 : DType::u64;
  }
  throw FormatError(file, dataset, "unsupported stored element type (class " + std::to_string(cls) + ", " +
                                       std::to_string(size) + " bytes)");
}

std::vector<hsize_t> dims(hid_t dataset, const std::string& file) {
  Id space(check(H5Dget_space(dataset), "H5Dget_space", file));
  const int nd = check(H5Sget_simple_extent_ndims(space), "H5Sget_simple_extent_ndims", file);
  std::vector<hsize_t> d(static_cast<std::size_t>(nd));
  if (nd > 0) check(H5Sget_simple_extent_dims(space, d.data(), nullptr), "H5Sget_simple_extent_dims", file);
  return d;
}

std::string read_string_attribute(hid_t obj, const char* name, const std::string& file) {
  Id attr(check(H5Aopen(obj, name, H5P_DEFAULT), "H5Aopen", file));
  Id type(check(H5Aget_type(attr), "H5Aget_type", file));
  if (H5Tis_variable_str(type) > 0) {
    Id mt(check(H5Tcopy(H5T_C_S1), "H5Tcopy", file));
    check(H5Tset_size(mt, H5T_VARIABLE), "H5Tset_size", file);
    char* p = nullptr;
    check(H5Aread(attr, mt, &p), "H5Aread", file);
    std::string s = p ? p : "";
    H5free_memory(p);
    return s;
  }
  const std::size_t n = H5Tget_size(type);
  std::string s(n, '\0');
  // read with the stored type itself: a NULLTERM memory type of the same size would drop the last byte
  check(H5Aread(attr, type, s.data()), "H5Aread", file);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

}  // namespace hsipipe::cache::h5

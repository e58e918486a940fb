#pragma once
// cache/h5util: internal to cache. Move-only RAII for HDF5 identifiers and one check that turns a
// failed call into an H5Error carrying the call, the file, file:line and HDF5's own error stack.
// The library's automatic stack printing is switched off by the first H5Silence in scope.
#include <hdf5.h>

#include <source_location>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"

namespace hsipipe::cache::h5 {

/// Throws H5Error when rc < 0 (herr_t or hid_t), naming `call`, `file`, the source line and the
/// messages on HDF5's error stack.
[[noreturn]] void fail(const char* call, const std::string& file, const std::source_location& loc);
template <class T>
T check(T rc, const char* call, const std::string& file,
        const std::source_location& loc = std::source_location::current()) {
  if (rc < 0) fail(call, file, loc);
  return rc;
}
#define HSIPIPE_H5(call, file) ::hsipipe::cache::h5::check((call), #call, (file))

/// Owns one hid_t of any kind; closes it with H5Idec_ref-equivalent H5*close by type, never throws.
class Id {
 public:
  Id() = default;
  explicit Id(hid_t id) : id_(id) {}
  ~Id() { reset(); }
  Id(Id&& o) noexcept : id_(std::exchange(o.id_, H5I_INVALID_HID)) {}
  Id& operator=(Id&& o) noexcept {
    if (this != &o) { reset(); id_ = std::exchange(o.id_, H5I_INVALID_HID); }
    return *this;
  }
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  hid_t get() const noexcept { return id_; }
  operator hid_t() const noexcept { return id_; }  // NOLINT: used as an argument everywhere
  void reset() noexcept;
  /// Closes now, reporting failures (files: flushes data); the destructor would swallow them.
  void close(const std::string& file);

 private:
  hid_t id_ = H5I_INVALID_HID;
};

/// Turns HDF5's automatic error printing off for its lifetime (errors reach us through check()).
class Silence {
 public:
  Silence();
  ~Silence();
  Silence(const Silence&) = delete;
  Silence& operator=(const Silence&) = delete;

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

/// A file type (little-endian) for the cache element types; f16 is IEEE binary16 built from F32LE,
/// which h5py maps to numpy float16.
Id file_type(DType t);
/// Native memory type with the same bytes as the file type (f16: the same half type).
Id mem_type(DType t);
/// The DType of a dataset's stored type (f16 recognised by size 2 and float class); throws FormatError.
DType dtype_of(hid_t type, const std::string& file, const std::string& dataset);

/// Dimensions of a dataset's dataspace.
std::vector<hsize_t> dims(hid_t dataset, const std::string& file);

/// Reads a whole (small) string attribute.
std::string read_string_attribute(hid_t obj, const char* name, const std::string& file);

}  // namespace hsipipe::cache::h5

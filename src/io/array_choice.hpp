#pragma once
// io/array_choice: which array of a container file (.mat variables, HDF5 datasets) a scene reads when
// the user names none (internal to io). Rule: the only array that could be the scene (a 3-D numeric array,
// or a MATLAB 2-D [bands x pixels] matrix whose pixel count is the image size); failing that, the only 2-D
// numeric array with both sides > 1 (a label raster: one band). Anything else is ambiguous, and the
// error lists the candidates with their shapes and what the file holds, so the user can write `file:variable`.
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace hsipipe::io::detail {

struct ArrayEntry {
  std::string name;
  std::vector<std::size_t> dims;  ///< as the format reports them (MATLAB order / HDF5 order)
  std::string type;               ///< "int16", "double", "cell", "struct", "compound", ...
  bool numeric = false;           ///< real integer or floating point array that a scene can read
};

inline std::string describe_arrays(const std::vector<ArrayEntry>& entries) {
  if (entries.empty()) return "(none)";
  constexpr std::size_t kShown = 24;  // enough to spot a name; a file with thousands stays readable
  std::string s;
  for (const auto& e : entries) {
    if (&e - entries.data() == static_cast<std::ptrdiff_t>(kShown)) {
      s += " ... and " + std::to_string(entries.size() - kShown) + " more";
      break;
    }
    if (!s.empty()) s += ", ";
    s += e.name + " (";
    for (std::size_t i = 0; i < e.dims.size(); ++i) s += (i ? "x" : "") + std::to_string(e.dims[i]);
    s += (e.dims.empty() ? "" : " ") + e.type + ")";
  }
  return s;
}

/// Picks the default array or throws FormatError(file, field, ...) listing every array found. `matrix`,
/// when given, tells which 2-D arrays read as a [bands x pixels] scene (MATLAB with an image size): they
/// count as scenes beside the 3-D arrays, and more than one scene candidate is refused, each listed with
/// its shape (the unmixing files hold the image `Y` beside the 3-D abundance maps `S_GT`).
inline const ArrayEntry& choose_default_array(const std::vector<ArrayEntry>& entries, const std::string& file,
                                              const std::string& field,
                                              const std::function<bool(const ArrayEntry&)>& matrix = {}) {
  std::vector<ArrayEntry> scenes;
  std::vector<const ArrayEntry*> picks, rasters;
  for (const auto& e : entries) {
    if (!e.numeric) continue;
    const bool raster = e.dims.size() == 2 && e.dims[0] > 1 && e.dims[1] > 1;
    if (e.dims.size() == 3 || (raster && matrix && matrix(e))) {
      scenes.push_back(e);
      picks.push_back(&e);
    } else if (raster) {
      rasters.push_back(&e);
    }
  }
  if (picks.size() == 1) return *picks.front();
  if (picks.empty() && rasters.size() == 1) return *rasters.front();
  if (picks.size() > 1)
    throw FormatError(file, field,
                      std::to_string(picks.size()) + " arrays could be the scene: " + describe_arrays(scenes) +
                          "; name the one to read as FILE:" + field + " (the file holds: " + describe_arrays(entries) + ")");
  const std::string why = rasters.size() > 1 ? "no 3-D numeric array and several 2-D ones" : "no 3-D or 2-D numeric array";
  throw FormatError(file, field,
                    why + ", so name one as FILE:" + field + "; the file holds: " + describe_arrays(entries));
}

/// Finds `name` or throws FormatError listing the arrays found.
inline const ArrayEntry& find_array(const std::vector<ArrayEntry>& entries, const std::string& name,
                                    const std::string& file, const std::string& field) {
  for (const auto& e : entries)
    if (e.name == name) return e;
  throw FormatError(file, field, "no " + field + " '" + name + "'; the file holds: " + describe_arrays(entries));
}

}  // namespace hsipipe::io::detail

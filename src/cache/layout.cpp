#include "cache/cache.hpp"
#include "core/error.hpp"

namespace hsipipe::cache {

std::string layout_name(Layout l) {
  switch (l) {
    case Layout::pixel: return "pixel";
    case Layout::patch: return "patch";
    case Layout::cube: return "cube";
  }
  return "?";
}

Layout layout_from_name(const std::string& s) {
  if (s == "pixel") return Layout::pixel;
  if (s == "patch") return Layout::patch;
  if (s == "cube") return Layout::cube;
  throw ConfigError("--layout: unknown layout '" + s + "' (expected pixel, patch or cube)");
}

}  // namespace hsipipe::cache

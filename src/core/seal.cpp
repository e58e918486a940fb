#include "core/seal.hpp"

#include "core/error.hpp"
#include "core/hash.hpp"

namespace hsipipe {
namespace {

constexpr const char* kZeros = "0000000000000000";

/// Where the value of the top-level KEY starts in TEXT, or npos. nlohmann's dump(indent) puts each top-level key
/// on a line of its own that starts with exactly `indent` spaces (the indent of the second line), deeper keys
/// further in: a nested field of the same name is never taken for the seal.
std::size_t value_at(const std::string& text, const std::string& key) {
  const std::size_t nl = text.find('\n');
  if (nl == std::string::npos) return std::string::npos;
  const std::size_t first = text.find_first_not_of(' ', nl + 1);
  if (first == std::string::npos || first == nl + 1) return std::string::npos;
  const std::string pat = "\n" + std::string(first - nl - 1, ' ') + "\"" + key + "\": \"";
  const std::size_t at = text.find(pat);
  return at == std::string::npos ? at : at + pat.size();
}

}  // namespace

std::string seal_json(nlohmann::json j, const std::string& key, int indent) {
  j[key] = kZeros;
  std::string text = j.dump(indent < 1 ? 1 : indent) + "\n";
  const std::size_t at = value_at(text, key);
  if (at == std::string::npos) throw Error("seal_json: no top-level " + key + " in the text");  // a bug, not an input
  text.replace(at, 16, hex64(xxh3_64(text.data(), text.size())));
  return text;
}

std::string check_seal(const std::string& text, const std::string& key, const std::string& path) {
  const std::size_t at = value_at(text, key);
  if (at == std::string::npos) return "";
  if (at + 17 > text.size() || text[at + 16] != '"')
    throw FormatError(path, key, "is not 16 hex digits: the file was edited after hsipipe wrote it");
  const std::string want = text.substr(at, 16);
  std::string zeroed = text;
  zeroed.replace(at, 16, kZeros);
  const std::string have = hex64(xxh3_64(zeroed.data(), zeroed.size()));
  if (have != want)
    throw FormatError(path, key, "is " + want + " but the file's text gives " + have +
                                     ": the file was edited after hsipipe wrote it (any field, e.g. statistics or label_values)");
  return want;
}

}  // namespace hsipipe

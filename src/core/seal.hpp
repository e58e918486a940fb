#pragma once
// core/seal: a JSON file that carries the XXH3-64 of its own text, so that a hand edit of any field (a manifest's
// statistics.shift, label_values, a scene's rows) is found by a cheap check on open instead of changing results
// without a word (issue 43 item 4). The seal is a top-level string field KEY (e.g. "manifest_xxh3"):
//   seal_json(j, KEY, indent): the text j.dump(indent) + "\n" with KEY's value set to 16 zeros, hashed (XXH3-64,
//                              core/hash.hpp), then the zeros replaced by the hash's 16 hex digits;
//   check_seal(text, KEY, path): the same zeros put back, the hash compared. Byte-exact: any edit of the file,
//                              whitespace included, breaks the seal.
// To check one by hand (Python): t = open(P).read(); h = the 16 hex digits after '\n "KEY": "' (indent 1) or
// '\n  "KEY": "' (indent 2); xxhash.xxh3_64_hexdigest(t.replace(h, "0" * 16, 1)) == h.
// A seal guards against accidents and hand edits, not against someone who recomputes it.
#include <string>

#include <nlohmann/json.hpp>

namespace hsipipe {

/// The text of `j` (indent >= 1) with the top-level field KEY holding the seal.
std::string seal_json(nlohmann::json j, const std::string& key, int indent);

/// The seal of TEXT's top-level KEY: "" when TEXT has none (a file written before seals), else its 16 hex digits.
/// Throws FormatError(path, KEY) when the text does not give that seal: the file changed after it was written.
std::string check_seal(const std::string& text, const std::string& key, const std::string& path);

}  // namespace hsipipe

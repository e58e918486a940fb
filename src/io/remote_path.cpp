// io/remote_path: which scene paths are remote, their GDAL form, and redaction for messages (see
// remote_path.hpp). Plain string work: no GDAL, so open_scene() can route paths without loading it.
#include "io/remote_path.hpp"

#include <algorithm>
#include <cctype>
#include <iterator>

#include "core/error.hpp"

namespace hsipipe::io {

namespace {

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

const char* const kGdalNetworkPrefixes[] = {"/vsicurl/", "/vsicurl?", "/vsis3/", "/vsigs/", "/vsiaz/",
                                            "/vsiadls/", "/vsioss/", "/vsiswift/"};

}  // namespace

bool is_remote_path(const std::string& path) {
  if (starts_with(path, "http://") || starts_with(path, "https://") || starts_with(path, "s3://")) return true;
  return std::any_of(std::begin(kGdalNetworkPrefixes), std::end(kGdalNetworkPrefixes),
                     [&](const char* p) { return starts_with(path, p); });
}

std::string gdal_remote_path(const std::string& path) {
  if (starts_with(path, "http://") || starts_with(path, "https://")) return "/vsicurl/" + path;
  if (starts_with(path, "s3://")) {
    const std::string rest = path.substr(5);
    const auto slash = rest.find('/');
    if (rest.empty() || slash == 0 || slash == std::string::npos || slash + 1 == rest.size()) {
      throw ConfigError(redact_url(path) + ": an S3 scene path must be s3://BUCKET/KEY");
    }
    return "/vsis3/" + rest;
  }
  if (is_remote_path(path)) return path;
  throw ConfigError(path + ": not a remote path (expected http://, https://, s3://, /vsicurl/ or /vsis3/)");
}

std::string redact_url(const std::string& url) {
  std::string out = url;
  // user:password@ in the authority part
  const auto scheme = out.find("://");
  if (scheme != std::string::npos) {
    const auto auth_begin = scheme + 3;
    const auto auth_end = out.find_first_of("/?#", auth_begin);
    const auto at = out.rfind('@', auth_end == std::string::npos ? out.size() : auth_end);
    if (at != std::string::npos && at >= auth_begin) out.erase(auth_begin, at + 1 - auth_begin);
  }
  // secret-looking query values
  const auto q = out.find('?');
  if (q == std::string::npos) return out;
  std::string head = out.substr(0, q + 1), query = out.substr(q + 1), rebuilt;
  std::size_t pos = 0;
  while (pos <= query.size()) {
    auto amp = query.find('&', pos);
    if (amp == std::string::npos) amp = query.size();
    std::string kv = query.substr(pos, amp - pos);
    const auto eq = kv.find('=');
    if (eq != std::string::npos) {
      const std::string key = lower(kv.substr(0, eq));
      for (const char* secret : {"signature", "credential", "token", "secret", "password", "key", "sig"}) {
        if (key.find(secret) != std::string::npos) {
          kv = kv.substr(0, eq + 1) + "REDACTED";
          break;
        }
      }
    }
    if (!rebuilt.empty()) rebuilt += '&';
    rebuilt += kv;
    pos = amp + 1;
  }
  return head + rebuilt;
}

}  // namespace hsipipe::io

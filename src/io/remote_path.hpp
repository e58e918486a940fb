#pragma once
// io/remote_path: the scene paths read from object storage through GDAL (http://, https://, s3:// and
// GDAL's /vsicurl/, /vsis3/, /vsigs/, /vsiaz/, /vsiadls/, /vsioss/, /vsiswift/), and the redaction of
// their secrets. Plain strings: no GDAL here (io/gdal_remote.hpp reads them).
#include <string>

namespace hsipipe::io {

/// True for the remote forms listed above (not for local paths or /vsimem/, /vsizip/ ...).
bool is_remote_path(const std::string& path);

/// The GDAL path for a remote scene: https://h/p -> /vsicurl/https://h/p, s3://b/k -> /vsis3/b/k;
/// GDAL forms are returned unchanged. Throws ConfigError naming the path for "s3://" without a key.
std::string gdal_remote_path(const std::string& path);

/// `url` with any user:password@ removed and the values of signature/credential/token query
/// parameters replaced by REDACTED: safe for manifests and messages.
std::string redact_url(const std::string& url);

}  // namespace hsipipe::io

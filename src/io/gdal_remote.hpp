#pragma once
// io/gdal_remote: scenes read straight from HTTP(S) and S3-compatible object storage through GDAL's
// virtual file systems (/vsicurl/, /vsis3/): byte-range requests for the tiles a read needs,
// connection reuse, retries with backoff on 429/5xx/timeouts/resets, GDAL's block cache, and
// request/byte/retry/latency statistics per scene.
//
// Paths accepted: http://..., https://..., s3://bucket/key, and GDAL's own /vsicurl/..., /vsis3/...
// (also /vsigs/, /vsiaz/, /vsiadls/, /vsioss/, /vsiswift/). open_scene() routes them here.
//
// Configuration (process-wide; the usual variables, read from the environment, never logged):
//   GDAL_HTTP_MAX_RETRY (default 5), GDAL_HTTP_RETRY_DELAY seconds (0.5; GDAL doubles it each try),
//   GDAL_HTTP_TIMEOUT seconds (60), GDAL_HTTP_CONNECTTIMEOUT seconds (10),
//   GDAL_CACHEMAX: GDAL's raster block cache (MiB or a percentage of RAM; hsipipe's default: 256 MiB),
//   CPL_VSIL_CURL_CACHE_SIZE bytes: the downloaded-range cache (64 MiB),
//   CPL_VSIL_CURL_CHUNK_SIZE bytes: the smallest range request (16 KiB).
//   S3: AWS_S3_ENDPOINT (or AWS_ENDPOINT_URL; an "http://" or "https://" prefix sets AWS_HTTPS),
//   AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_HTTPS,
//   AWS_VIRTUAL_HOSTING (defaults to FALSE, i.e. path-style, when a custom endpoint is set), AWS_NO_SIGN_REQUEST.
//
// Everything here is rank-local; nothing is collective. Only built with HSIPIPE_WITH_GDAL (callers
// outside io reach it through open_scene() and Scene::remote_stats() / source_identity()).
#include <cstdint>
#include <memory>
#include <string>

#include "io/remote_path.hpp"
#include "io/scene.hpp"

namespace hsipipe::io {

struct RemoteOptions {
  int max_retry = 5;                       ///< GDAL_HTTP_MAX_RETRY
  double retry_delay_s = 0.5;              ///< GDAL_HTTP_RETRY_DELAY (first delay; backoff x2 per try)
  int timeout_s = 60;                      ///< GDAL_HTTP_TIMEOUT (whole request)
  int connect_timeout_s = 10;              ///< GDAL_HTTP_CONNECTTIMEOUT
  std::uint64_t block_cache_mb = 256;      ///< GDAL raster block cache; 0 = leave GDAL_CACHEMAX alone
  std::uint64_t range_cache_bytes = 64ull << 20;  ///< CPL_VSIL_CURL_CACHE_SIZE
  std::uint64_t chunk_bytes = 16384;       ///< CPL_VSIL_CURL_CHUNK_SIZE

  /// Defaults overridden by the environment variables above; throws ConfigError naming the variable
  /// when one is not a number in range.
  static RemoteOptions from_env();
  /// One line for logs: the options and the S3 endpoint, never credentials.
  std::string describe() const;
};

/// Applies `opts` as GDAL configuration, process-wide (call before the first remote open to have
/// network statistics counted). Thread-safe. open_remote() calls it with from_env() when nothing
/// configured it before.
void configure_remote(const RemoteOptions& opts);

/// Opens a remote scene: checks the object exists (one HEAD; 404/403/credential problems become an
/// IoError naming the redacted URL and the cause), opens it with open_gdal() on the GDAL path, and
/// wraps it so that remote_stats() and source_identity() report on it.
std::unique_ptr<Scene> open_remote(const SceneSpec& spec);

/// For GDAL error handlers elsewhere in io (readers push a quiet handler around GDAL calls, which
/// would hide them): feeds GDAL's "retrying" warnings and its network trace (debug lines, switched on
/// per thread only while a remote scene reads) to the statistics of the remote scene reading on this
/// thread, if any. `cls` is the CPLErr value. Returns true when the message was one of those (the
/// handler should then not print it). Cheap, noexcept; call it first in such handlers.
bool note_gdal_message(int cls, const char* msg) noexcept;

/// Reads the identity of a remote object now (HEAD + one range read of the first 64 KiB);
/// what Scene::source_identity() returns and what `verify` compares against.
SourceIdentity read_source_identity(const std::string& path);

}  // namespace hsipipe::io

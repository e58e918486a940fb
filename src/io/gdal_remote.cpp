// io/gdal_remote: remote scenes through GDAL's /vsicurl/ and /vsis3/ (see gdal_remote.hpp).
#include "io/gdal_remote.hpp"

#include <cpl_conv.h>
#include <cpl_error.h>
#include <cpl_http.h>
#include <cpl_string.h>
#include <cpl_vsi.h>
#include <gdal.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/hash.hpp"
#include "io/readers.hpp"

namespace hsipipe::io {

namespace {

constexpr std::uint64_t kIdentityBytes = 64 * 1024;

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}


// ---- configuration --------------------------------------------------------------------------

std::mutex g_config_mutex;
bool g_configured = false;

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

double env_number(const char* name, double fallback, double lo, double hi) {
  const auto v = env(name);
  if (!v) return fallback;
  char* end = nullptr;
  const double d = std::strtod(v->c_str(), &end);
  if (end == v->c_str() || *end != '\0' || !(d >= lo && d <= hi)) {
    std::ostringstream os;
    os << "environment variable " << name << "='" << *v << "': expected a number in [" << lo << ", " << hi << "]";
    throw ConfigError(os.str());
  }
  return d;
}

/// "http://host:port/" -> ("host:port", "NO"); "host:port" -> ("host:port", "").
std::pair<std::string, std::string> split_endpoint(std::string e) {
  std::string https;
  if (starts_with(e, "http://")) {
    e = e.substr(7);
    https = "NO";
  } else if (starts_with(e, "https://")) {
    e = e.substr(8);
    https = "YES";
  }
  while (!e.empty() && e.back() == '/') e.pop_back();
  return {e, https};
}

// ---- statistics -------------------------------------------------------------------------------

struct Counters {
  std::uint64_t requests = 0, bytes = 0;
};

void add_methods(const nlohmann::json& methods, Counters& c) {
  if (!methods.is_object()) return;
  for (const auto& [name, m] : methods.items()) {
    (void)name;
    if (m.contains("count")) c.requests += m["count"].get<std::uint64_t>();
    if (m.contains("downloaded_bytes")) c.bytes += m["downloaded_bytes"].get<std::uint64_t>();
  }
}

/// GDAL's network statistics (CPL_VSIL_NETWORK_STATS_ENABLED) for one GDAL path, process-wide.
/// Per-file operations live under handlers.H.files[path]; file-system operations (Stat,
/// GetFileMetadata, ...) under handlers.H.actions.A.files[path].
Counters file_counters(const std::string& gdal_path) {
  Counters c;
  char* raw = VSINetworkStatsGetAsSerializedJSON(nullptr);
  if (!raw) return c;
  nlohmann::json j = nlohmann::json::parse(raw, nullptr, /*allow_exceptions=*/false);
  VSIFree(raw);
  if (!j.is_object() || !j.contains("handlers")) return c;
  for (const auto& [hname, h] : j["handlers"].items()) {
    (void)hname;
    if (h.contains("files") && h["files"].contains(gdal_path)) {
      const auto& f = h["files"][gdal_path];
      if (f.contains("methods")) add_methods(f["methods"], c);
    }
    if (h.contains("actions")) {
      for (const auto& [aname, a] : h["actions"].items()) {
        (void)aname;
        if (a.contains("files") && a["files"].contains(gdal_path)) {
          const auto& f = a["files"][gdal_path];
          if (f.contains("methods")) add_methods(f["methods"], c);
        }
      }
    }
  }
  return c;
}

/// What one remote scene accumulates from GDAL's messages on the threads reading it.
struct TraceSink {
  std::atomic<std::uint64_t> retries{0};
  std::mutex mutex;
  std::vector<double> request_ms;  // under mutex
};

/// Per-thread state of GDAL's network trace (one request at a time per thread in vsicurl).
struct ThreadTrace {
  TraceSink* sink = nullptr;
  bool in_request = false;
  std::chrono::steady_clock::time_point t0;
};
thread_local ThreadTrace t_trace;

// GDAL debug categories of the network file systems; CPL_DEBUG matches categories by substring.
constexpr const char* kTraceCategories = "VSICURL,S3,GS,AZURE,ADLS,OSS,SWIFT";

/// While alive on this thread: GDAL's network debug trace is switched on for this thread only
/// (thread-local CPL_DEBUG) and its messages, and GDAL's "retrying" warnings, feed `sink` through
/// note_gdal_message() -- from the handler pushed here, or from a quiet handler a reader pushes
/// inside (gdal_reader.cpp). Other messages go to GDAL's default handler unless `quiet`.
class TraceScope {
 public:
  explicit TraceScope(TraceSink& sink, bool quiet = false)
      : previous_sink_(t_trace.sink), pusher_(&TraceScope::handler, quiet ? &sink : nullptr) {
    const char* prev = CPLGetThreadLocalConfigOption("CPL_DEBUG", nullptr);
    if (prev) previous_debug_ = prev;
    had_debug_ = prev != nullptr;
    CPLSetThreadLocalConfigOption("CPL_DEBUG", kTraceCategories);
    CPLSetCurrentErrorHandlerCatchDebug(TRUE);
    t_trace.sink = &sink;
    t_trace.in_request = false;
  }
  ~TraceScope() {
    t_trace.sink = previous_sink_;
    t_trace.in_request = false;
    CPLSetThreadLocalConfigOption("CPL_DEBUG", had_debug_ ? previous_debug_.c_str() : nullptr);
  }
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  static void CPL_STDCALL handler(CPLErr cls, CPLErrorNum no, const char* msg) {
    if (note_gdal_message(static_cast<int>(cls), msg)) return;
    if (cls == CE_Debug) {
      // Our trace is on for this thread only; show debug output only when the user asked for it.
      if (std::getenv("CPL_DEBUG")) CPLDefaultErrorHandler(cls, no, msg);
      return;
    }
    if (!CPLGetErrorHandlerUserData()) CPLDefaultErrorHandler(cls, no, msg);
  }
  TraceSink* previous_sink_;
  std::string previous_debug_;
  bool had_debug_ = false;
  CPLErrorHandlerPusher pusher_;
};

/// Quiet, but GDAL's messages still reach the trace of the scene reading on this thread.
void CPL_STDCALL quiet_counting_handler(CPLErr cls, CPLErrorNum, const char* msg) {
  note_gdal_message(static_cast<int>(cls), msg);
}

std::string header_value(CSLConstList headers, const char* key) {
  if (!headers) return {};
  for (CSLConstList p = headers; *p; ++p) {
    const std::string kv = *p;
    const auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    if (lower(kv.substr(0, eq)) == lower(key)) return kv.substr(eq + 1);
  }
  return {};
}

/// For a plain HTTP(S) object GDAL reports a 404 without a message: ask the server once more (HEAD).
std::string http_status_text(const std::string& gpath) {
  if (gpath.rfind("/vsicurl/", 0) != 0) return {};
  const std::string url = gpath.substr(std::strlen("/vsicurl/"));
  const char* opts[] = {"NO_BODY=YES", nullptr};
  CPLHTTPResult* r = CPLHTTPFetch(url.c_str(), const_cast<char**>(opts));
  std::string out;
  if (r && r->pszErrBuf) out = r->pszErrBuf;
  CPLHTTPDestroyResult(r);
  return out;
}

std::string describe_vsi_error(const std::string& what, const std::string& gpath = {}) {
  const int no = CPLGetLastErrorNo();
  std::string msg = CPLGetLastErrorMsg();
  if (msg.empty() && !gpath.empty()) msg = http_status_text(gpath);
  std::string hint;
  switch (no) {
    case CPLE_AWSAccessDenied:
      hint = "access denied: check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY and the bucket policy";
      break;
    case CPLE_AWSBucketNotFound: hint = "no such bucket"; break;
    case CPLE_AWSObjectNotFound: hint = "no such object"; break;
    case CPLE_AWSInvalidCredentials:
      hint = "invalid or missing credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_NO_SIGN_REQUEST=YES)";
      break;
    case CPLE_AWSSignatureDoesNotMatch: hint = "signature does not match: check AWS_SECRET_ACCESS_KEY and AWS_REGION"; break;
    default: break;
  }
  if (hint.empty()) {
    if (msg.find("403") != std::string::npos) hint = "access denied (HTTP 403)";
    else if (msg.find("404") != std::string::npos) hint = "no such object (HTTP 404)";
    else if (msg.empty()) hint = "the server did not answer or the object does not exist";
  }
  std::string out = what;
  if (!hint.empty()) out += ": " + hint;
  if (!msg.empty()) out += " (" + msg + ")";
  return out;
}

// ---- the wrapping scene --------------------------------------------------------------------

class RemoteScene final : public Scene {
 public:
  RemoteScene(std::unique_ptr<Scene> inner, std::string user_path, std::string gdal_path, Counters base,
              const TraceSink& at_open)
      : inner_(std::move(inner)), user_path_(std::move(user_path)), gdal_path_(std::move(gdal_path)), base_(base) {
    trace_.retries = at_open.retries.load();
    trace_.request_ms = at_open.request_ms;
  }

  std::size_t rows() const override { return inner_->rows(); }
  std::size_t cols() const override { return inner_->cols(); }
  std::size_t bands() const override { return inner_->bands(); }
  DType source_type() const override { return inner_->source_type(); }
  const BandInfo& band_info() const override { return inner_->band_info(); }
  std::optional<double> ignore_value() const override { return inner_->ignore_value(); }
  void set_validity_bands(std::vector<std::uint8_t> counts) override {  // the inner scene reads
    Scene::set_validity_bands(counts);
    inner_->set_validity_bands(std::move(counts));
  }
  std::string format() const override { return inner_->format(); }

  std::vector<std::pair<std::string, std::string>> details() const override {
    auto d = inner_->details();
    d.emplace_back("remote", redact_url(user_path_));
    d.emplace_back("GDAL path", redact_url(gdal_path_));
    return d;
  }
  std::vector<std::string> source_files() const override { return {redact_url(user_path_)}; }
  std::uint64_t bytes_read() const override { return current().bytes; }

  void read_rows(std::size_t r0, std::size_t r1, float* out) const override {
    TraceScope scope(trace_);
    const std::uint64_t before = file_counters(gdal_path_).requests;
    const auto t0 = std::chrono::steady_clock::now();
    inner_->read_rows(r0, r1, out);
    const auto t1 = std::chrono::steady_clock::now();
    decoded_ += (r1 - r0) * cols() * bands() * sizeof(float);
    const std::uint64_t after = file_counters(gdal_path_).requests;
    if (after > before) {
      const double ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
      std::lock_guard<std::mutex> lock(mutex_);
      latencies_ms_.push_back(ms);
    }
  }

  std::optional<RemoteStats> remote_stats() const override {
    RemoteStats s;
    const Counters now = current();
    s.requests = now.requests;
    s.bytes_fetched = now.bytes;
    s.retries = trace_.retries.load();
    s.bytes_decoded = decoded_.load();
    {
      std::lock_guard<std::mutex> lock(trace_.mutex);
      s.request_latencies_ms = trace_.request_ms;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    s.latencies_ms = latencies_ms_;
    s.block_reads = latencies_ms_.size();
    return s;
  }

  std::optional<SourceIdentity> source_identity() const override {
    TraceScope scope(trace_, /*quiet=*/true);
    SourceIdentity id = read_source_identity(gdal_path_);
    id.url = redact_url(user_path_);
    return id;
  }

 private:
  Counters current() const {
    Counters now = file_counters(gdal_path_);
    now.requests = now.requests >= base_.requests ? now.requests - base_.requests : 0;
    now.bytes = now.bytes >= base_.bytes ? now.bytes - base_.bytes : 0;
    return now;
  }

  std::unique_ptr<Scene> inner_;
  std::string user_path_, gdal_path_;
  Counters base_;
  mutable TraceSink trace_;
  mutable std::atomic<std::uint64_t> decoded_{0};
  mutable std::mutex mutex_;
  mutable std::vector<double> latencies_ms_;
};

}  // namespace

// ---- public functions ------------------------------------------------------------------------

bool note_gdal_message(int cls, const char* msg) noexcept {
  if (!msg) return false;
  ThreadTrace& t = t_trace;
  if (cls == CE_Warning) {
    // "HTTP error code: 503 - URL. Retrying again in 0.5 secs" (vsicurl, vsis3 ...) and
    // "... retrying in 0.50s ..." (other handlers): GDAL is about to send the request again.
    if (!std::strstr(msg, "Retrying again in") && !std::strstr(msg, "retrying in")) return false;
    if (t.sink) t.sink->retries.fetch_add(1, std::memory_order_relaxed);
    t.in_request = false;
    return true;
  }
  if (cls != CE_Debug) return false;
  if (std::strstr(msg, ": Downloading ")) {  // "VSICURL: Downloading 0-16383 (URL)..." starts a request
    t.in_request = true;
    t.t0 = std::chrono::steady_clock::now();
    return true;
  }
  if (const char* p = std::strstr(msg, ": Got response_code=")) {  // the request finished
    const long code = std::strtol(p + std::strlen(": Got response_code="), nullptr, 10);
    if (t.in_request && t.sink && code >= 200 && code < 300) {
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t.t0).count();
      std::lock_guard<std::mutex> lock(t.sink->mutex);
      t.sink->request_ms.push_back(ms);
    }
    t.in_request = false;
    return true;
  }
  if (const char* p = std::strstr(msg, "): response_code=")) {
    // "DownloadRegion(URL): response_code=206, msg=Recv failure: Connection reset by peer": a
    // transport error. With a 2xx code libcurl re-sent the request on a fresh connection (a retry
    // GDAL does not report); other codes go through GDAL's retry logic, counted by its warning.
    if (std::strstr(msg, "DownloadRegion(") && std::strstr(msg, ", msg=")) {
      const long code = std::strtol(p + std::strlen("): response_code="), nullptr, 10);
      if (code >= 200 && code < 300 && t.sink) t.sink->retries.fetch_add(1, std::memory_order_relaxed);
    }
    return true;
  }
  return std::strstr(msg, "VSICURL: ") == msg || std::strstr(msg, "S3: ") == msg;  // other trace lines
}


RemoteOptions RemoteOptions::from_env() {
  RemoteOptions o;
  o.max_retry = static_cast<int>(env_number("GDAL_HTTP_MAX_RETRY", o.max_retry, 0, 100));
  o.retry_delay_s = env_number("GDAL_HTTP_RETRY_DELAY", o.retry_delay_s, 0, 3600);
  o.timeout_s = static_cast<int>(env_number("GDAL_HTTP_TIMEOUT", o.timeout_s, 1, 86400));
  o.connect_timeout_s = static_cast<int>(env_number("GDAL_HTTP_CONNECTTIMEOUT", o.connect_timeout_s, 1, 3600));
  // GDAL's own GDAL_CACHEMAX (MiB, or "10%"), which GDAL reads itself, sizes the block cache where it is set;
  // otherwise the default above (HSIPIPE_REMOTE_CACHE_MB, which only renamed it, was retired in issue 34)
  if (env("GDAL_CACHEMAX")) o.block_cache_mb = 0;
  o.range_cache_bytes = static_cast<std::uint64_t>(
      env_number("CPL_VSIL_CURL_CACHE_SIZE", static_cast<double>(o.range_cache_bytes), 1 << 20, 1e13));
  o.chunk_bytes = static_cast<std::uint64_t>(
      env_number("CPL_VSIL_CURL_CHUNK_SIZE", static_cast<double>(o.chunk_bytes), 1024, 10 << 20));
  return o;
}

std::string RemoteOptions::describe() const {
  std::ostringstream os;
  os << "retries " << max_retry << " (first delay " << retry_delay_s << " s, backoff), timeout " << timeout_s
     << " s, connect timeout " << connect_timeout_s << " s, block cache ";
  if (block_cache_mb) os << block_cache_mb << " MiB";
  else os << "GDAL_CACHEMAX";
  os << ", range cache " << (range_cache_bytes >> 20) << " MiB, chunk " << chunk_bytes << " B";
  const char* ep = CPLGetConfigOption("AWS_S3_ENDPOINT", nullptr);
  if (ep) os << ", S3 endpoint " << ep;
  os << ", S3 credentials "
     << (CPLGetConfigOption("AWS_SECRET_ACCESS_KEY", nullptr) ? "from the environment" : "not set");
  return os.str();
}

void configure_remote(const RemoteOptions& o) {
  std::lock_guard<std::mutex> lock(g_config_mutex);
  auto set = [](const char* k, const std::string& v) { CPLSetConfigOption(k, v.c_str()); };
  // Must precede the first network access of the process: GDAL reads it once.
  set("CPL_VSIL_NETWORK_STATS_ENABLED", "YES");
  set("GDAL_HTTP_MAX_RETRY", std::to_string(o.max_retry));
  {
    std::ostringstream d;
    d << o.retry_delay_s;
    set("GDAL_HTTP_RETRY_DELAY", d.str());
  }
  set("GDAL_HTTP_TIMEOUT", std::to_string(o.timeout_s));
  set("GDAL_HTTP_CONNECTTIMEOUT", std::to_string(o.connect_timeout_s));
  set("CPL_VSIL_CURL_CACHE_SIZE", std::to_string(o.range_cache_bytes));
  set("CPL_VSIL_CURL_CHUNK_SIZE", std::to_string(o.chunk_bytes));
  // One request less per open (no directory listing to look for sidecar files), adjacent tile
  // ranges merged into one request, TCP keep-alive on the reused connections.
  if (!env("GDAL_DISABLE_READDIR_ON_OPEN")) set("GDAL_DISABLE_READDIR_ON_OPEN", "EMPTY_DIR");
  set("GDAL_HTTP_MERGE_CONSECUTIVE_RANGES", "YES");
  if (!env("GDAL_HTTP_TCP_KEEPALIVE")) set("GDAL_HTTP_TCP_KEEPALIVE", "YES");
  if (o.block_cache_mb) GDALSetCacheMax64(static_cast<GIntBig>(o.block_cache_mb) << 20);

  // S3 endpoint: accept a URL form (AWS_ENDPOINT_URL style) and default to path-style addressing
  // for custom endpoints (MinIO, s3rver, Ceph...). Credentials are left where they are: GDAL reads
  // AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY from the environment itself, and we never copy or print them.
  auto endpoint = env("AWS_S3_ENDPOINT");
  if (!endpoint) endpoint = env("AWS_ENDPOINT_URL_S3");
  if (!endpoint) endpoint = env("AWS_ENDPOINT_URL");
  if (endpoint) {
    const auto [hostport, https] = split_endpoint(*endpoint);
    set("AWS_S3_ENDPOINT", hostport);
    if (!https.empty() && !env("AWS_HTTPS")) set("AWS_HTTPS", https);
    if (!env("AWS_VIRTUAL_HOSTING")) set("AWS_VIRTUAL_HOSTING", "FALSE");
  }
  g_configured = true;
}

SourceIdentity read_source_identity(const std::string& path) {
  const std::string gpath = gdal_remote_path(path);
  SourceIdentity id;
  id.url = redact_url(path);
  CPLErrorHandlerPusher quiet(quiet_counting_handler);
  CPLErrorReset();
  VSILFILE* probe = VSIFOpenExL(gpath.c_str(), "rb", TRUE);
  if (!probe) throw IoError(id.url, describe_vsi_error("cannot open remote object", gpath));
  VSIFCloseL(probe);
  VSIStatBufL st;
  if (VSIStatExL(gpath.c_str(), &st, VSI_STAT_EXISTS_FLAG | VSI_STAT_SIZE_FLAG | VSI_STAT_SET_ERROR_FLAG) != 0) {
    throw IoError(id.url, describe_vsi_error("cannot stat remote object"));
  }
  id.size = static_cast<std::uint64_t>(st.st_size);
  char** headers = VSIGetFileMetadata(gpath.c_str(), "HEADERS", nullptr);
  id.etag = header_value(headers, "ETag");
  id.last_modified = header_value(headers, "Last-Modified");
  CSLDestroy(headers);

  id.hashed_bytes = std::min<std::uint64_t>(id.size, kIdentityBytes);
  std::vector<unsigned char> buf(id.hashed_bytes);
  VSILFILE* f = VSIFOpenExL(gpath.c_str(), "rb", TRUE);
  if (!f) throw IoError(id.url, describe_vsi_error("cannot open remote object"));
  const std::size_t got = VSIFReadL(buf.data(), 1, buf.size(), f);
  VSIFCloseL(f);
  if (got != buf.size()) {
    throw IoError(id.url, "short read of the first " + std::to_string(buf.size()) + " bytes (got " +
                              std::to_string(got) + ")");
  }
  id.content_hash = "xxh3:" + hex64(xxh3_64(buf.data(), buf.size()));
  return id;
}

std::unique_ptr<Scene> open_remote(const SceneSpec& spec) {
  {
    bool need;
    {
      std::lock_guard<std::mutex> lock(g_config_mutex);
      need = !g_configured;
    }
    if (need) configure_remote(RemoteOptions::from_env());
  }
  SceneSpec g = spec;
  g.path = gdal_remote_path(spec.path);
  const std::string shown = redact_url(spec.path);
  TraceSink at_open;
  const Counters base = file_counters(g.path);
  std::unique_ptr<Scene> inner;
  {
    TraceScope scope(at_open, /*quiet=*/true);
    // Opening with errors enabled makes GDAL say why it failed (HTTP status, S3 error code); a
    // stat would cache "does not exist" silently.
    CPLErrorReset();
    VSILFILE* probe = VSIFOpenExL(g.path.c_str(), "rb", TRUE);
    if (!probe) throw IoError(shown, describe_vsi_error("cannot open remote scene", g.path));
    VSIFCloseL(probe);
    try {
      inner = open_gdal(g);
    } catch (const FormatError& e) {
      // The reader names the GDAL path, which may carry credentials: name the redacted URL instead.
      std::string what = e.what();
      const std::string prefix = e.file() + ": field '" + e.field() + "': ";
      if (what.rfind(prefix, 0) == 0) what = what.substr(prefix.size());
      for (auto p = what.find(g.path); p != std::string::npos; p = what.find(g.path)) what.replace(p, g.path.size(), shown);
      throw FormatError(shown, e.field(), what);
    }
  }
  return std::make_unique<RemoteScene>(std::move(inner), spec.path, g.path, base, at_open);
}

}  // namespace hsipipe::io

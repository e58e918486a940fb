// Remote scenes (io/gdal_remote): URL mapping, redaction and options ([unit], no server), and reads
// over real loopback servers ([server]: run by run_reader_test.py, which starts nginx, two
// fault-injecting proxies and s3rver and passes their URLs in HSIPIPE_REMOTE_* variables).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/hash.hpp"
#include "io/gdal_remote.hpp"
#include "io/scene.hpp"
#include "support/test_util.hpp"

using namespace hsipipe;

namespace {

std::string need_env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) FAIL(std::string(name) + " is not set: run this test through tests/remote/run_reader_test.py");
  return v;
}

std::vector<float> read_all(const io::Scene& s, std::size_t step) {
  std::vector<float> out(s.rows() * s.cols() * s.bands());
  for (std::size_t r = 0; r < s.rows(); r += step) {
    const std::size_t r1 = std::min(s.rows(), r + step);
    s.read_rows(r, r1, out.data() + r * s.cols() * s.bands());
  }
  return out;
}

/// Bitwise equality (NaN == NaN of the same pattern): both sides decode the same file.
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::uint64_t file_size(const std::string& p) {
  std::ifstream f(p, std::ios::binary | std::ios::ate);
  return static_cast<std::uint64_t>(f.tellg());
}

void check_equal_to_local(const std::string& url, std::size_t step) {
  const std::string local = need_env("HSIPIPE_REMOTE_LOCAL");
  auto a = io::open_scene(io::SceneSpec::parse(local));
  auto b = io::open_scene(io::SceneSpec::parse(url));
  REQUIRE(b->rows() == a->rows());
  REQUIRE(b->cols() == a->cols());
  REQUIRE(b->bands() == a->bands());
  CHECK(b->source_type() == a->source_type());
  CHECK(b->band_info().wavelengths == a->band_info().wavelengths);
  CHECK(b->ignore_value() == a->ignore_value());
  const auto va = read_all(*a, step), vb = read_all(*b, step);
  CHECK(same_bits(va, vb));
  std::size_t nans = 0;
  for (float v : va) nans += std::isnan(v) ? 1 : 0;
  CHECK(nans == 2 * a->bands());  // the two invalid pixels of fixture.py, all bands
  REQUIRE(b->remote_stats().has_value());
  CHECK_FALSE(a->remote_stats().has_value());
}

}  // namespace

TEST_CASE("remote paths map to GDAL's virtual file systems", "[unit]") {
  CHECK(io::is_remote_path("https://example.org/a.tif"));
  CHECK(io::is_remote_path("http://127.0.0.1:8080/a.tif"));
  CHECK(io::is_remote_path("s3://bucket/key/a.tif"));
  CHECK(io::is_remote_path("/vsis3/bucket/a.tif"));
  CHECK(io::is_remote_path("/vsicurl/https://example.org/a.tif"));
  CHECK_FALSE(io::is_remote_path("/vsimem/a.tif"));
  CHECK_FALSE(io::is_remote_path("/data/scene.tif"));
  CHECK_FALSE(io::is_remote_path("https.tif"));
  CHECK(io::gdal_remote_path("https://example.org/a.tif") == "/vsicurl/https://example.org/a.tif");
  CHECK(io::gdal_remote_path("http://h:1/x/y.tif?v=2") == "/vsicurl/http://h:1/x/y.tif?v=2");
  CHECK(io::gdal_remote_path("s3://bucket/dir/a.tif") == "/vsis3/bucket/dir/a.tif");
  CHECK(io::gdal_remote_path("/vsis3/bucket/a.tif") == "/vsis3/bucket/a.tif");
  CHECK_THROWS_AS(io::gdal_remote_path("s3://bucket"), ConfigError);
  CHECK_THROWS_AS(io::gdal_remote_path("s3://bucket/"), ConfigError);
  CHECK_THROWS_AS(io::gdal_remote_path("s3:///key"), ConfigError);
  CHECK_THROWS_AS(io::gdal_remote_path("/data/a.tif"), ConfigError);
}

TEST_CASE("URLs are redacted before they reach a manifest or a message", "[unit]") {
  CHECK(io::redact_url("https://alice:s3cret@example.org/a.tif") == "https://example.org/a.tif");
  CHECK(io::redact_url("https://h/a.tif?X-Amz-Signature=abc&X-Amz-Credential=AKIA/x&v=1") ==
        "https://h/a.tif?X-Amz-Signature=REDACTED&X-Amz-Credential=REDACTED&v=1");
  CHECK(io::redact_url("https://h/a.tif?sig=zz&token=tt") == "https://h/a.tif?sig=REDACTED&token=REDACTED");
  CHECK(io::redact_url("s3://bucket/key.tif") == "s3://bucket/key.tif");
  CHECK(io::redact_url("https://h/p@x/a.tif") == "https://h/p@x/a.tif");  // '@' in the path is not userinfo
}

TEST_CASE("remote options come from the environment and bad values are named", "[unit]") {
  ::unsetenv("GDAL_HTTP_MAX_RETRY");
  ::unsetenv("GDAL_CACHEMAX");
  auto o = io::RemoteOptions::from_env();
  CHECK(o.max_retry == 5);
  CHECK(o.block_cache_mb == 256);  // hsipipe's default block cache where GDAL_CACHEMAX is not set
  ::setenv("GDAL_HTTP_MAX_RETRY", "9", 1);
  CHECK(io::RemoteOptions::from_env().max_retry == 9);
  ::setenv("GDAL_HTTP_MAX_RETRY", "lots", 1);
  try {
    (void)io::RemoteOptions::from_env();
    FAIL("no error for GDAL_HTTP_MAX_RETRY=lots");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()).find("GDAL_HTTP_MAX_RETRY") != std::string::npos);
  }
  ::unsetenv("GDAL_HTTP_MAX_RETRY");
  ::setenv("GDAL_CACHEMAX", "10%", 1);
  CHECK(io::RemoteOptions::from_env().block_cache_mb == 0);  // left to GDAL
  ::unsetenv("GDAL_CACHEMAX");
}

TEST_CASE("the description of the options never shows credentials", "[unit]") {
  ::setenv("AWS_SECRET_ACCESS_KEY", "TOPSECRETVALUE123", 1);
  ::setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEKEYID", 1);
  const std::string d = io::RemoteOptions::from_env().describe();
  CHECK(d.find("TOPSECRETVALUE123") == std::string::npos);
  CHECK(d.find("AKIAEXAMPLEKEYID") == std::string::npos);
  CHECK(d.find("credentials from the environment") != std::string::npos);
  ::unsetenv("AWS_SECRET_ACCESS_KEY");
  ::unsetenv("AWS_ACCESS_KEY_ID");
}

TEST_CASE("latency percentiles use the nearest rank", "[unit]") {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  CHECK(io::latency_percentile(v, 50) == 50);
  CHECK(io::latency_percentile(v, 95) == 95);
  CHECK(io::latency_percentile(v, 99) == 99);
  CHECK(io::latency_percentile(v, 100) == 100);
  CHECK(io::latency_percentile({}, 50) == 0);
  CHECK(io::latency_percentile({7}, 99) == 7);
}

TEST_CASE("a COG over HTTP decodes bit for bit like the local file", "[server]") {
  check_equal_to_local(need_env("HSIPIPE_REMOTE_HTTP"), 7);
}

TEST_CASE("reading some rows fetches only their tiles", "[server]") {
  const std::string local = need_env("HSIPIPE_REMOTE_LOCAL");
  // A query string makes a URL GDAL has not cached yet in this process (nginx ignores it).
  auto s = io::open_scene(io::SceneSpec::parse(need_env("HSIPIPE_REMOTE_HTTP") + "?fresh=rows"));
  const auto open_stats = *s->remote_stats();
  CHECK(open_stats.requests >= 1);
  std::vector<float> buf(16 * s->cols() * s->bands());
  s->read_rows(32, 48, buf.data());  // one tile row of 16
  const auto st = *s->remote_stats();
  const std::uint64_t size = file_size(local);
  INFO("fetched " << st.bytes_fetched << " of " << size << " bytes in " << st.requests << " requests");
  CHECK(st.bytes_fetched > 0);
  CHECK(st.bytes_fetched < size / 2);
  CHECK(st.requests > open_stats.requests);
  CHECK(st.block_reads == 1);
  CHECK(st.latencies_ms.size() == 1);
  CHECK(st.latencies_ms[0] > 0.0);
  // GDAL's trace gives one latency per range request sent during the read.
  CHECK(st.request_latencies_ms.size() > open_stats.request_latencies_ms.size());
  for (double ms : st.request_latencies_ms) CHECK(ms > 0.0);
  CHECK(s->bytes_read() == st.bytes_fetched);
  CHECK(st.bytes_decoded == 16 * s->cols() * s->bands() * sizeof(float));
  // The same rows again: served by GDAL's caches, no new request.
  s->read_rows(32, 48, buf.data());
  CHECK(s->remote_stats()->requests == st.requests);
}

TEST_CASE("the source identity names size, ETag and a content hash of the header", "[server]") {
  const std::string local = need_env("HSIPIPE_REMOTE_LOCAL");
  const std::string url = need_env("HSIPIPE_REMOTE_HTTP");
  auto s = io::open_scene(io::SceneSpec::parse(url));
  const auto id = s->source_identity();
  REQUIRE(id.has_value());
  CHECK(id->url == url);
  CHECK(id->size == file_size(local));
  CHECK_FALSE(id->etag.empty());
  CHECK_FALSE(id->last_modified.empty());
  std::ifstream f(local, std::ios::binary);
  std::vector<char> head(std::min<std::uint64_t>(id->size, 65536));
  f.read(head.data(), static_cast<std::streamsize>(head.size()));
  CHECK(id->hashed_bytes == head.size());
  CHECK(id->content_hash == "xxh3:" + hex64(xxh3_64(head.data(), head.size())));
  CHECK(io::read_source_identity(url).etag == id->etag);
  CHECK_FALSE(io::open_scene(io::SceneSpec::parse(local))->source_identity().has_value());
}

TEST_CASE("HTTP 503 on every 4th request: retried, counted, same result", "[server]") {
  const std::string url = need_env("HSIPIPE_REMOTE_FAULT503");
  check_equal_to_local(url, 5);
  auto s = io::open_scene(io::SceneSpec::parse(url + "?again=1"));
  std::vector<float> all(s->rows() * s->cols() * s->bands());
  s->read_rows(0, s->rows(), all.data());
  const auto st = *s->remote_stats();
  INFO("requests " << st.requests << ", retries " << st.retries);
  CHECK(st.retries >= 1);
}

TEST_CASE("connections reset on every 4th request: retried, counted, same result", "[server]") {
  const std::string url = need_env("HSIPIPE_REMOTE_FAULTRESET");
  check_equal_to_local(url, 5);
  auto s = io::open_scene(io::SceneSpec::parse(url + "?again=1"));
  std::vector<float> all(s->rows() * s->cols() * s->bands());
  s->read_rows(0, s->rows(), all.data());
  const auto st = *s->remote_stats();
  INFO("requests " << st.requests << ", retries " << st.retries);
  CHECK(st.retries >= 1);
}

TEST_CASE("a missing object or a 403 is a clear IoError naming the URL", "[server]") {
  const std::string missing = need_env("HSIPIPE_REMOTE_HTTP_MISSING");
  const std::string forbidden = need_env("HSIPIPE_REMOTE_HTTP_FORBIDDEN");
  try {
    (void)io::open_scene(io::SceneSpec::parse(missing));
    FAIL("no error for a missing object");
  } catch (const IoError& e) {
    const std::string m = e.what();
    INFO(m);
    CHECK(m.find(missing) != std::string::npos);
    CHECK(m.find("404") != std::string::npos);
  }
  try {
    (void)io::open_scene(io::SceneSpec::parse(forbidden));
    FAIL("no error for a forbidden object");
  } catch (const IoError& e) {
    const std::string m = e.what();
    INFO(m);
    CHECK(m.find(forbidden) != std::string::npos);
    CHECK(m.find("403") != std::string::npos);
    CHECK(m.find("access denied") != std::string::npos);
  }
}

TEST_CASE("an S3 COG (s3rver) decodes bit for bit like the local file", "[server][s3]") {
  const std::string url = need_env("HSIPIPE_REMOTE_S3");
  check_equal_to_local(url, 16);
  auto s = io::open_scene(io::SceneSpec::parse(url));
  const auto id = s->source_identity();
  REQUIRE(id.has_value());
  CHECK(id->url == url);
  CHECK(id->size == file_size(need_env("HSIPIPE_REMOTE_LOCAL")));
  CHECK_FALSE(id->etag.empty());
  try {
    (void)io::open_scene(io::SceneSpec::parse(need_env("HSIPIPE_REMOTE_S3_MISSING")));
    FAIL("no error for a missing S3 object");
  } catch (const IoError& e) {
    CHECK(std::string(e.what()).find("s3://") != std::string::npos);
  }
}

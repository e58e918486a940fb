#pragma once
// Shared by the MATLAB, HDF5 and GDAL reader tests: fixtures written by tests/io/format_fixtures.py
// (/usr/bin/python3 with scipy, h5py, GDAL's bindings) with independently decoded reference cubes, and
// the comparisons of our readers against them.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "io/scene.hpp"
#include "support/test_util.hpp"

namespace hsipipe::test {

using nlohmann::json;

/// Generated once per test process and kind; the directory is removed at exit.
struct Fixtures {
  std::unique_ptr<TempDir> dir;
  json manifest;
};

inline const Fixtures& fixtures(const std::string& kind, const std::string& arg = "") {
  static std::map<std::string, Fixtures> cache;
  auto it = cache.find(kind);
  if (it != cache.end()) return it->second;
  Fixtures f;
  f.dir = std::make_unique<TempDir>("fmt-" + kind);
  const std::string cmd = python() + " " + source_dir() + "/tests/io/format_fixtures.py " + kind + " " +
                          f.dir->str() + (arg.empty() ? "" : " " + arg);
  const RunResult r = run(cmd);
  INFO(cmd << "\n" << r.output);
  REQUIRE(r.status == 0);
  std::ifstream in(f.dir->str("manifest.json"));
  REQUIRE(in.good());
  f.manifest = json::parse(in);
  return cache.emplace(kind, std::move(f)).first->second;
}

inline std::vector<float> read_f32(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  REQUIRE(in.good());
  const auto size = static_cast<std::size_t>(in.tellg());
  std::vector<float> v(size / sizeof(float));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(size));
  return v;
}

/// Bit-for-bit equality, except that any NaN equals any NaN.
inline bool same_value(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  std::uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x == y;
}

/// Compares rows [r0, r1) decoded into `got` with the reference; reports the first mismatch.
inline void require_rows_equal(const std::vector<float>& ref, const std::vector<float>& got, std::size_t r0,
                               std::size_t cols, std::size_t bands, const std::string& what) {
  const std::size_t off = r0 * cols * bands;
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!same_value(ref[off + i], got[i])) {
      if (bad++ == 0) first = i;
    }
  }
  if (bad) {
    const std::size_t g = off + first;
    INFO(what << ": " << bad << " mismatches; first at row " << g / (cols * bands) << " col "
              << (g / bands) % cols << " band " << g % bands << ": expected " << ref[g] << ", got " << got[first]);
    CHECK(bad == 0);
  }
}

/// The manifest entry's scene: "spec" and, when given, "axes", "image_size" (empty: the file's) and "role"
inline io::SceneSpec spec_of(const json& e) {
  io::SceneSpec spec = io::SceneSpec::parse(e.at("spec").get<std::string>());
  if (e.contains("axes")) spec.axes = e.at("axes").get<std::string>();
  if (!e.value("image_size", "").empty()) spec.set_image_size(e.at("image_size"), "fixture image_size");
  if (e.value("role", "") == "scene") spec.role = io::SceneSpec::Role::scene;
  return spec;
}

/// Opens the manifest entry's scene, checks its size and compares every row against the reference,
/// read in blocks of `block` rows (the last one short) and once more as one unaligned middle window.
inline std::unique_ptr<io::Scene> check_scene(const json& e, std::size_t block = 4) {
  const io::SceneSpec spec = spec_of(e);
  INFO("scene " << e.at("name").get<std::string>() << " (" << spec.str() << ")");
  auto scene = io::open_scene(spec);
  // a [bands x pixels] matrix (the key, empty: the size is the file's) says so; nothing else does
  CHECK(scene->image_size().empty() == !e.contains("image_size"));
  const std::size_t rows = e.at("rows"), cols = e.at("cols"), bands = e.at("bands");
  REQUIRE(scene->rows() == rows);
  REQUIRE(scene->cols() == cols);
  REQUIRE(scene->bands() == bands);
  const auto ref = read_f32(e.at("ref").get<std::string>());
  REQUIRE(ref.size() == rows * cols * bands);
  for (std::size_t r0 = 0; r0 < rows; r0 += block) {
    const std::size_t r1 = std::min(rows, r0 + block);
    std::vector<float> got((r1 - r0) * cols * bands, -12345.0f);
    scene->read_rows(r0, r1, got.data());
    require_rows_equal(ref, got, r0, cols, bands, "block at row " + std::to_string(r0));
  }
  if (rows > 2) {
    std::vector<float> got((rows - 2) * cols * bands);
    scene->read_rows(1, rows - 1, got.data());
    require_rows_equal(ref, got, 1, cols, bands, "rows 1..rows-2 in one call");
  }
  CHECK(scene->bytes_read() > 0);
  CHECK_FALSE(scene->source_files().empty());
  return scene;
}

/// Several threads read interleaved one-row blocks of one Scene at the same time.
inline void check_concurrent(const json& e, int nthreads = 4) {
  auto scene = io::open_scene(spec_of(e));
  const std::size_t rows = scene->rows(), plane = scene->cols() * scene->bands();
  const auto ref = read_f32(e.at("ref").get<std::string>());
  std::vector<float> got(rows * plane, -1.0f);
  std::vector<std::thread> pool;
  std::vector<std::string> errors(static_cast<std::size_t>(nthreads));
  for (int t = 0; t < nthreads; ++t) {
    pool.emplace_back([&, t] {
      try {
        for (int pass = 0; pass < 3; ++pass) {
          for (std::size_t r = static_cast<std::size_t>(t); r < rows; r += static_cast<std::size_t>(nthreads)) {
            scene->read_rows(r, r + 1, got.data() + r * plane);
          }
        }
      } catch (const std::exception& ex) {
        errors[static_cast<std::size_t>(t)] = ex.what();
      }
    });
  }
  for (auto& th : pool) th.join();
  for (const auto& err : errors) CHECK(err.empty());
  require_rows_equal(ref, got, 0, scene->cols(), scene->bands(), "concurrent reads");
}

/// The message of the hsipipe::Error `f` throws (FAILs when it throws nothing or something else).
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const hsipipe::Error& e) {
    CHECK(e.exit_code() != 0);
    return e.what();
  } catch (const std::exception& e) {
    FAIL("expected an hsipipe::Error, got std::exception: " << e.what());
  }
  FAIL("expected an error, nothing was thrown");
  return "";
}

/// Every "errors" entry of a manifest: opening (and, with "read", decoding) must throw an hsipipe::Error
/// whose message contains each of "expect".
inline void check_errors(const json& manifest) {
  for (const auto& e : manifest.at("errors")) {
    const io::SceneSpec spec = spec_of(e);
    const bool read = e.value("read", false);
    const std::string msg = error_of([&] {
      auto s = io::open_scene(spec);
      if (read) {
        std::vector<float> buf(s->rows() * s->cols() * s->bands());
        s->read_rows(0, s->rows(), buf.data());
      }
    });
    INFO("spec " << spec.str() << "\nmessage: " << msg);
    for (const auto& want : e.at("expect")) CHECK(msg.find(want.get<std::string>()) != std::string::npos);
  }
}

/// read_labels() against the manifest's integer labels.
inline io::LabelImage check_labels(const json& e) {
  INFO("labels " << e.at("name").get<std::string>());
  const io::LabelImage img = io::read_labels(io::SceneSpec::parse(e.at("spec").get<std::string>()));
  REQUIRE(img.rows == e.at("rows").get<std::size_t>());
  REQUIRE(img.cols == e.at("cols").get<std::size_t>());
  const auto want = e.at("labels").get<std::vector<std::int32_t>>();
  REQUIRE(img.labels.size() == want.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) bad += img.labels[i] != want[i];
  CHECK(bad == 0);
  return img;
}

inline const json& entry(const json& manifest, const std::string& name) {
  for (const auto& e : manifest.at("scenes"))
    if (e.at("name") == name) return e;
  FAIL("no fixture named " << name);
  throw std::logic_error("unreachable");
}

}  // namespace hsipipe::test

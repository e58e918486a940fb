// core/outputs (where a command may write) and core/seal (files that carry the hash of their own text).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/outputs.hpp"
#include "core/seal.hpp"
#include "support/test_util.hpp"

namespace {
namespace stdfs = std::filesystem;
using namespace hsipipe;
using hsipipe::test::TempDir;

void touch(const std::string& p, const std::string& text = "x") {
  stdfs::create_directories(stdfs::path(p).parent_path());
  std::ofstream(p) << text;
}
}  // namespace

TEST_CASE("outputs: caches and runs own their folders") {
  TempDir t("outputs");
  const std::string d = t.str();
  touch(d + "/cache/manifest.json");
  touch(d + "/run/fold-1/checkpoint.pt");
  touch(d + "/run/preprocessing.json");
  touch(d + "/notes.txt", "mine");

  const auto o = outputs::owner_of(d + "/run/fold-1/checkpoint.pt");
  REQUIRE(o);
  CHECK(o->kind == outputs::Owner::Kind::run);
  CHECK(o->own_file);
  CHECK(outputs::owner_of(d + "/run/model.pt")->own_file == false);  // a new file beside the run's own
  CHECK(outputs::owner_of(d + "/run/summary.md")->own_file);
  CHECK(outputs::owner_of(d + "/run/fold-3.lock")->own_file);
  CHECK(outputs::owner_of(d + "/cache/sub/x")->kind == outputs::Owner::Kind::cache);
  CHECK_FALSE(outputs::owner_of(d + "/notes.txt"));

  // rule 1 and 2: never, --force or not
  CHECK_THROWS_AS(outputs::check_output_file(d + "/run/fold-1/checkpoint.pt", true, "export --out"), ConfigError);
  CHECK_THROWS_WITH(outputs::check_output_file(d + "/cache/model.pt", true, "export --out"), Catch::Contains("lies in the cache"));
  CHECK_THROWS_AS(outputs::check_output_file(d + "/run/preprocessing.json", true, "x"), ConfigError);
  // rule 3: an existing file only with --force, or when it holds the bytes to write
  CHECK_THROWS_WITH(outputs::check_output_file(d + "/notes.txt", false, "export --out"), Catch::Contains("--force"));
  CHECK_NOTHROW(outputs::check_output_file(d + "/notes.txt", true, "export --out"));
  const std::string same = "mine", other = "other";
  CHECK_NOTHROW(outputs::check_output_file(d + "/notes.txt", false, "folds --out", &same));
  CHECK_THROWS_AS(outputs::check_output_file(d + "/notes.txt", false, "folds --out", &other), ConfigError);
  CHECK_NOTHROW(outputs::check_output_file(d + "/run/model.pt", false, "export --out"));
  CHECK_NOTHROW(outputs::check_output_file(d + "/new/x.pt", false, "export --out"));
  // rule 4: folders and devices
  CHECK_THROWS_WITH(outputs::check_output_file(d, true, "x"), Catch::Contains("is a folder"));
  CHECK_THROWS_WITH(outputs::check_output_file("/dev/null", true, "x"), Catch::Contains("not a regular file"));
}

TEST_CASE("outputs: names are file stems") {
  for (const char* bad : {"", ".", "..", "../../victim", "a/b", "a\\b", ".hidden"})
    CHECK_THROWS_AS(outputs::check_file_stem(bad, "predict --name"), ConfigError);
  CHECK_THROWS_AS(outputs::check_file_stem(std::string("a\x01", 2), "predict --name"), ConfigError);
  CHECK_THROWS_AS(outputs::check_file_stem(std::string(201, 'a'), "predict --name"), ConfigError);
  for (const char* good : {"scene", "salinas_a", "flight-03.v2", "x..y"}) CHECK_NOTHROW(outputs::check_file_stem(good, "n"));
}

TEST_CASE("seal: any edit of a sealed file is found, a file without a seal passes") {
  const nlohmann::json j = {{"a", 1}, {"b", {{"shift", {0.25, -1.5e-7}}}}, {"label_values", {1, 2, 4}}};
  const std::string text = seal_json(j, "manifest_xxh3", 1);
  const std::string s = check_seal(text, "manifest_xxh3", "m.json");
  CHECK(s.size() == 16);
  CHECK(nlohmann::json::parse(text).at("manifest_xxh3") == s);
  CHECK(seal_json(nlohmann::json::parse(text), "manifest_xxh3", 1) == text);  // parse + dump is stable
  std::string edited = text;
  edited.replace(edited.find("0.25"), 4, "0.26");
  CHECK_THROWS_WITH(check_seal(edited, "manifest_xxh3", "m.json"), Catch::Contains("m.json") && Catch::Contains("manifest_xxh3"));
  CHECK(check_seal(j.dump(1) + "\n", "manifest_xxh3", "m.json").empty());  // written before seals
  // a nested field of the same name is not the seal (preprocessing.json holds the sealed manifest)
  const std::string outer = seal_json({{"manifest", nlohmann::json::parse(text)}}, "record_xxh3", 1);
  CHECK(check_seal(outer, "manifest_xxh3", "p.json").empty());
  CHECK_NOTHROW(check_seal(outer, "record_xxh3", "p.json"));
}

TEST_CASE("read_text refuses devices, folders and oversized files") {
  TempDir t("readtext");
  CHECK_THROWS_WITH(fs::read_text("/dev/zero"), Catch::Contains("/dev/zero") && Catch::Contains("not a regular file"));
  CHECK_THROWS_WITH(fs::read_text(t.str()), Catch::Contains("is a folder"));
  touch(t.str() + "/big", std::string(100, 'x'));
  CHECK_THROWS_WITH(fs::read_text(t.str() + "/big", 99), Catch::Contains("more than the 99"));
  CHECK(fs::read_text(t.str() + "/big", 100).size() == 100);
}

TEST_CASE("printable: control characters and bytes that are not UTF-8 are escaped") {
  CHECK(printable("ok \xc3\xa9\tline\n") == "ok \xc3\xa9\tline\n");
  CHECK(printable(std::string("a\x1b[31m\x01\xff", 8)) == "a\\x1b[31m\\x01\\xff");
}

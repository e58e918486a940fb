#include "core/outputs.hpp"

#include <sys/stat.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "core/error.hpp"

namespace hsipipe::outputs {
namespace {

namespace stdfs = std::filesystem;

bool exists_in(const stdfs::path& dir, const char* name) {
  std::error_code ec;
  return stdfs::exists(dir / name, ec);
}

/// fold-<digits>
bool is_fold_name(const std::string& n) {
  if (n.size() < 6 || n.compare(0, 5, "fold-") != 0) return false;
  for (std::size_t i = 5; i < n.size(); ++i)
    if (n[i] < '0' || n[i] > '9') return false;
  return true;
}

bool is_fold_dir(const stdfs::path& dir) {
  return is_fold_name(dir.filename().string()) &&
         (exists_in(dir, "checkpoint.pt") || exists_in(dir, "epochs.jsonl") || exists_in(dir, "metrics.json"));
}

/// The files train and report write at a run's top level.
bool is_run_top_file(const std::string& n) {
  static const std::array<const char*, 5> kFiles = {"preprocessing.json", "summary.json", "summary.md", "io.json", "run.lock"};
  for (const char* f : kFiles)
    if (n == f) return true;
  return n.size() > 5 && n.compare(n.size() - 5, 5, ".lock") == 0 && is_fold_name(n.substr(0, n.size() - 5));
}

std::string kind_word(Owner::Kind k) { return k == Owner::Kind::cache ? "cache" : "training run"; }

bool same_bytes(const std::string& path, const std::string& bytes) {
  std::error_code ec;
  if (stdfs::file_size(path, ec) != bytes.size() || ec) return false;
  std::ifstream in(path, std::ios::binary);
  return in && std::string(std::istreambuf_iterator<char>(in), {}) == bytes;
}

}  // namespace

std::optional<Owner::Kind> kind_of_dir(const std::string& dir) {
  std::error_code ec;
  const stdfs::path d(dir);
  if (!stdfs::is_directory(d, ec)) return std::nullopt;
  if (exists_in(d, "manifest.json") || exists_in(d, "stage.json")) return Owner::Kind::cache;
  if (exists_in(d, "preprocessing.json")) return Owner::Kind::run;
  for (const auto& e : stdfs::directory_iterator(d, ec))
    if (e.is_directory(ec) && is_fold_dir(e.path())) return Owner::Kind::run;
  return std::nullopt;
}

std::optional<Owner> owner_of(const std::string& path) {
  std::error_code ec;
  stdfs::path p = stdfs::weakly_canonical(stdfs::absolute(path, ec), ec);
  if (ec) p = stdfs::absolute(path).lexically_normal();
  const bool is_dir = stdfs::is_directory(p, ec);
  stdfs::path child = is_dir ? stdfs::path() : p;  // the entry of `dir` that leads to PATH (empty: PATH is dir)
  for (stdfs::path dir = is_dir ? p : p.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    if (const auto k = kind_of_dir(dir.string())) {
      Owner o{*k, dir.string(), false};
      if (*k == Owner::Kind::run) {
        const std::string top = child.empty() ? std::string() : child.filename().string();
        o.own_file = child.empty() || is_fold_name(top) || (child == p && is_run_top_file(top));
      }
      return o;
    }
    child = dir;
    if (dir == dir.root_path()) break;
  }
  return std::nullopt;
}

void check_output_file(const std::string& path, bool force, const std::string& option, const std::string* bytes) {
  const std::string where = option + " " + path + ": ";
  if (path.empty()) throw ConfigError(option + ": an empty path");
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) throw ConfigError(where + "is a folder; give the file to write");
  if (exists && !S_ISREG(st.st_mode))
    throw ConfigError(where + "exists and is not a regular file (a device, FIFO or socket); give a file to write");
  if (const auto o = owner_of(path)) {
    if (o->kind == Owner::Kind::cache)
      throw ConfigError(where + "lies in the cache " + o->dir +
                        ", whose folder holds its own files only (--force or not): write the file beside it");
    if (o->own_file)
      throw ConfigError(where + "is " + (exists ? "" : "the place of ") + "one of the files of the training run " + o->dir +
                        ", which only hsipipe train and report write (--force or not): write the file elsewhere");
  }
  if (exists && !force && !(bytes && same_bytes(path, *bytes)))
    throw ConfigError(where + "exists; --force replaces it (nothing was written)");
}

void check_file_stem(const std::string& name, const std::string& what) {
  const std::string where = what + " '" + name + "': ";
  if (name.empty() || name == "." || name == "..") throw ConfigError(where + "not a file name");
  if (name.size() > 200) throw ConfigError(what + ": a name of " + std::to_string(name.size()) + " bytes (at most 200)");
  if (name.front() == '.') throw ConfigError(where + "starts with '.': give a plain file stem");
  for (const char c : name) {
    if (c == '/' || c == '\\')
      throw ConfigError(where + "holds a '" + std::string(1, c) + "': a name is a file stem, not a path (outputs go to --out)");
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) throw ConfigError(what + ": a name with a control character");
  }
}

}  // namespace hsipipe::outputs

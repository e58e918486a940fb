#pragma once
// core/outputs: the one place that decides whether a command may write a file the user named, so that no
// command destroys what the user did not ask it to replace (issue 43 item 1). Every command that writes a
// file or folder it did not create itself calls these before any work:
//   - check_output_file: export --out, cog OUT, folds --out / --export-samples, plan and compare outputs;
//   - check_file_stem:   names that become file names (predict --name, INI [scene.NAME]);
//   - owner_of:          whether a path lies in a cache (manifest.json or stage.json) or a training run
//                        (preprocessing.json, fold-I/ with checkpoint.pt, epochs.jsonl or metrics.json).
// The rules:
//   1. a cache's folder holds its own files only: nothing is written into it, --force or not;
//   2. a run's fold-I/ folders and its own top-level files (preprocessing.json, summary.json/md, io.json,
//      run.lock, fold-I.lock) are written by train and report only: never by another command, --force or not;
//   3. an existing file is replaced only with --force, unless it already holds exactly the bytes that would be
//      written (a rerun of a deterministic command, such as folds with the same cache and options, loses nothing);
//   4. a folder, a device, a FIFO or a socket is never an output file.
// All checks are rank-local and read only; a refusal is a ConfigError naming the option and the path.
#include <optional>
#include <string>

namespace hsipipe::outputs {

/// What owns a path: a cache folder or a training run, and that folder.
struct Owner {
  enum class Kind { cache, run } kind;
  std::string dir;
  /// for a run: true when the path is inside one of its fold-I/ folders or is one of its own top-level files
  bool own_file = false;
};

/// Whether DIR itself is a cache (manifest.json or stage.json) or a run (preprocessing.json, or a fold-I/ with
/// checkpoint.pt, epochs.jsonl or metrics.json).
std::optional<Owner::Kind> kind_of_dir(const std::string& dir);

/// The innermost cache or run that PATH lies in (its parents, nearest first; PATH itself when it is a folder),
/// or nullopt. Symbolic links are followed.
std::optional<Owner> owner_of(const std::string& path);

/// Refuses PATH as an output file of `option` (e.g. "export --out"): see the rules above. `bytes`, when given,
/// are what would be written: an existing file with exactly these bytes is not a replacement (rule 3).
void check_output_file(const std::string& path, bool force, const std::string& option,
                       const std::string* bytes = nullptr);

/// Refuses NAME as a file stem (`what` names where it came from, e.g. "predict --name"): empty, ".", "..",
/// a leading '.', '/' or '\\', a NUL or control character, or longer than 200 bytes.
void check_file_stem(const std::string& name, const std::string& what);

}  // namespace hsipipe::outputs

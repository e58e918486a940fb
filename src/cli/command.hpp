#pragma once
// cli: the `hsipipe <command> [options]` front end. Each command lives in its own cmd_*.cpp, builds a
// Boost.Program_options description and registers itself with HSIPIPE_COMMAND. This layer only parses,
// prints and maps errors to exit codes; the work happens in the libraries below it.
//
// Configuration files (--config FILE, INI): keys in a section named after the command ([decode],
// [folds], [train], ...) must be options of that command; keys before any section apply to every
// command that knows them; sections of other commands are ignored; [scene.NAME] sections are handed
// to the command as `sections`. Command-line values always win over the file.
#include <boost/program_options.hpp>
#include <map>
#include <string>
#include <vector>

namespace hsipipe::cli {

namespace po = boost::program_options;

using CommandFn = int (*)(int argc, char** argv);

struct Command {
  const char* name;
  const char* summary;
  CommandFn run;
};

std::vector<Command>& registry();

struct Registrar {
  explicit Registrar(Command c) { registry().push_back(c); }
};

#define HSIPIPE_COMMAND(NAME, SUMMARY, FN) \
  static ::hsipipe::cli::Registrar hsipipe_registrar_##FN{::hsipipe::cli::Command{NAME, SUMMARY, FN}}

struct Parsed {
  po::variables_map vm;
  bool help = false;  ///< --help was given and printed: the command should return 0
  std::string config_path;
  /// Sections other than the command's own, e.g. {"scene.indian": {{"path", "..."}, {"labels", "..."}}},
  /// in file order of first appearance.
  std::vector<std::pair<std::string, std::map<std::string, std::string>>> sections;
};

/// Parses argv[1..] (argv[0] is the command name) against `desc`, plus the common --help and --config.
/// Throws ConfigError on unknown options or bad values, naming the option (and the config file).
Parsed parse(int argc, char** argv, const std::string& command, const std::string& usage,
             const po::options_description& desc, const po::positional_options_description* positional = nullptr);

/// Splits "a,b,c" (spaces trimmed, empties dropped).
std::vector<std::string> split_list(const std::string& s, char sep = ',');

}  // namespace hsipipe::cli

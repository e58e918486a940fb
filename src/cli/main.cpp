// hsipipe: the command-line entry point. Dispatches `hsipipe <command> ...` to the registered
// commands and turns typed errors into messages and exit codes.
#include <algorithm>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>
#include <new>

#include "cli/command.hpp"
#include "cli/plugin.hpp"
#include "core/error.hpp"
#include "core/signals.hpp"
#include "core/test_hook.hpp"
#include "core/version.hpp"

namespace {

void print_usage() {
  const std::string plugin_error = hsipipe::cli::load_train_plugin();
  auto cmds = hsipipe::cli::registry();
  std::sort(cmds.begin(), cmds.end(), [](auto& a, auto& b) { return std::strcmp(a.name, b.name) < 0; });
  std::cout << "hsipipe " << hsipipe::kVersion << ": decode hyperspectral scenes once, train k folds on the cache\n\n"
            << "Usage: hsipipe <command> [options]      (hsipipe <command> --help for its options)\n\nCommands:\n";
  for (const auto& c : cmds) std::cout << "  " << c.name << std::string(12 - std::min<std::size_t>(11, std::strlen(c.name)), ' ') << c.summary << "\n";
  if (!plugin_error.empty()) std::cout << "  (train, report, plan, bench, predict, export, compare: unavailable: " << plugin_error << ")\n";
  std::cout << "\nOptions:\n  -h, --help     this help\n  --version      version and git commit\n";
}

const hsipipe::cli::Command* find(const char* name) {
  const auto& cmds = hsipipe::cli::registry();
  const auto it = std::find_if(cmds.begin(), cmds.end(), [&](auto& c) { return !std::strcmp(c.name, name); });
  return it == cmds.end() ? nullptr : &*it;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    print_usage();
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--version")) {
    std::cout << "hsipipe " << hsipipe::kVersion << " (commit " << hsipipe::kGitCommit << ")\n";
    return 0;
  }
  // `train` handles SIGTERM/SIGUSR1 (checkpoint and stop) for its whole life, from before the training plugin
  // and MPI start: a signal reaching a rank early or late is recorded, never fatal (core/signals.hpp).
  if (!std::strcmp(argv[1], "train")) hsipipe::install_preempt_handlers();
  const hsipipe::cli::Command* it = find(argv[1]);
  if (it == nullptr) {  // not built in: the training plugin may have it
    const std::string plugin_error = hsipipe::cli::load_train_plugin();
    it = find(argv[1]);
    if (it == nullptr) {
      std::cerr << "hsipipe: unknown command '" << argv[1] << "' (hsipipe --help lists them)\n";
      if (!plugin_error.empty())
        std::cerr << "hsipipe: the training commands (train, report, plan, bench, predict, export, compare) could not be loaded: " << plugin_error
                  << "\n";
      return 2;
    }
  }
  try {
    const int rc = it->run(argc - 1, argv + 1);
    hsipipe::test_pause("HSIPIPE_TEST_EXIT_MS");  // tests: a signal that lands after the command (MPI_Finalize included)
    return rc;
  } catch (const hsipipe::Error& e) {
    hsipipe::print_error_line("hsipipe " + std::string(it->name) + ": error: " + e.what());
    return e.exit_code();
  } catch (const std::filesystem::filesystem_error& e) {
    const hsipipe::IoError io = hsipipe::io_error_from(e);
    hsipipe::print_error_line("hsipipe " + std::string(it->name) + ": error: " + io.what());
    return io.exit_code();
  } catch (const std::bad_alloc&) {
    hsipipe::print_error_line("hsipipe " + std::string(it->name) + ": error: " + std::string(hsipipe::kOutOfMemory));
    return 1;
  } catch (const std::exception& e) {
    hsipipe::print_error_line("hsipipe " + std::string(it->name) + ": error: " + e.what());
    return 1;
  }
}

#include <catch2/catch.hpp>

#include <csignal>

#include "core/signals.hpp"

// The handler `hsipipe train` installs first thing: SIGUSR1 and SIGTERM are recorded, the process lives on.
// (The whole-life behaviour across real ranks and Slurm is tests/slurm/test_two_nodes.sh's.)
TEST_CASE("preemption signals are recorded, not fatal, once the handlers are installed") {
  hsipipe::install_preempt_handlers();
  hsipipe::install_preempt_handlers();  // again: still one handler, still recording
  REQUIRE(std::raise(SIGUSR1) == 0);
  CHECK(hsipipe::preempt_signal() == SIGUSR1);
  REQUIRE(std::raise(SIGTERM) == 0);
  CHECK(hsipipe::preempt_signal() == SIGTERM);
  struct sigaction now {};
  sigaction(SIGTERM, nullptr, &now);
  CHECK(now.sa_handler != SIG_DFL);
  CHECK((now.sa_flags & SA_RESTART) != 0);
}

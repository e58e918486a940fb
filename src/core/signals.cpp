#include "core/signals.hpp"

#include <csignal>

namespace hsipipe {
namespace {

volatile std::sig_atomic_t g_preempt_signal = 0;

extern "C" void hsipipe_record_preempt_signal(int sig) { g_preempt_signal = sig; }

}  // namespace

void install_preempt_handlers() {
  struct sigaction sa {};
  sa.sa_handler = hsipipe_record_preempt_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGUSR1, &sa, nullptr);
}

int preempt_signal() noexcept { return g_preempt_signal; }

}  // namespace hsipipe

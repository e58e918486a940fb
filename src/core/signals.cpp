#include "core/signals.hpp"

#include <unistd.h>

#include <csignal>
#include <cstring>
#include <algorithm>
#include <string>

namespace hsipipe {
namespace {

volatile std::sig_atomic_t g_preempt_signal = 0;

extern "C" void hsipipe_record_preempt_signal(int sig) { g_preempt_signal = sig; }

char g_note[2048];
std::size_t g_note_len = 0;

extern "C" void hsipipe_interrupt_note(int sig) {
  const char* name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "a signal";
  const char* pre = "\nhsipipe: interrupted by ";
  if (::write(STDERR_FILENO, pre, std::strlen(pre)) < 0 || ::write(STDERR_FILENO, name, std::strlen(name)) < 0 ||
      ::write(STDERR_FILENO, g_note, g_note_len) < 0) { /* nothing to do in a handler */ }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

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

void install_interrupt_note(const std::string& text) {
  const std::string t = ": " + text + "\n";
  g_note_len = std::min(t.size(), sizeof g_note);
  std::memcpy(g_note, t.data(), g_note_len);
  struct sigaction sa {};
  sa.sa_handler = hsipipe_interrupt_note;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
}

void clear_interrupt_note() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, SIG_DFL);
}

}  // namespace hsipipe

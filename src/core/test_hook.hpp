#pragma once
// core/test_hook: pauses the tests ask for through the environment (HSIPIPE_TEST_*_MS), so that a signal or a
// kill -9 lands at a known point (mid-write, before publishing, mid-fold, after the command returned:
// HSIPIPE_TEST_EXIT_MS) however fast the machine is, and
// sizes they shrink (HSIPIPE_TEST_BLOCK_BYTES, HSIPIPE_TEST_PIECE_BYTES: many decode blocks and h5 write
// rounds on a small scene). Unset: nothing changes.
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <thread>

namespace hsipipe {

/// Milliseconds of the test pause named `var` (0 when unset).
inline long test_delay_ms(const char* var) {
  const char* d = std::getenv(var);
  return d ? std::atol(d) : 0L;
}

/// A size the tests choose through the environment (HSIPIPE_TEST_*), or `fallback` when unset or not positive.
inline std::size_t test_value(const char* var, std::size_t fallback) {
  const char* d = std::getenv(var);
  const long long v = d ? std::atoll(d) : 0LL;
  return v > 0 ? static_cast<std::size_t>(v) : fallback;
}

/// Sleeps test_delay_ms(var) when positive.
inline void test_pause(const char* var) {
  if (const long ms = test_delay_ms(var); ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

}  // namespace hsipipe

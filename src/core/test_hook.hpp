#pragma once
// core/test_hook: the one place where tests reach into the code through the environment. Every hook is a
// HSIPIPE_TEST_* variable listed in kTestHooks below, and code reads one only through test_value(),
// test_pause(), test_delay_ms() or test_switch(), whose TestHook argument is checked at compile time against
// that list: a hook that is not listed here does not build. None of them is a setting for users (those are
// the commands' options, docs/KNOBS.md); unset, nothing changes.
//
// The scripts' own parameters (HSIPIPE_TEST_EPOCHS and HSIPIPE_TEST_SKEWED_RUNS of tests/slurm, the CMake
// variables HSIPIPE_TEST_ENV and HSIPIPE_TEST_PYTHON) are not hooks: hsipipe never reads them.
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <thread>

namespace hsipipe {

/// Every test hook, with what it does. Pauses (*_MS) let a signal or a kill -9 land at a known point however
/// fast the machine is; sizes shrink so that a small scene has many blocks or rounds; switches force the
/// path a test compares against (the path that is otherwise chosen by the machine or the file system).
inline constexpr std::string_view kTestHooks[] = {
    // pauses, milliseconds
    "HSIPIPE_TEST_DELAY_STATS_MS",    // decode: per statistics block, and per PCA block (the progress test)
    "HSIPIPE_TEST_DELAY_WRITE_MS",    // decode: per write block (a window for kill -9 mid-write)
    "HSIPIPE_TEST_DELAY_PUBLISH_MS",  // decode: before publishing (a window for kill -9 before the rename)
    "HSIPIPE_TEST_STEP_DELAY_MS",     // train: per step (a signal mid-fold)
    "HSIPIPE_TEST_EXIT_MS",           // main: after the command returned, MPI_Finalize included
    // sizes, bytes
    "HSIPIPE_TEST_BLOCK_BYTES",        // decode: row-block bytes (32 MiB)
    "HSIPIPE_TEST_PIECE_BYTES",        // decode, h5: pixel write pieces (2 MiB)
    "HSIPIPE_TEST_PATCH_PIECE_BYTES",  // decode: patch write pieces (32 MiB)
    // switches: 1 forces the path, 0 (where it says so) forbids it
    "HSIPIPE_TEST_NO_EXCHANGE",     // publish: two renames, as on a file system without renameat2's exchange
    "HSIPIPE_TEST_KEEP_SAMPLES",    // decode: keep an ENVI scene's samples for the write pass too
    "HSIPIPE_TEST_NO_STAGE",        // decode, npy: kept samples wait in a buffer, not in the file's pages
    "HSIPIPE_TEST_KEEP_F32",        // decode: kept samples as float32 even when they are 16-bit integers
    "HSIPIPE_TEST_KEEP_I16",        // decode: kept samples as int16 for any scene (that path's fallback)
    "HSIPIPE_TEST_DECODE_OVERLAP",  // decode, h5: 1 overlaps writes even on one CPU, 0 never (else: a 2nd CPU)
    "HSIPIPE_TEST_NPY_PWRITE",      // decode, npy: write with pwrite, as where a shared mapping is refused
    "HSIPIPE_TEST_NO_SIMD",         // ENVI reader: the scalar kernels, as on a CPU without AVX2
};

/// The name of a test hook; a string literal that is not in kTestHooks is a compile-time error.
struct TestHook {
  const char* name;
  consteval TestHook(const char* n) : name(n) {  // NOLINT(google-explicit-constructor): a literal at the call
    bool listed = false;
    for (const auto h : kTestHooks) listed = listed || h == std::string_view(n);
    if (!listed) throw "not a test hook: add it to kTestHooks in core/test_hook.hpp";
  }
};

/// Milliseconds of the test pause `h` (0 when unset).
inline long test_delay_ms(TestHook h) {
  const char* d = std::getenv(h.name);
  return d ? std::atol(d) : 0L;
}

/// A size the tests choose through hook `h`, or `fallback` when unset or not positive.
inline std::size_t test_value(TestHook h, std::size_t fallback) {
  const char* d = std::getenv(h.name);
  const long long v = d ? std::atoll(d) : 0LL;
  return v > 0 ? static_cast<std::size_t>(v) : fallback;
}

/// Sleeps test_delay_ms(h) when positive.
inline void test_pause(TestHook h) {
  if (const long ms = test_delay_ms(h); ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

/// A switch a test forces through hook `h`: nullopt when unset or empty, else whether it is not "0".
inline std::optional<bool> test_switch(TestHook h) {
  const char* d = std::getenv(h.name);
  if (!d || !*d) return std::nullopt;
  return std::string_view(d) != "0";
}

}  // namespace hsipipe

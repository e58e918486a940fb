#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/overlap.hpp"

using hsipipe::overlap_rounds;

namespace {

struct Slot {
  std::uint64_t round = ~0ull;
  std::vector<int> data;
};

/// Waits up to 10 s for `flag`; false when it never came (the stages did not overlap).
bool wait_for(const std::atomic<bool>& flag) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!flag.load()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace

TEST_CASE("overlap_rounds consumes every round in order, with the slot its produce filled") {
  for (const bool threaded : {false, true}) {
    for (const std::uint64_t rounds : {0ull, 1ull, 2ull, 3ull, 50ull}) {
      std::vector<std::uint64_t> seen;
      overlap_rounds<Slot>(
          rounds, threaded,
          [&](std::uint64_t k, Slot& s) {
            s.round = k;
            s.data.assign(1000, static_cast<int>(k));
          },
          [&](std::uint64_t k, Slot& s, const std::exception_ptr& err) {  // no REQUIRE off the test's thread
            auto intact = [&] { return !err && s.round == k && s.data == std::vector<int>(1000, static_cast<int>(k)); };
            bool ok = intact();
            // meanwhile round k+1 is produced: into the other slot, never this one
            if (threaded && k % 7 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
            ok = ok && intact();
            seen.push_back(ok ? k : ~0ull);
          });
      std::vector<std::uint64_t> want(rounds);
      for (std::uint64_t k = 0; k < rounds; ++k) want[k] = k;
      INFO("threaded " << threaded << ", rounds " << rounds);
      REQUIRE(seen == want);
    }
  }
}

TEST_CASE("threaded overlap_rounds produces round k+1 while round k is consumed, never further ahead") {
  std::atomic<bool> second_produced{false};
  std::atomic<bool> third_produced{false};
  std::atomic<bool> consumed_first{false};
  bool overlapped = false, ahead_of_slots = false, third_too_early = false;
  std::thread::id producer, consumer;
  overlap_rounds<Slot>(
      3, true,
      [&](std::uint64_t k, Slot&) {
        producer = std::this_thread::get_id();
        if (k == 1) second_produced = true;
        if (k == 2) {
          // slot 0 is free only once round 0 was consumed
          ahead_of_slots = !consumed_first.load();
          third_produced = true;
        }
      },
      [&](std::uint64_t k, Slot&, const std::exception_ptr&) {
        consumer = std::this_thread::get_id();
        if (k == 0) {
          overlapped = wait_for(second_produced);   // round 1 is built while round 0 is still being consumed
          third_too_early = third_produced.load();  // but not round 2: both slots are in use
          consumed_first = true;
        }
      });
  REQUIRE(overlapped);
  REQUIRE_FALSE(ahead_of_slots);
  REQUIRE_FALSE(third_too_early);
  REQUIRE(producer == std::this_thread::get_id());
  REQUIRE(consumer != producer);
}

TEST_CASE("a failed produce reaches consume as its error; nothing after it is produced") {
  for (const bool threaded : {false, true}) {
    std::vector<std::uint64_t> produced, consumed;
    std::mutex m;
    std::string what;
    try {
      overlap_rounds<Slot>(
          10, threaded,
          [&](std::uint64_t k, Slot&) {
            {
              std::lock_guard l(m);
              produced.push_back(k);
            }
            if (k == 4) throw std::runtime_error("block 4 is corrupt");
          },
          [&](std::uint64_t k, Slot&, const std::exception_ptr& err) {
            {
              std::lock_guard l(m);
              consumed.push_back(k);
            }
            if (err) std::rethrow_exception(err);  // what the decoder's collective_step does
          });
    } catch (const std::runtime_error& e) {
      what = e.what();
    }
    INFO("threaded " << threaded);
    REQUIRE(what == "block 4 is corrupt");
    REQUIRE(produced == std::vector<std::uint64_t>{0, 1, 2, 3, 4});
    REQUIRE(consumed == std::vector<std::uint64_t>{0, 1, 2, 3, 4});
  }
}

TEST_CASE("a failed consume stops production and is rethrown") {
  for (const bool threaded : {false, true}) {
    std::atomic<std::uint64_t> last_produced{0};
    std::string what;
    try {
      overlap_rounds<Slot>(
          100, threaded, [&](std::uint64_t k, Slot&) { last_produced = k; },
          [&](std::uint64_t k, Slot&, const std::exception_ptr&) {
            if (k == 3) throw std::runtime_error("disk full at round 3");
          });
    } catch (const std::runtime_error& e) {
      what = e.what();
    }
    INFO("threaded " << threaded);
    REQUIRE(what == "disk full at round 3");
    REQUIRE(last_produced.load() <= 4);  // at most the round built beside the failing one
  }
}

TEST_CASE("a consume that ignores a produce error is an internal error, not a hang") {
  for (const bool threaded : {false, true}) {
    INFO("threaded " << threaded);
    REQUIRE_THROWS_AS(overlap_rounds<Slot>(
                          5, threaded,
                          [&](std::uint64_t k, Slot&) {
                            if (k == 2) throw std::runtime_error("bad block");
                          },
                          [&](std::uint64_t, Slot&, const std::exception_ptr&) {}),
                      std::logic_error);
  }
}

#pragma once
// core/overlap: two-stage pipelines. overlap_rounds() produces round k+1 on the calling thread while one
// helper thread consumes round k (two slots, rounds consumed in order), so that the time a consumer spends
// waiting (a lock, another rank, the disk) is spent producing instead. The decoder uses it to build the
// next block while the current one goes through HDF5's collective write.
#include <array>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace hsipipe {

/// Runs produce(k, slot) and then consume(k, slot, error) for k = 0 .. rounds-1, over two Slots.
/// With `threaded`, consume runs on one helper thread and overlaps the next produce; otherwise (or when the
/// thread cannot be started) both run here, one after the other. Either way:
///   - rounds are consumed in order, each slot by one stage at a time;
///   - an exception from produce(k) is NOT thrown here: it reaches consume(k) as `error` (so that consume can
///     agree on it with other processes), and no round after k is produced. consume must throw when given an
///     error; overlap_rounds() then rethrows that exception after the helper has joined;
///   - an exception from consume stops production after the current round and is rethrown here.
template <class Slot, class Produce, class Consume>
void overlap_rounds(std::uint64_t rounds, bool threaded, Produce&& produce, Consume&& consume) {
  std::array<Slot, 2> slots;
  std::array<std::exception_ptr, 2> errs;
  auto produce_one = [&](std::uint64_t k) {
    errs[k % 2] = nullptr;
    try {
      produce(k, slots[k % 2]);
    } catch (...) {
      errs[k % 2] = std::current_exception();
    }
    return errs[k % 2] == nullptr;
  };
  const auto broken_contract = [] {
    return std::logic_error("overlap_rounds: consume returned on a round whose produce failed (internal error)");
  };
  auto sequential = [&](std::uint64_t from) {
    for (std::uint64_t k = from; k < rounds; ++k) {
      const bool ok = produce_one(k);
      consume(k, slots[k % 2], errs[k % 2]);
      if (!ok) throw broken_contract();
    }
  };
  if (!threaded || rounds < 2) return sequential(0);

  std::mutex m;
  std::condition_variable cv;
  std::uint64_t produced = 0, consumed = 0;
  bool producing_done = false, consumer_failed = false;
  std::exception_ptr consumer_error;
  std::thread helper;
  try {
    helper = std::thread([&] {
      try {
        for (std::uint64_t k = 0; k < rounds; ++k) {
          {
            std::unique_lock l(m);
            cv.wait(l, [&] { return produced > k || producing_done; });
            if (produced <= k) return;  // production stopped early: a produce error already thrown by consume
          }
          consume(k, slots[k % 2], errs[k % 2]);
          if (errs[k % 2]) throw broken_contract();
          {
            std::lock_guard l(m);
            consumed = k + 1;
          }
          cv.notify_all();
        }
      } catch (...) {
        std::lock_guard l(m);
        consumer_error = std::current_exception();
        consumer_failed = true;
      }
      cv.notify_all();
    });
  } catch (const std::system_error&) {
    return sequential(0);  // no thread to be had: the same work, in turn
  }
  // Ends production and joins the helper, also when this thread throws (a mutex or condition variable
  // failing): a joinable std::thread must not be destroyed.
  auto finish = [&]() noexcept {
    {
      std::lock_guard l(m);
      producing_done = true;
    }
    cv.notify_all();
    helper.join();
  };
  try {
    for (std::uint64_t k = 0; k < rounds; ++k) {
      {
        std::unique_lock l(m);
        cv.wait(l, [&] { return consumer_failed || consumed + 2 > k; });  // slot k % 2 is free
        if (consumer_failed) break;
      }
      const bool ok = produce_one(k);
      {
        std::lock_guard l(m);
        produced = k + 1;
        producing_done = !ok || k + 1 == rounds;
      }
      cv.notify_all();
      if (!ok) break;
    }
  } catch (...) {
    finish();
    throw;
  }
  finish();
  if (consumer_error) std::rethrow_exception(consumer_error);
}

}  // namespace hsipipe

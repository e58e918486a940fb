#pragma once
// core/big_alloc: an allocator for large working buffers (decoded row windows, kept samples) whose
// elements are default-initialised, so vector::resize does not write zeros the caller overwrites anyway.
// Blocks of 2 MiB or more come straight from mmap (fresh pages read as zero regardless) and go back with
// munmap, marked MADV_HUGEPAGE: one fault per 2 MiB instead of 512. On the virtual machines this project
// is measured on, a 4 KiB fault of fresh memory costs ~10 us (shadow page tables; 370 MB/s first touch
// against 11 GB/s with huge pages), and the benchmark's decode went 2.36 -> 1.74 s (1 rank) and
// 1.79 -> 1.34 s (2 ranks), npy, 4 rounds in rotated order, 1 Dec 2026 (h5: 2.26 -> 1.74, 1.59 -> 1.36).
// The cost: with THP defrag "madvise" (Debian's default) a fault compacts memory synchronously when no
// huge page is free; on another VM with fragmented memory a 1 GB window set was measured 2-4x slower
// with it. So whether huge pages pay is the node's (docs/KNOBS.md): `hsipipe decode --huge-pages off`
// (set_huge_pages) turns them off for the process.
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace hsipipe {

/// Whether BigAllocator's large blocks ask for transparent huge pages (process-wide; on by default).
inline std::atomic<bool>& huge_pages_flag() noexcept {
  static std::atomic<bool> on{true};
  return on;
}
/// Turns huge pages on or off for the blocks allocated from now on (decode's --huge-pages).
inline void set_huge_pages(bool on) noexcept { huge_pages_flag().store(on, std::memory_order_relaxed); }

template <class T>
struct BigAllocator {
  static_assert(std::is_trivially_destructible_v<T>, "BigAllocator holds plain numbers");
  using value_type = T;
  static constexpr std::size_t kThreshold = std::size_t{2} << 20;

  BigAllocator() noexcept = default;
  template <class U>
  BigAllocator(const BigAllocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kThreshold) return std::allocator<T>{}.allocate(n);
    if (!huge_pages()) return static_cast<T*>(map(bytes));
    // Huge pages need 2 MiB-aligned addresses: map 2 MiB more, give back the unaligned head and the tail.
    const std::size_t len = bytes + kThreshold;
    auto* raw = static_cast<char*>(map(len));
    char* p = raw + (kThreshold - reinterpret_cast<std::uintptr_t>(raw) % kThreshold) % kThreshold;
    static const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    char* end = p + (bytes + page - 1) / page * page;
    if (p > raw) ::munmap(raw, static_cast<std::size_t>(p - raw));
    if (raw + len > end) ::munmap(end, static_cast<std::size_t>(raw + len - end));
    (void)::madvise(p, bytes, MADV_HUGEPAGE);  // advisory: without THP, 4 KiB pages as before
    return reinterpret_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kThreshold) std::allocator<T>{}.deallocate(p, n);
    else ::munmap(p, bytes);
  }
  /// Default-initialise (no zeroing) when constructed without arguments.
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  static void* map(std::size_t bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return p;
  }
  static bool huge_pages() noexcept { return huge_pages_flag().load(std::memory_order_relaxed); }
  template <class U>
  bool operator==(const BigAllocator<U>&) const noexcept { return true; }
};

/// A float buffer for large working sets (see BigAllocator).
using BigFloats = std::vector<float, BigAllocator<float>>;

}  // namespace hsipipe

#pragma once
// core/big_alloc: an allocator for large working buffers (decoded row windows) whose elements are
// default-initialised, so vector::resize does not write zeros the caller overwrites anyway. Blocks of
// 2 MiB or more come straight from mmap (fresh pages read as zero regardless) and go back with munmap.
// No MADV_HUGEPAGE: with THP defrag "madvise" (Debian's default) it makes page faults compact memory
// synchronously, measured 2-4x slower for a 1 GB window set.
#include <sys/mman.h>

#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace hsipipe {

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
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return static_cast<T*>(p);
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
  template <class U>
  bool operator==(const BigAllocator<U>&) const noexcept { return true; }
};

/// A float buffer for large working sets (see BigAllocator).
using BigFloats = std::vector<float, BigAllocator<float>>;

}  // namespace hsipipe

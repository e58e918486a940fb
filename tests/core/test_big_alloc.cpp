// core/big_alloc: small blocks from the heap, large ones mapped, 2 MiB-aligned and marked for huge pages
// (the kernel's own record of the mapping, /proc/self/smaps, says so), usable to the last element, and
// given back whole.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <cstdint>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>

#include "core/big_alloc.hpp"

namespace {

/// The VmFlags line of the mapping that holds `addr` in /proc/self/smaps ("" when none holds it).
std::string vm_flags_of(const void* addr) {
  std::ifstream smaps("/proc/self/smaps");
  const auto a = reinterpret_cast<std::uintptr_t>(addr);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= a && a < hi;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

}  // namespace

TEST_CASE("BigFloats: large blocks are 2 MiB aligned, marked for huge pages, and usable") {
  for (const std::size_t n : {std::size_t{1000}, std::size_t{(2u << 20) / 4}, std::size_t{3'000'001}}) {
    hsipipe::BigFloats v(n);
    std::iota(v.begin(), v.end(), 0.0f);
    CHECK(v.front() == 0.0f);
    CHECK(v.back() == static_cast<float>(n - 1));
    if (n * sizeof(float) < (2u << 20)) continue;
    CHECK(reinterpret_cast<std::uintptr_t>(v.data()) % (2u << 20) == 0);
    struct stat st{};
    if (::stat("/sys/kernel/mm/transparent_hugepage", &st) == 0) {
      const std::string flags = vm_flags_of(v.data());
      INFO(flags);
      CHECK(flags.find(" hg") != std::string::npos);
    }
  }
}

TEST_CASE("BigFloats: a block given back is no longer mapped") {
  const void* p = nullptr;
  {
    hsipipe::BigFloats v(5'000'000);
    v.back() = 1.0f;
    p = v.data();
    CHECK_FALSE(vm_flags_of(p).empty());
  }
  CHECK(vm_flags_of(p).empty());
}

TEST_CASE("BigFloats: with huge pages off (decode --huge-pages off) large blocks are mapped without the mark") {
  hsipipe::set_huge_pages(false);
  {
    hsipipe::BigFloats v(3'000'001);
    std::iota(v.begin(), v.end(), 0.0f);
    CHECK(v.back() == 3'000'000.0f);
    const std::string flags = vm_flags_of(v.data());
    INFO(flags);
    CHECK_FALSE(flags.empty());                       // its own mapping, given back whole
    CHECK(flags.find(" hg") == std::string::npos);    // not marked for huge pages
  }
  hsipipe::set_huge_pages(true);
  hsipipe::BigFloats w(3'000'001);
  CHECK(reinterpret_cast<std::uintptr_t>(w.data()) % (2u << 20) == 0);  // on again for later blocks
}

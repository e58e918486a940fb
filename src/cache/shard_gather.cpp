// cache/shard_gather: gather(), the loader's hot path: a shard's stored samples (held, or mapped when
// streamed) to float32 training inputs, band-first: [n, B] (p = 1) or [n, B, p, p], the models' input
// contract. Out-of-scene neighbours (cube) come from the manifest's `border`: "reflect" (numpy's mode
// 'reflect': -1 -> 1, H -> H-2) or "zero".
#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "cache/cache.hpp"
#include "cache/shard_impl.hpp"
#include "core/error.hpp"
#include "core/half.hpp"
#include "core/simd.hpp"

namespace hsipipe::cache {

namespace {

/// The calling thread's major page faults so far (pages it waited on the disk for).
long major_faults() noexcept {
  rusage u{};
  return ::getrusage(RUSAGE_THREAD, &u) == 0 ? u.ru_majflt : 0;
}

// ---- float16 -> float32: core's halves_to_floats (F16C where the CPU has it; exact either way) ----

/// Copies n values of the cache's element type at `src` to float32.
inline void to_float(const char* src, bool f16, float* out, std::size_t n) {
  if (f16) halves_to_floats(reinterpret_cast<const std::uint16_t*>(src), out, n);
  else std::memcpy(out, src, n * sizeof(float));
}

// ---- one patch row: p pixels x B values (pixel-major) -> out[b * pp + j], NaN -> 0 ----

void patch_row_scalar(const float* src, std::size_t p, std::size_t B, std::size_t pp, float* out) {
  for (std::size_t j = 0; j < p; ++j)
    for (std::size_t b = 0; b < B; ++b) {
      const float x = src[j * B + b];
      out[b * pp + j] = x == x ? x : 0.0f;
    }
}

#if HSIPIPE_X86
/// AVX2 (p >= 8, B >= 8): 8 pixels x 8 bands per step, NaN masked to 0 and transposed in registers. The
/// last block of each axis is shifted back to end at p (or B), overlapping the one before: the overlap
/// is written twice with the same values, and no scalar tail is left.
/// T: float (float32 cache) or std::uint16_t (float16 cache, widened by F16C in the same loads).
template <class T>
__attribute__((target("avx2,f16c"))) void patch_row_avx2(const T* src, std::size_t p, std::size_t B, std::size_t pp,
                                                         float* out) {
  for (std::size_t jb = 0; jb < p; jb += 8) {
    const std::size_t j0 = std::min(jb, p - 8);
    for (std::size_t bb = 0; bb < B; bb += 8) {
      const std::size_t b0 = std::min(bb, B - 8);
      __m256 r[8];
      for (std::size_t k = 0; k < 8; ++k) {
        const T* q = src + (j0 + k) * B + b0;
        __m256 x;
        if constexpr (std::is_same_v<T, float>) x = _mm256_loadu_ps(q);
        else x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
        r[k] = _mm256_and_ps(x, _mm256_cmp_ps(x, x, _CMP_ORD_Q));  // NaN -> +0
      }
      simd::transpose8(r);
      for (std::size_t k = 0; k < 8; ++k) _mm256_storeu_ps(out + (b0 + k) * pp + j0, r[k]);
    }
  }
}
#endif

void patch_row(const char* src, bool f16, std::size_t p, std::size_t B, std::size_t pp, float* out) {
#if HSIPIPE_X86
  if (p >= 8 && B >= 8 && simd::have_avx2()) {
    if (f16) return patch_row_avx2(reinterpret_cast<const std::uint16_t*>(src), p, B, pp, out);
    return patch_row_avx2(reinterpret_cast<const float*>(src), p, B, pp, out);
  }
#endif
  if (f16) {  // widen the whole run first (F16C where available): the transposes then move floats only
    thread_local std::vector<float> wide;
    wide.resize(p * B);
    halves_to_floats(reinterpret_cast<const std::uint16_t*>(src), wide.data(), p * B);
    src = reinterpret_cast<const char*>(wide.data());
  }
  patch_row_scalar(reinterpret_cast<const float*>(src), p, B, pp, out);
}

}  // namespace

Range Shard::range() const noexcept { return impl_->range; }
std::size_t Shard::sample_floats() const noexcept {
  return static_cast<std::size_t>(impl_->bands) * static_cast<std::size_t>(impl_->patch * impl_->patch);
}
int Shard::patch() const noexcept { return impl_->patch; }
int Shard::bands() const noexcept { return impl_->bands; }
std::uint64_t Shard::bytes_read() const noexcept { return impl_->bytes_read; }
bool Shard::streamed() const noexcept { return impl_->streamed; }
std::uint64_t Shard::shard_bytes() const noexcept {
  std::uint64_t b = impl_->samples.bytes();
  for (const auto& sr : impl_->scenes) b += sr.data.bytes();
  return b;
}
std::uint64_t Shard::streamed_bytes() const noexcept { return impl_->streamed_bytes.load(std::memory_order_relaxed); }
const std::vector<std::uint64_t>& Shard::item_hashes() const noexcept { return impl_->item_hashes; }
double Shard::hash_seconds() const noexcept { return impl_->hash_seconds; }

Shard::Raw Shard::raw() const {
  const Impl& s = *impl_;
  Raw r;
  r.layout = s.layout;
  r.f16 = s.f16;
  r.bands = s.bands;
  r.stored_patch = s.layout == Layout::patch ? s.stored_patch : 1;
  r.patch = s.patch;
  r.zero_border = s.zero_border;
  const auto run = [&](const StoredItems& it) {
    const char* p = it.run();
    if (!p && it.streamed()) throw ConfigError("a streamed shard of " + it.mapped.file->path() + ", whose chunks are not one run in the file, cannot be copied whole: use --loader ring");
    return p;
  };
  r.samples = s.layout == Layout::cube ? nullptr : run(s.samples);
  for (const auto& sr : s.scenes) r.scenes.push_back({sr.rows, sr.cols, sr.row0, sr.nrows, sr.nrows ? run(sr.data) : nullptr});
  r.scene = s.s_scene.data();
  r.row = s.s_row.data();
  r.col = s.s_col.data();
  return r;
}

void Shard::gather(const std::uint64_t* ids, std::size_t n, float* out) const {
  const Impl& s = *impl_;
  for (std::size_t k = 0; k < n; ++k) {
    if (!s.range.contains(ids[k])) {
      throw std::out_of_range("Shard::gather: sample " + std::to_string(ids[k]) + " outside this shard [" +
                              std::to_string(s.range.begin) + ", " + std::to_string(s.range.end) + ")");
    }
  }
  // Streamed: MADV_WILLNEED on the batch's pages lets the kernel read them from disk in parallel, but it is one
  // system call per sample, which from the page cache costs more than the copies (the loader ran at 0.27x
  // of a held shard). Each producer thread asks for it only while its gathers take major page faults (pages
  // read from disk), and drops it after 16 batches in a row without one.
  thread_local struct { bool advise = true; int quiet = 0; } gate;
  const long faults = s.streamed ? major_faults() : 0;
  if (s.streamed) s.prefetch(ids, n, gate.advise);
  if (s.layout == Layout::cube) s.gather_cube(ids, n, out);
  else s.gather_stored(ids, n, out);
  if (!s.streamed) return;
  if (major_faults() > faults) gate = {true, 0};
  else if (++gate.quiet >= 16) gate.advise = false;
}

void Shard::Impl::gather_stored(const std::uint64_t* ids, std::size_t n, float* out) const {
  const std::size_t B = static_cast<std::size_t>(bands), sp = static_cast<std::size_t>(stored_patch);
  const std::size_t p = static_cast<std::size_t>(patch);
  const std::size_t in_vals = B * sp * sp, out_vals = B * p * p;
  const std::size_t off = (sp - p) / 2;
  for (std::size_t k = 0; k < n; ++k) {
    const char* src = samples.item(ids[k]);
    float* dst = out + k * out_vals;
    if (p == sp) {
      to_float(src, f16, dst, in_vals);
      continue;
    }
    // centre crop: [B, sp, sp] -> [B, p, p]
    for (std::size_t b = 0; b < B; ++b) {
      for (std::size_t i = 0; i < p; ++i) {
        to_float(src + ((b * sp + off + i) * sp + off) * elem, f16, dst + (b * p + i) * p, p);
      }
    }
  }
}

void Shard::Impl::gather_cube(const std::uint64_t* ids, std::size_t n, float* out) const {
  const std::size_t B = static_cast<std::size_t>(bands), p = static_cast<std::size_t>(patch), pp = p * p;
  const long h = static_cast<long>(p / 2);
  // One patch row at a time: its p pixels are p * B contiguous values in the cube (pixel-major) unless a
  // column falls outside the scene (then they are gathered into `run` first, reflected or zero); patch_row
  // widens them, sets nodata (NaN) to 0 (the band mean after z-score) and transposes them into the
  // band-first output [B, p, p].
  thread_local std::vector<char> run;
  run.resize(p * B * elem);
  for (std::size_t k = 0; k < n; ++k) {
    const std::uint64_t li = ids[k] - range.begin;
    const SceneRows& sr = scenes[static_cast<std::size_t>(s_scene[li])];
    const long r = s_row[li], c = s_col[li];
    float* dst = out + k * B * pp;
    if (p == 1) {
      to_float(sr.data.item(static_cast<std::uint64_t>(r)) + static_cast<std::size_t>(c) * B * elem, f16, dst, B);
      continue;
    }
    const bool cols_inside = c - h >= 0 && c + h < static_cast<long>(sr.cols);
    for (std::size_t i = 0; i < p; ++i) {
      long rr = r + static_cast<long>(i) - h;
      const bool row_out = rr < 0 || rr >= static_cast<long>(sr.rows);
      if (row_out && zero_border) {
        for (std::size_t b = 0; b < B; ++b) std::fill_n(dst + b * pp + i * p, p, 0.0f);
        continue;
      }
      if (row_out) rr = reflect_index(rr, sr.rows);
      const char* row = sr.data.item(static_cast<std::uint64_t>(rr));
      const char* src = row + static_cast<std::size_t>(c - h) * B * elem;
      if (!cols_inside) {
        for (std::size_t j = 0; j < p; ++j) {
          long cc = c + static_cast<long>(j) - h;
          char* q = run.data() + j * B * elem;
          if (cc < 0 || cc >= static_cast<long>(sr.cols)) {
            if (zero_border) {
              std::memset(q, 0, B * elem);  // +0 in float16 and float32
              continue;
            }
            cc = reflect_index(cc, sr.cols);
          }
          std::memcpy(q, row + static_cast<std::size_t>(cc) * B * elem, B * elem);
        }
        src = run.data();
      }
      patch_row(src, f16, p, B, pp, dst + i * p);
    }
  }
}


void Shard::Impl::prefetch(const std::uint64_t* ids, std::size_t n, bool advise) const {
  const std::size_t B = static_cast<std::size_t>(bands);
  std::uint64_t bytes = 0;
  if (layout != Layout::cube) {
    const std::size_t sp = static_cast<std::size_t>(stored_patch), item = B * sp * sp * elem;
    if (advise)
      for (std::size_t k = 0; k < n; ++k) advise_pages(samples.item(ids[k]), item, MADV_WILLNEED);
    bytes = n * item;
  } else {
    const long h = patch / 2;
    for (std::size_t k = 0; k < n; ++k) {
      const std::uint64_t li = ids[k] - range.begin;
      const SceneRows& sr = scenes[static_cast<std::size_t>(s_scene[li])];
      const long r = s_row[li], c = s_col[li];
      const long c0 = std::max<long>(0, c - h), c1 = std::min<long>(static_cast<long>(sr.cols) - 1, c + h);
      const long r0 = std::max<long>(sr.row0, r - h), r1 = std::min<long>(static_cast<long>(sr.row0 + sr.nrows) - 1, r + h);
      for (long rr = r0; advise && rr <= r1; ++rr)
        advise_pages(sr.data.item(static_cast<std::uint64_t>(rr)) + static_cast<std::size_t>(c0) * B * elem,
                     static_cast<std::size_t>(c1 - c0 + 1) * B * elem, MADV_WILLNEED);
      bytes += static_cast<std::uint64_t>(r1 - r0 + 1) * static_cast<std::uint64_t>(c1 - c0 + 1) * B * elem;
    }
  }
  streamed_bytes.fetch_add(bytes, std::memory_order_relaxed);
}

}  // namespace hsipipe::cache

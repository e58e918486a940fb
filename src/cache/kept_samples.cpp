// cache/kept_samples: the samples the statistics pass keeps for the write pass (see kept_samples.hpp).
#include "cache/kept_samples.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#include "cache/row_windows.hpp"
#include "core/simd.hpp"
#include "core/test_hook.hpp"

namespace hsipipe::cache {

void KeptSamples::choose(const DecodePlan& plan, const Sink& sink) {
  const auto& opts = plan.opts;
  bands_ = plan.kept.size();
  first_ = plan.my.begin;
  count_ = plan.my.size();
  const auto every_scene = [&](std::initializer_list<DType> types) {
    return std::all_of(plan.scenes.begin(), plan.scenes.end(), [&](const SceneState& st) {
      return std::find(types.begin(), types.end(), st.scene->source_type()) != types.end();
    });
  };
  type_ = every_scene({DType::u8, DType::i16})   ? Type::i16
          : every_scene({DType::u8, DType::u16}) ? Type::u16
                                                 : Type::f32;
  // tests: the float32 path for integer scenes, and the int16 path (and its fallback) for any scene; the
  // second wins when both are set
  if (test_value("HSIPIPE_TEST_KEEP_F32", 0) != 0) type_ = Type::f32;
  if (test_value("HSIPIPE_TEST_KEEP_I16", 0) != 0) type_ = Type::i16;
  const std::size_t kept_elem = type_ == Type::f32 ? sizeof(float) : sizeof(std::uint16_t);
  // Scenes that all decode again at memory speed keep no samples (decode_passes.hpp: decodes_again). The
  // benchmark's decode (rotated rounds of 8, min / median wall, 2 Dec 2026), kept -> decoded again: npy, 1
  // rank 0.651 / 0.673 -> 0.700 / 0.726 s (there the write pass outlasts the disk's writeback anyway, and
  // decoding again is the one cost left), 2 ranks 0.450 / 0.459 -> 0.410 / 0.434 s; h5 (a buffer, not the
  // file's pages), 1 rank 0.744 / 1.134 -> 0.720 / 0.748 s, 2 ranks 0.502 / 0.839 -> 0.505 / 0.536 s.
  // Decoding again everywhere keeps source_bytes_read the same for any rank count, and --memory-mb free.
  // Tests keep samples from ENVI scenes with HSIPIPE_TEST_KEEP_SAMPLES=1.
  bool cheap = test_value("HSIPIPE_TEST_KEEP_SAMPLES", 0) == 0;
  for (const auto& st : plan.scenes) cheap = cheap && RowWindows::reads_slices_cheaply(*st.scene);
  active_ = opts.layout == Layout::pixel && plan.stats_is_write && opts.pca == 0 && !cheap &&
            count_ * bands_ * kept_elem <= opts.memory_bytes;
  // Staged in the output slots (see staged_): the 1-rank npy decode of scripts/bench_decode.sh, when it
  // kept its samples, touched 318 MiB less fresh memory (bench_decode_ab.sh "HSIPIPE_TEST_NO_STAGE=1" ""
  // 1 8, npy, 2 Dec 2026: min 0.789 -> 0.662 s, median 1.692 -> 0.709 s; 2 ranks min 0.554 -> 0.552 s,
  // median 0.868 -> 0.570 s)
  stride_ = bands_ * dtype_size(opts.dtype);  // the output item: kept samples mean no PCA
  // (the output pages it holds dirty between the passes count against --memory-mb, as the buffer would)
  staged_ = active_ && sink.places(0) && bands_ * kept_elem <= stride_ && count_ * stride_ <= opts.memory_bytes &&
            test_value("HSIPIPE_TEST_NO_STAGE", 0) == 0;
}

void KeptSamples::allocate() {
  if (active_) state_ = type_ == Type::f32 ? State::f32 : type_ == Type::i16 ? State::i16 : State::u16;
  if (active_ && !staged_ && type_ == Type::f32) raw_.resize(count_ * bands_);
  if (active_ && !staged_ && type_ != Type::f32) s16_.resize(count_ * bands_);
}

void* KeptSamples::slot(std::uint64_t id, char* stage, std::uint64_t stage_first) {
  if (staged_) return stage + (id - stage_first) * stride_;
  if (type_ == Type::f32) return raw_.data() + (id - first_) * bands_;
  return s16_.data() + (id - first_) * bands_;
}

bool KeptSamples::keep(void* slot, const float* px) const {
  const std::size_t B = bands_;
  if (type_ == Type::f32) {
    std::memcpy(slot, px, B * sizeof(float));
    return true;
  }
  auto* out = static_cast<std::uint16_t*>(slot);
  const bool u16 = type_ == Type::u16;
  const float lo = u16 ? 0.0f : -32768.0f, hi = u16 ? 65535.0f : 32767.0f;
  const std::int32_t bias = u16 ? 32768 : 0;  // u16: stored as (v - 32768) ^ 0x8000, int16 as itself
  int inexact = 0;
  std::size_t b = 0;
#if HSIPIPE_X86
  // SSE2 (every x86-64): clamp (MAXPS gives lo for a NaN), convert, and compare the round trip's bits with
  // the original's, which a NaN, an out-of-range or a fractional value and -0.0 fail; 8 values at a time
  // (GCC does not vectorise the scalar loop below: 1 rank's statistics pass took 0.06 s longer with it)
  const __m128 vlo = _mm_set1_ps(lo), vhi = _mm_set1_ps(hi);
  const __m128i vbias = _mm_set1_epi32(bias), vflip = _mm_set1_epi16(static_cast<short>(u16 ? 0x8000 : 0));
  for (; b + 8 <= B; b += 8) {
    const __m128 v0 = _mm_loadu_ps(px + b), v1 = _mm_loadu_ps(px + b + 4);
    const __m128i t0 = _mm_cvttps_epi32(_mm_min_ps(_mm_max_ps(v0, vlo), vhi));
    const __m128i t1 = _mm_cvttps_epi32(_mm_min_ps(_mm_max_ps(v1, vlo), vhi));
    const __m128i same = _mm_and_si128(_mm_cmpeq_epi32(_mm_castps_si128(_mm_cvtepi32_ps(t0)), _mm_castps_si128(v0)),
                                       _mm_cmpeq_epi32(_mm_castps_si128(_mm_cvtepi32_ps(t1)), _mm_castps_si128(v1)));
    inexact |= _mm_movemask_epi8(same) != 0xffff;
    const __m128i packed = _mm_packs_epi32(_mm_sub_epi32(t0, vbias), _mm_sub_epi32(t1, vbias));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + b), _mm_xor_si128(packed, vflip));
  }
#endif
  for (; b < B; ++b) {
    const float v = px[b];
    const float c = std::min(hi, std::max(lo, v));  // std::max(lo, NaN) is lo
    const auto t = static_cast<std::int32_t>(c);
    inexact |= std::bit_cast<std::uint32_t>(static_cast<float>(t)) != std::bit_cast<std::uint32_t>(v);
    out[b] = static_cast<std::uint16_t>(static_cast<std::uint16_t>(t - bias) ^ (u16 ? 0x8000u : 0u));
  }
  return inexact == 0;
}

const float* KeptSamples::get(const void* slot, std::vector<float>& buf) const {
  const std::size_t B = bands_;
  if (type_ == Type::f32) return static_cast<const float*>(slot);
  buf.resize(B);
  if (type_ == Type::u16) {
    const auto* in = static_cast<const std::uint16_t*>(slot);
    for (std::size_t b = 0; b < B; ++b) buf[b] = static_cast<float>(in[b]);
  } else {
    const auto* in = static_cast<const std::int16_t*>(slot);
    for (std::size_t b = 0; b < B; ++b) buf[b] = static_cast<float>(in[b]);
  }
  return buf.data();
}

void KeptSamples::drop() {
  active_ = staged_ = false;
  state_ = State::dropped;
  decltype(s16_)().swap(s16_);  // give the memory back (= {} would keep it)
}

}  // namespace hsipipe::cache

#pragma once
// io/synth: a synthetic hyperspectral field scene, the embedded default for the demo and the tests.
//
// What it models (so that classifiers face a field-like problem, not noise):
//  - wavelengths 400-2500 nm with fwhm; an atmospheric transmittance with water-vapour dips at 940, 1140,
//    1400 and 1900 nm; bands where it falls below 0.25 (and the first/last detector band) are marked 0
//    in `bbl` and are noisy;
//  - per class two endmembers (smooth continua: vegetation red edge, soil rise, broad bumps, times
//    Gaussian absorption dips: chlorophyll, leaf water, cellulose, clay, iron); classes come in pairs
//    of similar materials (same crop, different stage), so a pixel classifier does not reach 100%;
//  - parcels: a jittered-grid Voronoi tiling in coordinates warped by smooth noise (irregular borders);
//    each parcel is a class or unlabeled background (bare soil, grass); a few straight asphalt roads;
//  - linear mixing across parcel and road borders (1.5 px on each side); pixels whose own fraction
//    is below 0.8 are left unlabeled; within-parcel variation (endmember blend, brightness and 0-15 % soil exposure vary
//    smoothly in space), and sensor noise;
//  - optionally sparse ground truth (`labeled_fraction` < 1): only survey plots keep their labels, one disc
//    around the centre of every labeled parcel, with one radius for the scene chosen so that the plots
//    cover `labeled_fraction` of the pixels (or everything that is labeled, if that is less). Field
//    campaigns label a few % of a scene; the spectra do not change, only the label raster.
// Deterministic from the seed: a counter-based SplitMix64 hash, independent of block order and platform.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "io/envi.hpp"

namespace hsipipe::io {

struct SynthOptions {
  std::size_t rows = 145, cols = 145, bands = 200;
  int classes = 8;  ///< labeled classes 1..classes; 0 is unlabeled
  Interleave interleave = Interleave::bil;
  DType dtype = DType::i16;  ///< i16 / u16: reflectance x 10000 (scale factor in the header); f32: reflectance
  int byte_order = 0;
  std::uint64_t seed = 1;
  /// Fraction of the scene's pixels that keep a label, in (0, 1]; 1 = every labeled pixel (the default).
  double labeled_fraction = 1.0;
};

/// The scene in memory: spectra are generated on demand, a block of rows at a time.
class SynthScene {
 public:
  explicit SynthScene(const SynthOptions& opt);  ///< throws ConfigError on bad sizes
  ~SynthScene();
  SynthScene(const SynthScene&) = delete;
  SynthScene& operator=(const SynthScene&) = delete;

  const SynthOptions& options() const;
  const BandInfo& band_info() const;           ///< wavelengths, fwhm, units, bbl (scale factor as written)
  const std::vector<std::int32_t>& labels() const;  ///< rows * cols, 0 = unlabeled
  const std::vector<std::string>& class_names() const;  ///< classes 1..K
  /// Reflectance (not scaled) of rows [r0, r1) into BIP floats.
  void reflectance(std::size_t r0, std::size_t r1, float* out) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct SynthFiles {
  std::string scene_header, scene_data, labels_header, labels_data;
  std::vector<std::uint64_t> class_counts;  ///< index = class id (0 = unlabeled)
};

/// Writes DIR/scene.hdr + DIR/scene.img and DIR/labels.hdr + DIR/labels.img (uint8 labels, int16
/// when classes > 254), creating DIR. Each file appears whole or not at all.
SynthFiles write_synthetic_scene(const std::string& dir, const SynthOptions& opt);

}  // namespace hsipipe::io

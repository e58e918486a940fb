#pragma once
// train/models/builtin: factories of the built-in networks that live in their own files under
// src/train/models/ (models.cpp's registry and make_model call them). Contracts as make_model's: the
// caller has run check_model_fits and seeded the generator; the model is on the CPU in training mode.
#include <memory>

#include "train/models.hpp"

namespace hsipipe::train {

/// SSFTT (Sun et al. 2022), models/ssftt.cpp. Input [N, bands, patch, patch].
std::shared_ptr<Model> make_ssftt(int bands, int patch, int n_classes);

/// SpectralFormer (Hong et al. 2021), models/spectralformer.cpp. Input [N, bands, patch, patch].
std::shared_ptr<Model> make_spectralformer(int bands, int patch, int n_classes);

}  // namespace hsipipe::train

#pragma once
// train/models/torchscript: a user's own network, saved from PyTorch with torch.jit.script(net).save(PATH),
// behind the same Model interface as the built-ins (train/models.hpp), so that the trainer, the data-parallel
// step, checkpoints, --resume, predict and export take it through their one code path.
//
// Contract of the file (docs/BYO_NETWORK.md): forward(x) takes float32 [N, B] (cache layout pixel) or
// [N, B, p, p] (patch, cube) and returns logits [N, C]. Its parameters and buffers are registered on the
// Model under their TorchScript names with '.' written as "__" ("block1.bn.weight" -> "block1__bn__weight"):
// they are the very tensors the TorchScript module computes with, so the optimiser's in-place updates, the
// gradient all-reduce, BatchNorm's running statistics, Module::to and checkpoints act on the module itself.
// train()/eval() switch the module's mode too (dropout, BatchNorm). Initial weights are the file's: every rank
// and every fold loads the same file and starts from the same weights (no seed is applied).
//
// Files load when libtorch 1.13 (Debian's libtorch-dev) reads them: Debian's python3-torch 1.13 writes such
// files; a file from a newer PyTorch may use a format or operators 1.13 lacks, and is refused with libtorch's
// reason. A module made by torch.jit.trace records one pass with fixed control flow: dropout and BatchNorm then
// keep the mode they were traced in; script the network (torch.jit.script) instead. Rank-local; no MPI.
#include <memory>
#include <string>

#include "train/models.hpp"

namespace hsipipe::train {

/// The name a TorchScript network has in run identities, checkpoints and model_info().
inline constexpr const char* kTorchScriptModel = "torchscript";

/// Whether a --model value names a file (it is no registry name and a regular file of that path exists):
/// then it is a TorchScript network.
bool names_model_file(const std::string& value);

/// SHA-256 of the file's bytes (64 hex digits); IoError naming the path.
std::string model_file_sha256(const std::string& path);

/// Loads PATH as a Model (training mode, CPU). ConfigError naming PATH when it is not a TorchScript file
/// libtorch can read (with libtorch's reason and the versions that load), or has no forward method.
std::shared_ptr<Model> load_torchscript(const std::string& path);

/// Loads PATH and runs one forward pass (eval mode, no gradient) on a batch of two inputs of the cache's
/// shape: [2, bands] (patch 1) or [2, bands, patch, patch]. ConfigError naming PATH, what the network gave
/// and what the cache needs (bands, patch, classes) when the forward throws or does not return a float
/// tensor [2, n_classes]. Call before any collective work.
void check_torchscript(const std::string& path, int bands, int patch, int n_classes);

/// Writes the network `m` (a load_torchscript() Model, with whatever weights it holds now) as a TorchScript
/// file that torch.jit.load reads, atomically (PATH.tmp-PID then rename), with `extra` as the file's
/// "hsipipe.json" extra file. ConfigError when m is not a TorchScript network.
void save_torchscript(Model& m, const std::string& path, const std::string& extra);

}  // namespace hsipipe::train

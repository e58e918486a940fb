#pragma once
// io/readers: the per-format factories behind open_scene(). Each throws FormatError/IoError naming the
// file and field. Internal to io: callers use open_scene().
#include <memory>

#include "io/scene.hpp"

namespace hsipipe::io {

/// ENVI: spec.path names the header (X.hdr, X.img.hdr) or the data file (X, X.img, X.dat, X.bsq...).
std::unique_ptr<Scene> open_envi(const SceneSpec& spec);
/// MATLAB v4/v5/v7.3 through libmatio; spec.variable or the default (io/array_choice.hpp). A 2-D variable is a
/// [bands x pixels] matrix with an image size (spec.image_rows/cols or the file's nRow/nCol...), else a label
/// raster (refused for SceneSpec::Role::scene).
std::unique_ptr<Scene> open_matlab(const SceneSpec& spec);
/// HDF5 input: spec.variable is the dataset path, spec.axes its axis order (hwb | bhw | whb).
std::unique_ptr<Scene> open_hdf5(const SceneSpec& spec);
/// Any GDAL raster (GeoTIFF striped/tiled, compressed, COG, /vsicurl/, /vsis3/ ...). Only when built
/// with HSIPIPE_WITH_GDAL; otherwise open_scene() reports that GDAL support is not built.
std::unique_ptr<Scene> open_gdal(const SceneSpec& spec);

/// True when `path` looks like an ENVI header or an ENVI data file with a header next to it.
bool looks_like_envi(const std::string& path);

}  // namespace hsipipe::io

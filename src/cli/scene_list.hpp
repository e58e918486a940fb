#pragma once
// cli/scene_list: `--scene-list FILE` (INI `scene_list =`), the scenes of a campaign in one file, for decode and
// predict. One scene a line, whitespace-separated:
//   SCENE[:VAR] [LABELS[:VAR] | -] [NAME]
// `#` starts a comment; blank lines are skipped; relative local paths are relative to the list file (URLs and
// absolute paths are taken as they are); NAME defaults to the scene file's stem and must be unique; labels
// are given for every scene or for none. Each entry keeps "scene list FILE line N" (`origin`), which errors
// about that scene append.
#include <optional>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "io/scene.hpp"

namespace hsipipe::cli {

struct ListedScene {
  io::SceneSpec scene;
  std::optional<io::SceneSpec> labels;
  std::string name;
  std::string origin;  ///< " (scene list FILE line N)"
};

/// A relative local path of a list or config file, resolved against that file's folder `base`.
std::string relative_to(const std::string& value, const std::string& base);

/// The scenes of list file `path`, each with `axes` and (when not empty) `image_size` (--axes, --image-size).
/// ConfigError naming the file and line for a malformed line, a repeated name or labels on some lines only.
std::vector<ListedScene> read_scene_list(const std::string& path, const std::string& axes = "", const std::string& image_size = "");

/// The scenes of `command`'s --scene-list (or INI `scene_list =`, relative to the INI file when not found
/// relative to the working directory). ConfigError when --scene or [scene.NAME] sections give scenes too, or
/// when an option of `not_with` (those that select or qualify other scenes: --labels, --name, ...) is given.
std::vector<ListedScene> listed_scenes(const Parsed& p, const std::string& command, const std::vector<std::string>& not_with,
                                       const std::string& axes = "", const std::string& image_size = "");

}  // namespace hsipipe::cli

// cli/scene_list: the scene-list file of decode and predict (scene_list.hpp).
#include "cli/scene_list.hpp"

#include <filesystem>
#include <map>
#include <sstream>

#include "core/error.hpp"
#include "core/fs.hpp"

namespace hsipipe::cli {

std::string relative_to(const std::string& value, const std::string& base) {
  io::SceneSpec s = io::SceneSpec::parse(value);
  if (s.path.empty() || s.path.find("://") != std::string::npos || std::filesystem::path(s.path).is_absolute()) return value;
  return (std::filesystem::path(base) / value).string();
}

namespace {

/// One line of a scene list: SCENE[:VAR] [LABELS[:VAR]|-] [NAME]; `where` names the line.
ListedScene scene_list_line(const std::vector<std::string>& t, const std::string& base, const std::string& where,
                            const std::string& axes, const std::string& image_size) {
  if (t.size() > 3) throw ConfigError(where + ": expected SCENE[:VAR] [LABELS[:VAR]|-] [NAME], found " + std::to_string(t.size()) + " fields");
  ListedScene in;
  in.scene = io::SceneSpec::parse(relative_to(t[0], base));
  in.scene.axes = axes;
  if (!image_size.empty()) in.scene.set_image_size(image_size, "--image-size");
  if (t.size() >= 2 && t[1] != "-") {
    in.labels = io::SceneSpec::parse(relative_to(t[1], base));
    in.labels->axes = axes;
  }
  in.name = t.size() == 3 ? t[2] : std::filesystem::path(in.scene.path).stem().string();
  in.origin = " (" + where + ")";
  return in;
}

}  // namespace

std::vector<ListedScene> read_scene_list(const std::string& path, const std::string& axes, const std::string& image_size) {
  const std::string text = fs::read_text(path);
  const std::string base = std::filesystem::path(path).parent_path().string();
  std::vector<ListedScene> out;
  std::map<std::string, std::size_t> names;
  std::istringstream lines(text);
  std::string line;
  for (std::size_t n = 1; std::getline(lines, line); ++n) {
    if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream fields(line);
    std::vector<std::string> t;
    for (std::string f; fields >> f;) t.push_back(f);
    if (t.empty()) continue;
    const std::string where = "scene list " + path + " line " + std::to_string(n);
    out.push_back(scene_list_line(t, base.empty() ? "." : base, where, axes, image_size));
    if (!names.emplace(out.back().name, n).second)
      throw ConfigError(where + ": scene name '" + out.back().name + "' is already line " + std::to_string(names[out.back().name]) +
                        "'s (give a NAME as the third field)");
    if (out.back().labels.has_value() != out.front().labels.has_value())
      throw ConfigError(where + ": " + (out.back().labels ? "gives labels, but the first scene has none" : "gives no labels, but the first scene has them") +
                        " (labels for every scene, or for none)");
  }
  if (out.empty()) throw ConfigError("scene list " + path + ": no scene in it (only comments or blank lines)");
  return out;
}

std::vector<ListedScene> listed_scenes(const Parsed& p, const std::string& command, const std::vector<std::string>& not_with,
                                       const std::string& axes, const std::string& image_size) {
  std::string list = p.vm["scene-list"].as<std::string>();
  if (p.vm.count("scene") || !p.sections.empty())
    throw ConfigError(command + ": --scene-list " + list + " and " +
                      (p.vm.count("scene") ? std::string("--scene") : "[scene.NAME] sections of " + p.config_path) +
                      " both give scenes: give them one way");
  for (const auto& opt : not_with)
    if (p.vm.count(opt)) throw ConfigError(command + ": --" + opt + " does not go with --scene-list: the list's lines give the scenes, their labels and names");
  if (!p.config_path.empty() && std::filesystem::path(list).is_relative() && !std::filesystem::exists(list))
    list = (std::filesystem::path(p.config_path).parent_path() / list).string();
  return read_scene_list(list, axes, image_size);
}

}  // namespace hsipipe::cli

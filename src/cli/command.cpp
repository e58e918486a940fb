#include "cli/command.hpp"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <set>
#include <sstream>

#include "cli/plugin.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"

namespace hsipipe::cli {

std::vector<Command>& registry() {
  static std::vector<Command> commands;
  return commands;
}

std::vector<std::string> split_list(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    const auto b = cur.find_first_not_of(" \t"), e = cur.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(cur.substr(b, e - b + 1));
    cur.clear();
  };
  for (char ch : s) {
    if (ch == sep) flush();
    else cur.push_back(ch);
  }
  flush();
  return out;
}

namespace {

/// Boost reads "-1" into an unsigned option as its largest value (lexical_cast wraps around): refused
/// here for every unsigned option, from the command line or a config file, naming it.
void refuse_negative_unsigned(const po::parsed_options& parsed, const po::options_description& desc,
                              const std::string& where) {
  for (const auto& o : parsed.options) {
    const auto* d = desc.find_nothrow(o.string_key, false);
    if (!d) continue;
    const auto* sem = d->semantic().get();
    const bool is_unsigned = dynamic_cast<const po::typed_value<std::uint64_t>*>(sem) ||
                             dynamic_cast<const po::typed_value<std::uint32_t>*>(sem);
    for (const auto& v : o.value)
      if (is_unsigned && v.find('-') != std::string::npos)
        throw ConfigError(where + "--" + o.string_key + ": expected a number >= 0, got '" + v + "'");
  }
}

void apply_config(const std::string& path, const std::string& command, const po::options_description& desc,
                  Parsed& out) {
  std::string text;
  try {
    text = fs::read_text(path, fs::kMaxHeaderBytes);
  } catch (const IoError& e) {
    throw ConfigError(std::string(e.what()) + " (--config)");
  }
  std::istringstream in(text);
  po::options_description none;
  po::parsed_options raw(&none);
  try {
    raw = po::parse_config_file(in, none, /*allow_unregistered=*/true);
  } catch (const po::error& e) {  // e.g. "[decode" without its bracket: the message names no file
    throw ConfigError(path + ": " + e.what() + " (--config)");
  }
  po::parsed_options mine(&desc);
  const std::string own = command + ".";
  // Command-line values win, for every option: a repeatable (composing) one given on the command line
  // takes none of the file's values, which po::store would otherwise append to it.
  const auto on_command_line = [&](const std::string& name) { return out.vm.count(name) && !out.vm[name].defaulted(); };
  for (const auto& opt : raw.options) {
    const std::string& key = opt.string_key;
    const auto dot = key.find('.');
    std::string value = opt.value.empty() ? std::string() : opt.value.front();
    if (dot == std::string::npos) {  // top level: applies where known
      if (desc.find_nothrow(key, false) && !on_command_line(key)) {
        po::option o(key, {value});
        mine.options.push_back(o);
      }
      continue;
    }
    const std::string section = key.substr(0, dot);
    const auto last_dot = key.rfind('.');
    if (key.rfind(own, 0) == 0 && last_dot == own.size() - 1) {
      std::string name = key.substr(own.size());
      // an INI key may spell the option's '-' as '_' (scene_list = for --scene-list)
      if (!desc.find_nothrow(name, false) && name.find('_') != std::string::npos) {
        std::string dashed = name;
        std::replace(dashed.begin(), dashed.end(), '_', '-');
        if (desc.find_nothrow(dashed, false)) name = dashed;
      }
      if (!desc.find_nothrow(name, false)) {
        throw ConfigError(path + ": section [" + command + "]: unknown option '" + name + "'");
      }
      if (!on_command_line(name)) mine.options.push_back(po::option(name, {value}));
      continue;
    }
    if (last_dot != dot) {  // [scene.NAME] key -> "scene.NAME.key"
      const std::string sec = key.substr(0, last_dot), field = key.substr(last_dot + 1);
      auto it = std::find_if(out.sections.begin(), out.sections.end(), [&](auto& p) { return p.first == sec; });
      if (it == out.sections.end()) {
        out.sections.emplace_back(sec, std::map<std::string, std::string>{});
        it = std::prev(out.sections.end());
      }
      if (!it->second.emplace(field, value).second)  // a section given twice, or a key twice in one
        throw ConfigError(path + ": section [" + sec + "] gives '" + field + "' more than once");
    }
    // sections of other commands are ignored by design (one file configures a whole chain), but a name that
    // is no command would lose its options without a word ([decod], [fold])
    if (last_dot == dot) {
      std::set<std::string> known_names(std::begin(kPluginCommands), std::end(kPluginCommands));
      for (const auto& c : registry()) known_names.insert(c.name);
      if (!known_names.count(section)) {
        std::string known;
        for (const auto& c : known_names) known += (known.empty() ? "" : ", ") + c;
        throw ConfigError(path + ": unknown section [" + section + "] (sections are named after a command: " + known +
                          "; scenes are [scene.NAME])");
      }
    }
  }
  refuse_negative_unsigned(mine, desc, path + ": ");
  try {
    po::store(mine, out.vm);
  } catch (const po::error& e) {
    throw ConfigError(path + ": " + e.what());
  }
}

}  // namespace

Parsed parse(int argc, char** argv, const std::string& command, const std::string& usage,
             const po::options_description& desc, const po::positional_options_description* positional) {
  po::options_description common("Common options");
  common.add_options()("help,h", "show this help and exit")(
      "config", po::value<std::string>(), std::string("INI file with options (sections [" + command +
                                                          "], [scene.NAME]); command-line values win").c_str());
  po::options_description all;
  all.add(desc).add(common);
  Parsed out;
  try {
    // argv[0] is the command name; Boost skips argv[0] itself, like main()'s program name.
    auto parser = po::command_line_parser(argc, argv).options(all);
    if (positional) parser.positional(*positional);
    const po::parsed_options parsed = parser.run();
    refuse_negative_unsigned(parsed, all, "");
    po::store(parsed, out.vm);
  } catch (const po::error& e) {
    throw ConfigError("hsipipe " + command + ": " + e.what() + " (see hsipipe " + command + " --help)");
  }
  if (out.vm.count("help")) {
    std::cout << "Usage: hsipipe " << command << " " << usage << "\n\n" << desc << "\n" << common << "\n";
    out.help = true;
    return out;
  }
  if (out.vm.count("config")) {
    out.config_path = out.vm["config"].as<std::string>();
    apply_config(out.config_path, command, desc, out);
  }
  try {
    po::notify(out.vm);
  } catch (const po::error& e) {
    throw ConfigError("hsipipe " + command + ": " + e.what() + (out.config_path.empty() ? "" : " (config " + out.config_path + ")"));
  }
  return out;
}

}  // namespace hsipipe::cli

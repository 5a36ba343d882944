#include "cli/config_file.hpp"

#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <toml++/toml.h>

namespace hp::cli {
namespace {

std::string scalar(const toml::node& v, const std::string& where) {
  if (auto s = v.value<std::string>()) return *s;
  if (v.is_integer()) return std::to_string(*v.value<int64_t>());
  if (v.is_floating_point()) {
    std::ostringstream out;
    out.precision(17);
    out << *v.value<double>();
    return out.str();
  }
  throw std::invalid_argument(where + ": expected a string, number or boolean");
}

void append_file(const std::string& path, std::vector<std::string>& out, const ConfigFlags& flags) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw std::invalid_argument("--config " + path + ": not a readable file (give a TOML file whose keys are flag names)");
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << "--config " << path << ": " << e.description() << " at line " << e.source().begin.line;
    throw std::invalid_argument(msg.str());
  }
  for (auto&& [key, value] : table) {
    const std::string flag = "--" + std::string(key.str());
    const std::string where = "--config " + path + ": key '" + std::string(key.str()) + "'";
    if (value.is_table()) throw std::invalid_argument(where + " is a table; every key must be a flag name");
    if (key.str() == "config")
      throw std::invalid_argument(where + ": a config file cannot name another; give several --config flags");
    if (!flags.accepts(flag))
      throw std::invalid_argument(where + " is not a flag of hyperpipe " + flags.command + " (its keys are the flags " +
                                  "of `hyperpipe " + flags.command + " --help`, without the dashes)");
    if (auto b = value.value<bool>(); b && value.is_boolean()) {
      if (*b) out.push_back(flag);
    } else if (auto* arr = value.as_array()) {
      if (arr->size() != 1 && !flags.takes_many(flag))
        throw std::invalid_argument(where + " is an array of " + std::to_string(arr->size()) + " values, but " + flag +
                                    " takes one value");
      for (auto&& item : *arr) {
        out.push_back(flag);
        out.push_back(scalar(item, where));
      }
    } else {
      out.push_back(flag);
      out.push_back(scalar(value, where));
    }
  }
}

}  // namespace

std::vector<std::string> expand_config_files(const std::vector<std::string>& args, const ConfigFlags& flags) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      out.insert(out.end(), args.begin() + i, args.end());
      break;
    }
    if (a == "--config" || a.rfind("--config=", 0) == 0) {
      std::string path;
      if (a == "--config") {
        if (i + 1 >= args.size()) throw std::invalid_argument("--config needs a file name");
        path = args[++i];
      } else {
        path = a.substr(9);
      }
      append_file(path, out, flags);
      continue;
    }
    out.push_back(a);
  }
  return out;
}

}  // namespace hp::cli

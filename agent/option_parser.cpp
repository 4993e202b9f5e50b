#include "agent/option_parser.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "drivers/common/validate.hpp"

namespace hostprep::cli {

po::options_description describe(const CommandSpec& c) {
  po::options_description d(c.name + " options");
  for (const auto& use : c.options) {
    const auto& table = optionTable();
    const auto row = std::find_if(table.begin(), table.end(),
                                  [&](const Option& o) { return o.name == use.name; });
    if (row == table.end()) throw std::logic_error("no option --" + use.name + " in the table");
    const std::string& help = use.help.empty() ? row->help : use.help;
    const std::string& byDefault = use.byDefault.empty() ? row->byDefault : use.byDefault;
    auto value = [&] {
      auto* v = po::value<std::string>();
      if (!byDefault.empty()) v->default_value(byDefault);
      return v;
    };
    switch (row->arg) {
      case Arg::kNone:
        d.add_options()(row->name.c_str(), help.c_str());
        break;
      case Arg::kText:
        d.add_options()(row->name.c_str(), value(), help.c_str());
        break;
      case Arg::kOptionalText:
        d.add_options()(row->name.c_str(), value()->implicit_value(""), help.c_str());
        break;
      case Arg::kTexts:
        d.add_options()(row->name.c_str(),
                        po::value<std::vector<std::string>>()->multitoken()->composing(),
                        help.c_str());
        break;
      case Arg::kSeconds:  // text, read by readSeconds: "5x" gets its message, not Boost's
        d.add_options()(row->name.c_str(), value(), help.c_str());
        break;
    }
  }
  d.add_options()("help,h", "show help");
  return d;
}

std::string helpText(const CommandSpec& c) {
  std::ostringstream s;
  s << c.usage << "\n" << describe(c) << c.trailer;
  return s.str();
}

Error strayWord(const std::string& command, const std::string& word) {
  std::string advice = "see 'hostprep " + command + " --help'";
  if (parseBdf(word)) {
    advice = "to select that GPU, pass --devices " + word;
  } else if (parseMode(word)) {
    advice = "to choose that mode, pass --mode " + word;
  }
  return usageError("unexpected argument '" + word + "'", advice);
}

std::optional<std::string> text(const po::variables_map& vm, const char* name) {
  if (!vm.count(name)) return std::nullopt;
  return vm[name].as<std::string>();
}

std::vector<std::string> texts(const po::variables_map& vm, const char* name) {
  return vm.count(name) ? vm[name].as<std::vector<std::string>>() : std::vector<std::string>{};
}

bool given(const po::variables_map& vm, const char* name) { return vm.count(name) != 0; }

namespace {

// The value of option `name`, when given, checked by `parse` (its errors name `where`) into `into`.
template <class T>
Status readValue(const po::variables_map& vm, const char* name, std::optional<T>& into,
                 Result<T> (*parse)(std::string_view, std::string_view), std::string_view where) {
  auto t = text(vm, name);
  if (!t) return {};
  auto v = parse(where, *t);
  if (!v) return v.error();
  into = std::move(*v);
  return {};
}

}  // namespace

Status readMode(const po::variables_map& vm, std::optional<Mode>& mode) {
  return readValue(vm, "mode", mode, parseModeValue, "--mode");
}

Status readSelection(const po::variables_map& vm, SelectionOverrides& o) {
  if (auto s = readValue(vm, "devices", o.devices, parseBdfList, "devices"); !s) return s;
  if (auto s = readValue(vm, "gpu-ids", o.gpuIds, parsePciIdList, "gpu-ids"); !s) return s;
  if (auto s = readValue(vm, "host-driver", o.hostDriver, parseDriverValue, "--host-driver"); !s)
    return s;
  return readValue(vm, "host-driver-provider", o.hostDriverProvider, parseDriverProviderValue,
                   "--host-driver-provider");
}

Status readSelection(const po::variables_map& vm, SelectionOptions& selection) {
  SelectionOverrides o;
  if (auto st = readSelection(vm, o); !st) return st;
  o.applyTo(selection);
  return {};
}

Result<std::chrono::milliseconds> readSeconds(const po::variables_map& vm, const char* name) {
  const std::string& text = vm[name].as<std::string>();
  char* end = nullptr;
  errno = 0;
  const double s = std::strtod(text.c_str(), &end);  // "" reads as 0, refused below
  if (*end != '\0' || errno == ERANGE || !(s > 0) || s > 86400) {
    return usageError(std::string("--") + name + ": '" + quoteUntrusted(text) +
                          "' is not a number of seconds above 0 and at most 86400 (a day)",
                      "e.g. --" + std::string(name) + " 30");
  }
  return std::chrono::milliseconds(static_cast<long>(s * 1000));
}

Status readTimeouts(const po::variables_map& vm, std::chrono::milliseconds& lock,
                    std::chrono::milliseconds& unbind) {
  auto lt = readSeconds(vm, "lock-timeout");
  if (!lt) return lt.error();
  auto ut = readSeconds(vm, "unbind-timeout");
  if (!ut) return ut.error();
  lock = *lt;
  unbind = *ut;
  return {};
}

Status readConfig(const po::variables_map& vm, ConfigFile& c) {
  auto t = text(vm, "config");
  if (!t) return {};
  auto p = parseHostFilePath("--config", *t);
  if (!p) return p.error();
  c.path = *p;
  c.given = true;
  return {};
}

}  // namespace hostprep::cli

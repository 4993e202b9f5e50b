#include "agent/options.hpp"

#include <boost/program_options.hpp>
#include <sstream>

#include "drivers/names.hpp"
#include "drivers/parsers.hpp"
#include "drivers/text.hpp"

namespace po = boost::program_options;

namespace hostprep {
namespace {

po::options_description globalDescription() {
  po::options_description d("Global options (before or after the command)");
  d.add_options()
      ("root", po::value<std::string>()->default_value("/"),
       "prefix every host path with DIR (an image, a fixture, or /host in a pod)")
      ("output", po::value<std::string>()->default_value("text"), "text | json")
      ("log-level", po::value<std::string>()->default_value("info"),
       "trace | debug | info | warn | error | off")
      ("help,h", "show help")
      ("version", "print the version");
  return d;
}

// Runs a Boost parser and turns its exceptions into a usage error naming the input.
template <class F>
Result<po::variables_map> parseWith(F&& parse, std::string_view command) {
  po::variables_map vm;
  try {
    po::store(parse(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    return usageError(std::string(command) + ": " + e.what(),
                      "see 'hostprep " + std::string(command) + " --help'");
  }
  return vm;
}

Result<std::chrono::milliseconds> seconds(const po::variables_map& vm, const char* name) {
  double s = vm[name].as<double>();
  if (!(s > 0) || s > 86400) {
    return usageError(std::string("--") + name + ": " + std::to_string(s) +
                      " is not a number of seconds between 0 and 86400");
  }
  return std::chrono::milliseconds(static_cast<long>(s * 1000));
}

}  // namespace

Result<std::vector<Bdf>> parseBdfList(std::string_view option, std::string_view text) {
  std::vector<Bdf> out;
  for (auto part : split(text, ',')) {
    part = trim(part);
    if (part.empty()) continue;
    auto b = parseBdf(part);
    if (!b) {
      return usageError("--" + std::string(option) + ": '" + std::string(part) +
                            "' is not a PCI address",
                        "write DDDD:BB:DD.F, e.g. 0000:3b:00.0, comma-separated");
    }
    out.push_back(*b);
  }
  return out;
}

Result<std::vector<PciId>> parsePciIdList(std::string_view option, std::string_view text) {
  std::vector<PciId> out;
  for (auto part : split(text, ',')) {
    part = trim(part);
    if (part.empty()) continue;
    auto id = parsePciId(part);
    if (!id) {
      return usageError("--" + std::string(option) + ": '" + std::string(part) +
                            "' is not a vendor:device id",
                        "write VVVV:DDDD in hex, e.g. 10de:2236, comma-separated");
    }
    out.push_back(*id);
  }
  return out;
}

Result<std::string> parseDriverName(std::string_view option, std::string_view name) {
  if (auto v = checkDriverName("--" + std::string(option), name); !v) return v.error();
  return std::string(name);
}

Result<ParsedGlobal> parseGlobalOptions(int argc, const char* const* argv) {
  auto desc = globalDescription();
  ParsedGlobal out;
  po::parsed_options parsed(&desc);
  try {
    parsed = po::command_line_parser(argc, argv).options(desc).allow_unregistered().run();
  } catch (const po::error& e) {
    return usageError(e.what(), "see 'hostprep --help'");
  }
  auto vm = parseWith([&] { return parsed; }, "hostprep");
  if (!vm) return vm.error();
  out.rest = po::collect_unrecognized(parsed.options, po::include_positional);
  out.help = vm->count("help") != 0;
  out.version = vm->count("version") != 0;
  out.global.root = (*vm)["root"].as<std::string>();
  if (out.global.root.empty()) return usageError("--root: empty path", "use --root / for this host");
  const auto output = (*vm)["output"].as<std::string>();
  if (output == "text") {
    out.global.output = OutputFormat::kText;
  } else if (output == "json") {
    out.global.output = OutputFormat::kJson;
  } else {
    return usageError("--output: '" + output + "' is not a format", "use --output text or json");
  }
  out.global.logLevel = (*vm)["log-level"].as<std::string>();
  static const char* kLevels[] = {"trace", "debug", "info", "warn", "error", "off"};
  bool known = false;
  for (const char* l : kLevels) known = known || out.global.logLevel == l;
  if (!known) {
    return usageError("--log-level: '" + out.global.logLevel + "' is not a level",
                      "use trace, debug, info, warn, error or off");
  }
  return out;
}

std::string globalOptionsHelp() {
  std::ostringstream s;
  s << globalDescription();
  return s.str();
}

namespace {
po::options_description prepareDescription() {
  po::options_description d("prepare options");
  d.add_options()
      ("mode", po::value<std::string>(), "container | vm-passthrough | vm-vgpu (required)")
      ("dry-run", "print the plan and change nothing")
      ("force", "take groups with foreign devices and devices in use")
      ("devices", po::value<std::string>(), "only these GPUs, BDF,... (companions follow)")
      ("gpu-ids", po::value<std::string>(), "select VVVV:DDDD,... instead of NVIDIA GPUs")
      ("host-driver", po::value<std::string>()->default_value("nvidia"),
       "the datacenter driver for container mode")
      ("holder-nodes", po::value<std::string>(),
       "device nodes whose holders block unbinding the host driver (default /dev/<host-driver>*)")
      ("lock-timeout", po::value<double>()->default_value(30), "seconds to wait for another run")
      ("unbind-timeout", po::value<double>()->default_value(30),
       "seconds a driver may take to let go of a device")
      ("help,h", "show help");
  return d;
}
}  // namespace

std::string prepareHelp() {
  std::ostringstream s;
  s << "usage: hostprep prepare --mode M [options]\n\n"
       "Moves every selected GPU and its companion functions to the mode's driver, verifies each\n"
       "step, and rolls back on failure.\n\n"
    << prepareDescription();
  return s.str();
}

Result<PrepareOptions> parsePrepareOptions(const std::vector<std::string>& args) {
  auto desc = prepareDescription();
  auto vm = parseWith([&] { return po::command_line_parser(args).options(desc).run(); }, "prepare");
  if (!vm) return vm.error();
  PrepareOptions o;
  if (vm->count("help")) {
    o.help = true;
    return o;
  }
  if (!vm->count("mode")) {
    return usageError("prepare: --mode is required",
                      "choose one of " + std::string(kModeChoices));
  }
  const auto mode = (*vm)["mode"].as<std::string>();
  auto m = parseMode(mode);
  if (!m) {
    return usageError("--mode: '" + mode + "' is not a mode",
                      "choose one of " + std::string(kModeChoices));
  }
  o.mode = *m;
  o.dryRun = vm->count("dry-run") != 0;
  o.force = vm->count("force") != 0;
  if (vm->count("devices")) {
    auto d = parseBdfList("devices", (*vm)["devices"].as<std::string>());
    if (!d) return d.error();
    o.selection.devices = *d;
  }
  if (vm->count("gpu-ids")) {
    auto ids = parsePciIdList("gpu-ids", (*vm)["gpu-ids"].as<std::string>());
    if (!ids) return ids.error();
    o.selection.gpuIds = *ids;
  }
  auto drv = parseDriverName("host-driver", (*vm)["host-driver"].as<std::string>());
  if (!drv) return drv.error();
  o.selection.hostDriver = *drv;
  if (vm->count("holder-nodes")) {
    o.holderNodes = (*vm)["holder-nodes"].as<std::string>();
    if (!startsWith(o.holderNodes, "/dev/") || !checkConfigPath("--holder-nodes", o.holderNodes) ||
        o.holderNodes.size() > 255) {
      return usageError("--holder-nodes: '" + quoteUntrusted(o.holderNodes) + "' is not a /dev pattern",
                        "write a glob under /dev, e.g. /dev/nvidia*");
    }
  } else {
    o.holderNodes = "/dev/" + o.selection.hostDriver + "*";
  }
  auto lt = seconds(*vm, "lock-timeout");
  if (!lt) return lt.error();
  o.lockTimeout = *lt;
  auto ut = seconds(*vm, "unbind-timeout");
  if (!ut) return ut.error();
  o.unbindTimeout = *ut;
  return o;
}

}  // namespace hostprep

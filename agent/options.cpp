#include "agent/options.hpp"

#include <algorithm>
#include <boost/program_options.hpp>
#include <sstream>

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
  if (!isValidModuleName(name)) {
    return usageError("--" + std::string(option) + ": '" + std::string(name) +
                          "' is not a driver name",
                      "use letters, digits, '_' and '-' only, at most 64 characters");
  }
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
    if (!startsWith(o.holderNodes, "/dev/") || o.holderNodes.find("..") != std::string::npos) {
      return usageError("--holder-nodes: '" + o.holderNodes + "' is not a /dev pattern",
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

// ---- check-node -------------------------------------------------------------------------------

namespace hostprep {
namespace {
po::options_description checkNodeDescription() {
  po::options_description d("check-node options");
  d.add_options()
      ("cluster-policy", po::value<std::string>(),
       "the GPU Operator ClusterPolicy (kubectl get clusterpolicies -o json)")
      ("kubevirt", po::value<std::string>(), "the KubeVirt CR (kubectl get kubevirt -A -o json)")
      ("vms", po::value<std::vector<std::string>>()->multitoken()->composing(),
       "VirtualMachine / VirtualMachineInstance / Pod manifests (YAML or JSON, multi-document)")
      ("status", po::value<std::vector<std::string>>()->multitoken()->composing(),
       "hostprep status documents of the nodes (hostprep status --output json)")
      ("vgpu-config", po::value<std::string>(),
       "the vgpu-device-manager config (or its ConfigMap); default: the built-in profile table")
      ("operands", "print the table of operands per mode and exit")
      ("help,h", "show help");
  return d;
}
}  // namespace

std::string checkNodeHelp() {
  std::ostringstream s;
  s << "usage: hostprep check-node FILE... [--cluster-policy FILE] [--kubevirt FILE]\n"
       "                           [--vms FILE...] [--status FILE...] [--vgpu-config FILE]\n"
       "       hostprep check-node --operands\n\n"
       "Checks that each node's nvidia.com/gpu.workload.config label agrees with the resources it\n"
       "advertises, the operator's deploy labels, vGPU counts, KubeVirt's permittedHostDevices and\n"
       "what VMs and pods ask for. FILE is 'kubectl get nodes -o json' (or -o yaml, or one node);\n"
       "'-' reads standard input. Exit 0 clean (warnings allowed), 1 an error finding, 2 unreadable\n"
       "or malformed input.\n\n"
    << checkNodeDescription();
  return s.str();
}

Result<CheckNodeOptions> parseCheckNodeOptions(const std::vector<std::string>& args) {
  auto desc = checkNodeDescription();
  po::options_description all;
  all.add(desc).add_options()("files", po::value<std::vector<std::string>>()->composing(), "");
  po::positional_options_description pos;
  pos.add("files", -1);
  auto vm = parseWith(
      [&] { return po::command_line_parser(args).options(all).positional(pos).run(); }, "check-node");
  if (!vm) return vm.error();
  CheckNodeOptions o;
  if (vm->count("help")) {
    o.help = true;
    return o;
  }
  o.operands = vm->count("operands") != 0;
  auto list = [&](const char* name) {
    return vm->count(name) ? (*vm)[name].as<std::vector<std::string>>() : std::vector<std::string>{};
  };
  auto one = [&](const char* name) {
    return vm->count(name) ? std::optional<std::string>((*vm)[name].as<std::string>()) : std::nullopt;
  };
  o.nodes = list("files");
  o.vms = list("vms");
  o.status = list("status");
  o.clusterPolicy = one("cluster-policy");
  o.kubevirt = one("kubevirt");
  o.vgpuConfig = one("vgpu-config");
  if (o.operands) return o;
  if (o.nodes.empty()) {
    return usageError("check-node: no node file given",
                      "pass 'kubectl get nodes -o json > nodes.json' as FILE, or '-' for standard input");
  }
  int stdinUses = 0;
  for (const auto* v : {&o.nodes, &o.vms, &o.status}) stdinUses += static_cast<int>(std::count(v->begin(), v->end(), "-"));
  for (const auto* v : {&o.clusterPolicy, &o.kubevirt, &o.vgpuConfig}) stdinUses += *v == std::optional<std::string>("-");
  if (stdinUses > 1) {
    return usageError("check-node: '-' (standard input) is given " + std::to_string(stdinUses) + " times",
                      "only one input can come from standard input; write the others to files");
  }
  for (const auto* v : {&o.nodes, &o.vms, &o.status}) {
    for (const auto& f : *v) {
      if (f.empty()) return usageError("check-node: an empty file name", "name a file, or '-' for standard input");
    }
  }
  return o;
}

}  // namespace hostprep

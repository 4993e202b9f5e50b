#include "agent/options.hpp"

#include <algorithm>
#include <boost/program_options.hpp>
#include <cctype>
#include <sstream>

#include "drivers/names.hpp"
#include "drivers/parsers.hpp"
#include "drivers/text.hpp"

namespace po = boost::program_options;

namespace hostprep {
namespace {

po::options_description globalDescription() {
  po::options_description d("Global options (before or after the command)");
  d.add_options()("root", po::value<std::string>()->default_value("/"),
                  "prefix every host path with DIR (an image, a fixture, or /host in a pod)")(
      "output", po::value<std::string>()->default_value("text"), "text | json")(
      "log-level", po::value<std::string>()->default_value("info"),
      "trace | debug | info | warn | error | off")("help,h", "show help")("version",
                                                                          "print the version");
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
      return usageError(
          "--" + std::string(option) + ": '" + std::string(part) + "' is not a PCI address",
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
      return usageError(
          "--" + std::string(option) + ": '" + std::string(part) + "' is not a vendor:device id",
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
  if (out.global.root.empty())
    return usageError("--root: empty path", "use --root / for this host");
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
  d.add_options()("mode", po::value<std::string>(),
                  "container | vm-passthrough | vm-vgpu (required)")(
      "dry-run", "print the plan and change nothing")(
      "force", "take groups with foreign devices and devices in use")(
      "devices", po::value<std::string>(), "only these GPUs, BDF,... (companions follow)")(
      "gpu-ids", po::value<std::string>(), "select VVVV:DDDD,... instead of NVIDIA GPUs")(
      "host-driver", po::value<std::string>()->default_value("nvidia"),
      "the datacenter driver for container mode")(
      "holder-nodes", po::value<std::string>(),
      "device nodes whose holders block unbinding the host driver (default /dev/<host-driver>*)")(
      "lock-timeout", po::value<double>()->default_value(30), "seconds to wait for another run")(
      "unbind-timeout", po::value<double>()->default_value(30),
      "seconds a driver may take to let go of a device")(
      "vgpu-config", po::value<std::string>(),
      "vm-vgpu: vgpu-device-manager config FILE (default: embedded defaults per GPU model)")(
      "vgpu-config-name", po::value<std::string>()->default_value("default"),
      "vm-vgpu: the config in that file to apply (as the nvidia.com/vgpu.config label)")(
      "help,h", "show help");
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
    return usageError("prepare: --mode is required", "choose one of " + std::string(kModeChoices));
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
      return usageError(
          "--holder-nodes: '" + quoteUntrusted(o.holderNodes) + "' is not a /dev pattern",
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
  if (vm->count("vgpu-config")) {
    o.vgpuConfigFile = (*vm)["vgpu-config"].as<std::string>();
    if (o.vgpuConfigFile.empty())
      return usageError("--vgpu-config: empty path", "name a YAML file");
  }
  o.vgpuConfigName = (*vm)["vgpu-config-name"].as<std::string>();
  // A label value: at most 63 of [A-Za-z0-9._-], starting and ending alphanumeric.
  const auto& n = o.vgpuConfigName;
  bool okName = !n.empty() && n.size() <= 63 &&
                std::isalnum(static_cast<unsigned char>(n.front())) &&
                std::isalnum(static_cast<unsigned char>(n.back()));
  for (char c : n) {
    okName =
        okName && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.');
  }
  if (!okName) {
    return usageError("--vgpu-config-name: '" + n + "' is not a config name",
                      "use a label value: letters, digits, '-', '_', '.', at most 63");
  }
  if (o.mode != Mode::kVmVgpu &&
      (vm->count("vgpu-config") || !(*vm)["vgpu-config-name"].defaulted())) {
    return usageError("--vgpu-config and --vgpu-config-name need --mode vm-vgpu",
                      "drop them, or use --mode vm-vgpu");
  }
  return o;
}

// ---- preflight ----
namespace {
po::options_description preflightDescription() {
  po::options_description d("preflight options");
  d.add_options()(
      "mode", po::value<std::string>(),
      "container | vm-passthrough | vm-vgpu (default: the configured mode, else vm-passthrough)")(
      "image", "judge --root as an image root: read its boot configuration, skip hardware checks")(
      "devices", po::value<std::string>(), "only these GPUs, BDF,... (companions follow)")(
      "gpu-ids", po::value<std::string>(), "select VVVV:DDDD,... instead of NVIDIA GPUs")(
      "host-driver", po::value<std::string>()->default_value("nvidia"),
      "the datacenter driver for container mode")(
      "color", po::value<std::string>()->default_value("auto"),
      "auto | always | never (auto: only on a terminal, and not when NO_COLOR is set)")(
      "help,h", "show help");
  return d;
}
}  // namespace

std::string preflightHelp() {
  std::ostringstream s;
  s << "usage: hostprep preflight [--mode M] [--image] [options]\n\n"
       "Checks every host prerequisite of a mode (CPU virtualization, IOMMU in firmware and "
       "kernel,\n"
       "kernel arguments, interrupt remapping, modules, IOMMU groups, SR-IOV, boot persistence) "
       "and\n"
       "says exactly how to fix each problem. With --image, checks an image root's "
       "configuration.\n\n"
    << preflightDescription()
    << "\nExit codes: 0 no check failed, 1 a check failed, 2 usage error.\n";
  return s.str();
}

Result<PreflightOptions> parsePreflightOptions(const std::vector<std::string>& args) {
  auto desc = preflightDescription();
  auto vm =
      parseWith([&] { return po::command_line_parser(args).options(desc).run(); }, "preflight");
  if (!vm) return vm.error();
  PreflightOptions o;
  if (vm->count("help")) {
    o.help = true;
    return o;
  }
  if (vm->count("mode")) {
    const auto mode = (*vm)["mode"].as<std::string>();
    auto m = parseMode(mode);
    if (!m) {
      return usageError("--mode: '" + mode + "' is not a mode",
                        "choose one of " + std::string(kModeChoices));
    }
    o.mode = *m;
  }
  o.image = vm->count("image") != 0;
  if (vm->count("devices")) {
    if (o.image) {
      return usageError("--devices: an image has no PCI devices",
                        "select by id with --gpu-ids VVVV:DDDD, or drop --image");
    }
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
  const auto color = (*vm)["color"].as<std::string>();
  if (color == "auto") {
    o.color = ColorChoice::kAuto;
  } else if (color == "always") {
    o.color = ColorChoice::kAlways;
  } else if (color == "never") {
    o.color = ColorChoice::kNever;
  } else {
    return usageError("--color: '" + color + "' is not a choice",
                      "use --color auto, always or never");
  }
  return o;
}

}  // namespace hostprep

// ---- status, agent, persist (issue 5) ----
namespace hostprep {
namespace {

void addSelectionFlags(po::options_description& d) {
  d.add_options()("devices", po::value<std::string>(),
                  "only these GPUs, BDF,... (companions follow)")(
      "gpu-ids", po::value<std::string>(), "select VVVV:DDDD,... instead of NVIDIA GPUs")(
      "host-driver", po::value<std::string>(), "the datacenter driver (default nvidia)");
}

Status readSelectionFlags(const po::variables_map& vm, SelectionOverrides& o) {
  if (vm.count("devices")) {
    auto d = parseBdfList("devices", vm["devices"].as<std::string>());
    if (!d) return d.error();
    o.devices = *d;
  }
  if (vm.count("gpu-ids")) {
    auto ids = parsePciIdList("gpu-ids", vm["gpu-ids"].as<std::string>());
    if (!ids) return ids.error();
    o.gpuIds = *ids;
  }
  if (vm.count("host-driver")) {
    auto drv = parseDriverName("host-driver", vm["host-driver"].as<std::string>());
    if (!drv) return drv.error();
    o.hostDriver = *drv;
  }
  return {};
}

Result<std::optional<Mode>> readModeFlag(const po::variables_map& vm) {
  if (!vm.count("mode")) return std::optional<Mode>{};
  const auto mode = vm["mode"].as<std::string>();
  auto m = parseMode(mode);
  if (!m) {
    return usageError("--mode: '" + mode + "' is not a mode",
                      "choose one of " + std::string(kModeChoices));
  }
  return std::optional<Mode>{*m};
}

Status readConfigFlag(const po::variables_map& vm, std::string& path, bool& given) {
  if (!vm.count("config")) return {};
  auto p = parseHostFilePath("config", vm["config"].as<std::string>());
  if (!p) return p.error();
  path = *p;
  given = true;
  return {};
}

po::options_description statusDescription() {
  po::options_description d("status options");
  d.add_options()(
      "write", po::value<std::string>()->implicit_value(""),
      "write the document atomically to PATH under --root (default: the config's status path, "
      "/run/hostprep/status.json)")("pci-ids", po::value<std::string>(),
                                    "read device names from FILE (default: the root's pci.ids)")(
      "mode", po::value<std::string>(),
      "the desired mode (default: the config, else the last prepare)")(
      "config", po::value<std::string>(),
      "the agent config under --root (default /etc/hostprep/config.yaml)");
  addSelectionFlags(d);
  d.add_options()("help,h", "show help");
  return d;
}

po::options_description agentDescription() {
  po::options_description d("agent options");
  d.add_options()("config", po::value<std::string>(),
                  "the config under --root (default /etc/hostprep/config.yaml)")(
      "mode", po::value<std::string>(), "converge to this mode (overrides the config)")(
      "reconcile", "move devices back when someone else moves them (default: only report)")(
      "once", "converge, write the status and exit (the boot oneshot)")(
      "lock-timeout", po::value<double>()->default_value(30), "seconds to wait for another run")(
      "unbind-timeout", po::value<double>()->default_value(30),
      "seconds a driver may take to let go of a device")("help,h", "show help");
  return d;
}

po::options_description persistDescription() {
  po::options_description d("persist options");
  d.add_options()("mode", po::value<std::string>(),
                  "container | vm-passthrough | vm-vgpu (required)")(
      "dry-run", "print what would be written and change nothing")(
      "config", po::value<std::string>(), "take the selection from this config under --root");
  addSelectionFlags(d);
  d.add_options()("help,h", "show help");
  return d;
}

}  // namespace

Result<std::string> parseHostFilePath(std::string_view option, std::string_view text) {
  bool dots = false;
  for (auto part : split(text, '/')) dots = dots || part == "..";
  bool ctl = false;
  for (char c : text) ctl = ctl || static_cast<unsigned char>(c) < 0x20;
  if (text.empty() || text.front() != '/' || text.back() == '/' || dots || ctl ||
      text.size() > 4096) {
    return usageError(
        "--" + std::string(option) + ": '" + std::string(text) + "' is not an absolute file path",
        "write a path such as /run/hostprep/status.json (under --root), without '..'");
  }
  return std::string(text);
}

void SelectionOverrides::applyTo(SelectionOptions& s) const {
  if (gpuIds) s.gpuIds = *gpuIds;
  if (devices) s.devices = *devices;
  if (hostDriver) s.hostDriver = *hostDriver;
}

std::string statusHelp() {
  std::ostringstream s;
  s << "usage: hostprep status [--write [PATH]] [options]\n\n"
       "Builds the node's status document from the host: desired and actual mode, conditions,\n"
       "every selected device with its driver, and what the device plugins will advertise.\n"
       "Prints a summary (or the document with --output json); --write also writes it.\n\n"
    << statusDescription();
  return s.str();
}

Result<StatusOptions> parseStatusOptions(const std::vector<std::string>& args) {
  auto desc = statusDescription();
  auto vm = parseWith([&] { return po::command_line_parser(args).options(desc).run(); }, "status");
  if (!vm) return vm.error();
  StatusOptions o;
  if (vm->count("help")) {
    o.help = true;
    return o;
  }
  if (vm->count("write")) {
    const auto w = (*vm)["write"].as<std::string>();
    if (!w.empty()) {
      auto p = parseHostFilePath("write", w);
      if (!p) return p.error();
    }
    o.write = w;
  }
  if (vm->count("pci-ids")) {
    o.pciIdsFile = (*vm)["pci-ids"].as<std::string>();
    if (o.pciIdsFile->empty()) return usageError("--pci-ids: empty path", "name a pci.ids file");
  }
  auto m = readModeFlag(*vm);
  if (!m) return m.error();
  o.mode = *m;
  if (auto s = readConfigFlag(*vm, o.configPath, o.configGiven); !s) return s.error();
  if (auto s = readSelectionFlags(*vm, o.selection); !s) return s.error();
  return o;
}

std::string agentHelp() {
  std::ostringstream s;
  s << "usage: hostprep agent [options]\n\n"
       "Resolves a leftover journal, converges to the configured mode (the same path as prepare),\n"
       "writes the status, tells systemd it is ready, then rewrites the status on every PCI, VFIO\n"
       "and mdev kernel event. SIGHUP reloads the config; SIGTERM exits 0 and unbinds nothing.\n\n"
    << agentDescription();
  return s.str();
}

Result<AgentOptions> parseAgentOptions(const std::vector<std::string>& args) {
  auto desc = agentDescription();
  auto vm = parseWith([&] { return po::command_line_parser(args).options(desc).run(); }, "agent");
  if (!vm) return vm.error();
  AgentOptions o;
  if (vm->count("help")) {
    o.help = true;
    return o;
  }
  if (auto s = readConfigFlag(*vm, o.configPath, o.configGiven); !s) return s.error();
  auto m = readModeFlag(*vm);
  if (!m) return m.error();
  o.mode = *m;
  o.reconcile = vm->count("reconcile") != 0;
  o.once = vm->count("once") != 0;
  auto lt = seconds(*vm, "lock-timeout");
  if (!lt) return lt.error();
  o.lockTimeout = *lt;
  auto ut = seconds(*vm, "unbind-timeout");
  if (!ut) return ut.error();
  o.unbindTimeout = *ut;
  return o;
}

std::string persistHelp() {
  std::ostringstream s;
  s << "usage: hostprep persist --mode M [--dry-run] [options]\n\n"
       "Keeps the host driver away from passthrough GPUs from the first boot stage: writes\n"
       "/etc/modprobe.d/hostprep-vfio.conf (vfio-pci ids, softdeps), /etc/modules-load.d/\n"
       "hostprep-vfio.conf and a marked block in /etc/initramfs-tools/modules. Any other mode\n"
       "removes them. Run update-initramfs -u afterwards.\n\n"
    << persistDescription();
  return s.str();
}

Result<PersistOptions> parsePersistOptions(const std::vector<std::string>& args) {
  auto desc = persistDescription();
  auto vm = parseWith([&] { return po::command_line_parser(args).options(desc).run(); }, "persist");
  if (!vm) return vm.error();
  PersistOptions o;
  if (vm->count("help")) {
    o.help = true;
    return o;
  }
  auto m = readModeFlag(*vm);
  if (!m) return m.error();
  if (!*m)
    return usageError("persist: --mode is required", "choose one of " + std::string(kModeChoices));
  o.mode = **m;
  o.dryRun = vm->count("dry-run") != 0;
  if (auto s = readConfigFlag(*vm, o.configPath, o.configGiven); !s) return s.error();
  if (auto s = readSelectionFlags(*vm, o.selection); !s) return s.error();
  return o;
}

}  // namespace hostprep

// ---- check-node -------------------------------------------------------------------------------

namespace hostprep {
namespace {
po::options_description checkNodeDescription() {
  po::options_description d("check-node options");
  d.add_options()("cluster-policy", po::value<std::string>(),
                  "the GPU Operator ClusterPolicy (kubectl get clusterpolicies -o json)")(
      "kubevirt", po::value<std::string>(), "the KubeVirt CR (kubectl get kubevirt -A -o json)")(
      "vms", po::value<std::vector<std::string>>()->multitoken()->composing(),
      "VirtualMachine / VirtualMachineInstance / Pod manifests (YAML or JSON, multi-document)")(
      "status", po::value<std::vector<std::string>>()->multitoken()->composing(),
      "hostprep status documents of the nodes (hostprep status --output json)")(
      "resource-slices", po::value<std::vector<std::string>>()->multitoken()->composing(),
      "DRA ResourceSlices (kubectl get resourceslices -o json): checks gpu.nvidia.com devices")(
      "vgpu-config", po::value<std::string>(),
      "the vgpu-device-manager config (or its ConfigMap); default: the built-in profile table")(
      "operands", "print the table of operands per mode and exit")("help,h", "show help");
  return d;
}
}  // namespace

std::string checkNodeHelp() {
  std::ostringstream s;
  s << "usage: hostprep check-node FILE... [--cluster-policy FILE] [--kubevirt FILE]\n"
       "                           [--vms FILE...] [--status FILE...] [--vgpu-config FILE]\n"
       "                           [--resource-slices FILE...]\n"
       "       hostprep check-node --operands\n\n"
       "Checks that each node's nvidia.com/gpu.workload.config label agrees with the resources it\n"
       "advertises, the operator's deploy labels, vGPU counts, KubeVirt's permittedHostDevices "
       "and\n"
       "what VMs and pods ask for. FILE is 'kubectl get nodes -o json' (or -o yaml, or one node);\n"
       "'-' reads standard input. Exit 0 clean (warnings allowed), 1 an error finding, 2 "
       "unreadable\n"
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
  auto vm =
      parseWith([&] { return po::command_line_parser(args).options(all).positional(pos).run(); },
                "check-node");
  if (!vm) return vm.error();
  CheckNodeOptions o;
  if (vm->count("help")) {
    o.help = true;
    return o;
  }
  o.operands = vm->count("operands") != 0;
  auto list = [&](const char* name) {
    return vm->count(name) ? (*vm)[name].as<std::vector<std::string>>()
                           : std::vector<std::string>{};
  };
  auto one = [&](const char* name) {
    return vm->count(name) ? std::optional<std::string>((*vm)[name].as<std::string>())
                           : std::nullopt;
  };
  o.nodes = list("files");
  o.vms = list("vms");
  o.status = list("status");
  o.resourceSlices = list("resource-slices");
  o.clusterPolicy = one("cluster-policy");
  o.kubevirt = one("kubevirt");
  o.vgpuConfig = one("vgpu-config");
  if (o.operands) return o;
  if (o.nodes.empty()) {
    return usageError(
        "check-node: no node file given",
        "pass 'kubectl get nodes -o json > nodes.json' as FILE, or '-' for standard input");
  }
  int stdinUses = 0;
  for (const auto* v : {&o.nodes, &o.vms, &o.status, &o.resourceSlices})
    stdinUses += static_cast<int>(std::count(v->begin(), v->end(), "-"));
  for (const auto* v : {&o.clusterPolicy, &o.kubevirt, &o.vgpuConfig})
    stdinUses += *v == std::optional<std::string>("-");
  if (stdinUses > 1) {
    return usageError(
        "check-node: '-' (standard input) is given " + std::to_string(stdinUses) + " times",
        "only one input can come from standard input; write the others to files");
  }
  for (const auto* v : {&o.nodes, &o.vms, &o.status, &o.resourceSlices}) {
    for (const auto& f : *v) {
      if (f.empty())
        return usageError("check-node: an empty file name",
                          "name a file, or '-' for standard input");
    }
  }
  return o;
}

}  // namespace hostprep

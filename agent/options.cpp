#include "agent/options.hpp"

#include <sstream>

#include "agent/option_parser.hpp"

namespace hostprep {

// ---- The option table: every command option once, with its value and its help ---------------

namespace cli {

const std::vector<Option>& optionTable() {
  static const std::vector<Option> table = {
      {"mode", Arg::kText, "container | vm-passthrough | vm-vgpu (required)"},
      {"dry-run", Arg::kNone, "print the plan and change nothing"},
      {"no-reset", Arg::kNone,
       "return functions from vfio to their host driver without resetting them (default: reset "
       "each through the kernel, or its bus through its bridge when the bus is all the GPU's)"},
      {"force", Arg::kNone, "take groups with foreign devices and devices in use"},
      {"image", Arg::kNone,
       "judge --root as an image root: read its boot configuration, skip hardware checks"},
      {"write", Arg::kOptionalText,
       "write the document atomically to PATH under --root (default: the config's status path, "
       "/run/hostprep/status.json)"},
      {"pci-ids", Arg::kText,
       "read device names from FILE under --root (default: the root's pci.ids)"},
      {"config", Arg::kText, "the config under --root (default " + std::string(kConfigPath) + ")"},
      {"devices", Arg::kText, "only these GPUs, BDF,... (companions follow)"},
      {"gpu-ids", Arg::kText, "select VVVV:DDDD,... instead of NVIDIA GPUs"},
      {"host-driver", Arg::kText, "the datacenter driver (default nvidia)"},
      {"host-driver-provider", Arg::kText,
       "who loads the host driver module: host (hostprep), operator (the GPU Operator's driver "
       "container) or auto (operator when the host's module tree lacks it and /run/nvidia/driver "
       "or /run/nvidia/validations is there) (default host)"},
      {"holder-nodes", Arg::kText,
       "device nodes whose holders block unbinding the host driver (default /dev/<host-driver>*)"},
      {"reconcile", Arg::kNone,
       "move devices back when someone else moves them (default: only report)"},
      {"once", Arg::kNone, "converge, write the status and exit (the boot oneshot)"},
      {"lock-timeout", Arg::kSeconds, "seconds to wait for another run", "30"},
      {"unbind-timeout", Arg::kSeconds,
       "seconds a driver may take to let go of a device or take it, or the kernel to add or remove "
       "VFs",
       "30"},
      {"nvswitch", Arg::kText,
       "NVSwitches: auto (follow Fabric Manager's FABRIC_MODE) | with-gpus | leave", "auto"},
      {"vgpu-config", Arg::kText,
       "vm-vgpu: vgpu-device-manager config FILE under --root (default: embedded defaults per GPU "
       "model)"},
      {"vgpu-config-name", Arg::kText,
       "vm-vgpu: the config in that file to apply (as the nvidia.com/vgpu.config label)",
       std::string(kDefaultVgpuConfigName)},
      {"color", Arg::kText,
       "auto | always | never (auto: only on a terminal, and not when NO_COLOR is set)", "auto"},
      {"cluster-policy", Arg::kText,
       "the GPU Operator ClusterPolicy (kubectl get clusterpolicies -o json)"},
      {"kubevirt", Arg::kText, "the KubeVirt CR (kubectl get kubevirt -A -o json)"},
      {"vms", Arg::kTexts,
       "VirtualMachine / VirtualMachineInstance / Pod manifests (YAML or JSON, multi-document)"},
      {"status", Arg::kTexts,
       "hostprep status documents of the nodes (hostprep status --output json)"},
      {"resource-slices", Arg::kTexts,
       "DRA ResourceSlices (kubectl get resourceslices -o json): checks gpu.nvidia.com devices"},
      {"operands", Arg::kNone, "print the table of operands per mode and exit"},
  };
  return table;
}

}  // namespace cli

using namespace cli;

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

// ---- The commands: their option tables and how their values become typed options ------------

CommandSpec prepareSpec() {
  return {"prepare",
          R"(usage: hostprep prepare [--mode M] [options]

Moves every selected GPU and its companion functions to the mode's driver, verifies each
step, and rolls back on failure. Without --mode, applies the config: its mode for every
GPU that no devices rule matches, the rule's mode for the others (a mixed node), in one run.
)",
          {{"mode",
            "container | vm-passthrough | vm-vgpu for every selected GPU (default: the "
            "config's mode and devices rules)"},
           {"config", "without --mode: the config to apply, under --root (default " +
                          std::string(kConfigPath) + ")"},
           {"dry-run"},
           {"force"},
           {"no-reset"},
           {"devices"},
           {"gpu-ids"},
           {"host-driver", "the datacenter driver's module (its PCI drivers: the host drivers)",
            SelectionOptions{}.hostDriver},
           {"host-driver-provider"},
           {"holder-nodes"},
           {"lock-timeout"},
           {"unbind-timeout"},
           {"nvswitch"},
           {"vgpu-config"},
           {"vgpu-config-name"}}};
}

Result<PrepareOptions> readPrepare(const po::variables_map& vm) {
  PrepareOptions p;
  ConvergeOptions& o = p.converge;
  std::optional<Mode> mode;
  if (auto s = readMode(vm, mode); !s) return s.error();
  p.fromConfig = !mode;
  o.mode = mode.value_or(Mode::kContainer);
  if (auto s = readConfig(vm, p.config); !s) return s.error();
  if (mode && p.config.given) {
    return usageError("--config: prepare applies a config only without --mode",
                      "drop --mode to apply the config, or drop --config");
  }
  o.dryRun = given(vm, "dry-run");
  o.force = given(vm, "force");
  p.noReset = given(vm, "no-reset");
  if (p.noReset) o.resetOnReturn = false;
  if (auto s = readSelection(vm, p.selection); !s) return s.error();
  p.selection.applyTo(o.selection);
  // prepare's --host-driver has a default: only a given one wins over the config's.
  if (vm.count("host-driver") && vm["host-driver"].defaulted()) p.selection.hostDriver.reset();
  if (auto t = text(vm, "holder-nodes")) {
    auto h = parseHolderNodes("--holder-nodes", *t);
    if (!h) return h.error();
    o.holderNodes = *h;
  }
  if (auto s = readTimeouts(vm, o.lockTimeout, o.unbindTimeout); !s) return s.error();
  auto nvSwitch = parseNvSwitchValue("--nvswitch", *text(vm, "nvswitch"));
  if (!nvSwitch) return nvSwitch.error();
  o.nvSwitch = *nvSwitch;
  if (auto t = text(vm, "vgpu-config")) {
    if (t->empty()) return usageError("--vgpu-config: empty path", "name a YAML file");
    auto f = parseHostFilePath("--vgpu-config", *t);
    if (!f) return f.error();
    o.vgpuConfigFile = *f;
  }
  auto name = parseVgpuConfigName("--vgpu-config-name", *text(vm, "vgpu-config-name"));
  if (!name) return name.error();
  o.vgpuConfigName = *name;
  p.vgpuConfigGiven = given(vm, "vgpu-config") || !vm["vgpu-config-name"].defaulted();
  if (mode && *mode != Mode::kVmVgpu && p.vgpuConfigGiven) {
    return usageError("--vgpu-config and --vgpu-config-name need --mode vm-vgpu",
                      "drop them, or use --mode vm-vgpu");
  }
  p.holderNodesGiven = given(vm, "holder-nodes");
  return p;
}

CommandSpec preflightSpec() {
  return {"preflight",
          R"(usage: hostprep preflight [--mode M] [--image] [options]

Checks every host prerequisite of a mode (CPU virtualization, IOMMU in firmware and kernel,
kernel arguments, interrupt remapping, modules, IOMMU groups, SR-IOV, boot persistence) and
says exactly how to fix each problem. With --image, checks an image root's configuration.
Without --mode on a node whose config's devices rules give the GPUs more than one mode, checks
each mode on its GPUs, the node for all of them, and the mix (gpu.mode-mix).
)",
          {{"mode",
            "container | vm-passthrough | vm-vgpu, for every selected GPU (default: the configured "
            "mode and devices rules, else vm-passthrough)"},
           {"image"},
           {"devices"},
           {"gpu-ids"},
           {"host-driver", "the datacenter driver's module (its PCI drivers: the host drivers)",
            SelectionOptions{}.hostDriver},
           {"host-driver-provider"},
           {"color"}},
          "\nExit codes: 0 no check failed, 1 a check failed, 2 usage error.\n"};
}

Result<PreflightOptions> readPreflight(const po::variables_map& vm) {
  PreflightOptions o;
  if (auto s = readMode(vm, o.mode); !s) return s.error();
  o.image = given(vm, "image");
  if (o.image && given(vm, "devices")) {
    return usageError("--devices: an image has no PCI devices",
                      "select by id with --gpu-ids VVVV:DDDD, or drop --image");
  }
  if (auto s = readSelection(vm, o.selection); !s) return s.error();
  const auto color = *text(vm, "color");
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

CommandSpec statusSpec() {
  return {"status",
          R"(usage: hostprep status [--write [PATH]] [options]

Builds the node's status document from the host: desired and actual mode, conditions,
every selected device with its driver, and what the device plugins will advertise.
Prints a summary (or the document with --output json); --write also writes it. The
selection: the flags, else the config's, else the last prepare's.
)",
          {{"write"},
           {"pci-ids"},
           {"mode", "the desired mode (default: the config, else the last prepare)"},
           {"config", "the agent config under --root (default " + std::string(kConfigPath) + ")"},
           {"devices"},
           {"gpu-ids"},
           {"host-driver"},
           {"host-driver-provider"}}};
}

Result<StatusOptions> readStatus(const po::variables_map& vm) {
  StatusOptions o;
  if (auto w = text(vm, "write")) {
    if (!w->empty()) {
      auto p = parseHostFilePath("--write", *w);
      if (!p) return p.error();
    }
    o.write = *w;
  }
  if (auto t = text(vm, "pci-ids")) {
    if (t->empty()) return usageError("--pci-ids: empty path", "name a pci.ids file");
    auto f = parseHostFilePath("--pci-ids", *t);
    if (!f) return f.error();
    o.pciIdsFile = *f;
  }
  if (auto s = readMode(vm, o.mode); !s) return s.error();
  if (auto s = readConfig(vm, o.config); !s) return s.error();
  if (auto s = readSelection(vm, o.selection); !s) return s.error();
  return o;
}

CommandSpec agentSpec() {
  return {"agent",
          R"(usage: hostprep agent [options]

Resolves a leftover journal, converges to the configured mode (the same path as prepare),
writes the status, tells systemd it is ready, then rewrites the status on every PCI, VFIO
and mdev kernel event. SIGHUP reloads the config; SIGTERM exits 0 and unbinds nothing.
)",
          {{"config"},
           {"mode", "converge to this mode (overrides the config)"},
           {"reconcile"},
           {"once"},
           {"no-reset"},
           {"lock-timeout"},
           {"unbind-timeout"}}};
}

Result<AgentOptions> readAgent(const po::variables_map& vm) {
  AgentOptions o;
  if (auto s = readConfig(vm, o.config); !s) return s.error();
  if (auto s = readMode(vm, o.mode); !s) return s.error();
  o.reconcile = given(vm, "reconcile");
  o.once = given(vm, "once");
  o.noReset = given(vm, "no-reset");
  if (auto s = readTimeouts(vm, o.lockTimeout, o.unbindTimeout); !s) return s.error();
  return o;
}

CommandSpec persistSpec() {
  return {"persist",
          R"(usage: hostprep persist [--mode M] [--dry-run] [options]

Keeps the host driver away from passthrough GPUs from the first boot stage: writes
/etc/modprobe.d/hostprep-vfio.conf (vfio-pci ids, softdeps), /etc/modules-load.d/
hostprep-vfio.conf and a marked block in /etc/initramfs-tools/modules. Any other mode
removes them. Without --mode, the config's mode and devices rules: on a split, an id that
GPUs in two modes share is left out of vfio-pci ids (hostprep-prepare.service binds those
GPUs at boot). Run update-initramfs -u afterwards.
)",
          {{"mode",
            "container | vm-passthrough | vm-vgpu, for every selected GPU (default: the "
            "config's mode and devices rules)"},
           {"dry-run", "print what would be written and change nothing"},
           {"config",
            "the config under --root: its selection, and without --mode its mode and devices "
            "rules"},
           {"devices"},
           {"gpu-ids"},
           {"host-driver"}}};
}

Result<PersistOptions> readPersist(const po::variables_map& vm) {
  PersistOptions o;
  if (auto s = readMode(vm, o.mode); !s) return s.error();
  o.dryRun = given(vm, "dry-run");
  if (auto s = readConfig(vm, o.config); !s) return s.error();
  if (auto s = readSelection(vm, o.selection); !s) return s.error();
  return o;
}

CommandSpec recoverSpec() {
  return {"recover",
          R"(usage: hostprep recover --devices BDF[,...] [--mode M] [--dry-run] [options]

Brings back GPUs whose functions no longer answer (config space reads 0xffff: after a VM, in
D3cold, fallen off the bus) or sit without a driver. Unbinds what is bound, then tries, until
every function of the GPUs' slots answers: each function's reset; a reset of their bus through
its bridge (only when the bus is the GPUs' alone); removing the functions and rescanning the
bus. Then moves them to the mode's driver as prepare does (--mode, else the config's mode, else
the last prepare's), or without one probes them (the driver the kernel gives them).
)",
          {{"devices", "the GPUs to recover, BDF,... on one bus (their slots' functions follow)"},
           {"mode",
            "container | vm-passthrough | vm-vgpu: the driver to bind once they answer (default: "
            "the config's mode, else the last prepare's; none: the driver the kernel gives them)"},
           {"dry-run", "print what would be tried and change nothing"},
           {"force", "recover a GPU whose IOMMU group holds the root filesystem's disk"},
           {"no-reset"},
           {"config"},
           {"gpu-ids"},
           {"host-driver", "the datacenter driver's module (its PCI drivers: the host drivers)",
            SelectionOptions{}.hostDriver},
           {"host-driver-provider"},
           {"lock-timeout"},
           {"unbind-timeout"}},
          "\nExit codes: 0 every function answers and is on its driver, 1 still silent after "
          "every rung (reboot the host) or the bind failed, 2 usage error, 3 refused (a process "
          "holds the GPU, its group holds the root disk).\n"};
}

Result<RecoverOptions> readRecover(const po::variables_map& vm) {
  RecoverOptions o;
  if (auto s = readMode(vm, o.mode); !s) return s.error();
  o.dryRun = given(vm, "dry-run");
  o.force = given(vm, "force");
  o.noReset = given(vm, "no-reset");
  if (auto s = readConfig(vm, o.config); !s) return s.error();
  if (auto s = readSelection(vm, o.selection); !s) return s.error();
  if (vm.count("host-driver") && vm["host-driver"].defaulted()) o.selection.hostDriver.reset();
  if (!o.selection.devices || o.selection.devices->empty()) {
    return usageError("recover: --devices is required",
                      "name the GPUs to bring back: --devices 0000:3b:00.0");
  }
  if (auto s = readTimeouts(vm, o.lockTimeout, o.unbindTimeout); !s) return s.error();
  return o;
}

CommandSpec checkNodeSpec() {
  return {"check-node",
          R"(usage: hostprep check-node FILE... [--cluster-policy FILE] [--kubevirt FILE]
                           [--vms FILE...] [--status FILE...] [--vgpu-config FILE]
                           [--resource-slices FILE...]
       hostprep check-node --operands

Checks that each node's nvidia.com/gpu.workload.config label agrees with the resources it
advertises, the operator's deploy labels, vGPU counts, KubeVirt's permittedHostDevices and
what VMs and pods ask for. FILE is 'kubectl get nodes -o json' (or -o yaml, or one node);
'-' reads standard input. Exit 0 clean (warnings allowed), 1 an error finding, 2 unreadable
or malformed input.
)",
          {{"cluster-policy"},
           {"kubevirt"},
           {"vms"},
           {"status"},
           {"resource-slices"},
           {"vgpu-config",
            "the vgpu-device-manager config (or its ConfigMap); default: the built-in profile "
            "table"},
           {"operands"}},
          "",
          "files"};
}

Result<CheckNodeOptions> readCheckNode(const po::variables_map& vm) {
  CheckNodeOptions o;
  o.operands = given(vm, "operands");
  o.nodes = texts(vm, "files");
  o.vms = texts(vm, "vms");
  o.status = texts(vm, "status");
  o.resourceSlices = texts(vm, "resource-slices");
  o.clusterPolicy = text(vm, "cluster-policy");
  o.kubevirt = text(vm, "kubevirt");
  o.vgpuConfig = text(vm, "vgpu-config");
  if (o.operands) return o;
  if (o.nodes.empty()) {
    return usageError(
        "no node file given",
        "pass 'kubectl get nodes -o json > nodes.json' as FILE, or '-' for standard input");
  }
  int stdinUses = 0;
  for (const auto* v : {&o.nodes, &o.vms, &o.status, &o.resourceSlices})
    stdinUses += static_cast<int>(std::count(v->begin(), v->end(), "-"));
  for (const auto* v : {&o.clusterPolicy, &o.kubevirt, &o.vgpuConfig})
    stdinUses += *v == std::optional<std::string>("-");
  if (stdinUses > 1) {
    return usageError("'-' (standard input) is given " + std::to_string(stdinUses) + " times",
                      "only one input can come from standard input; write the others to files");
  }
  for (const auto* v : {&o.nodes, &o.vms, &o.status, &o.resourceSlices}) {
    for (const auto& f : *v) {
      if (f.empty())
        return usageError("an empty file name", "name a file, or '-' for standard input");
    }
  }
  return o;
}

}  // namespace

Result<std::vector<Bdf>> parseBdfList(std::string_view option, std::string_view text) {
  return parseList(option, text, parseBdfValue);
}

Result<std::vector<PciId>> parsePciIdList(std::string_view option, std::string_view text) {
  return parseList(option, text, parsePciIdValue);
}

void SelectionOverrides::applyTo(SelectionOptions& s) const {
  if (gpuIds) s.gpuIds = *gpuIds;
  if (devices) s.devices = *devices;
  if (hostDriver) s.hostDriver = *hostDriver;
  if (hostDriverProvider) s.hostDriverProvider = *hostDriverProvider;
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

Result<CommandLine<PrepareOptions>> parsePrepareOptions(const std::vector<std::string>& args) {
  return parseCommand<PrepareOptions>(args, prepareSpec(), readPrepare);
}

Result<CommandLine<PreflightOptions>> parsePreflightOptions(const std::vector<std::string>& args) {
  return parseCommand<PreflightOptions>(args, preflightSpec(), readPreflight);
}

Result<CommandLine<StatusOptions>> parseStatusOptions(const std::vector<std::string>& args) {
  return parseCommand<StatusOptions>(args, statusSpec(), readStatus);
}

Result<CommandLine<AgentOptions>> parseAgentOptions(const std::vector<std::string>& args) {
  return parseCommand<AgentOptions>(args, agentSpec(), readAgent);
}

Result<CommandLine<PersistOptions>> parsePersistOptions(const std::vector<std::string>& args) {
  return parseCommand<PersistOptions>(args, persistSpec(), readPersist);
}

Result<CommandLine<RecoverOptions>> parseRecoverOptions(const std::vector<std::string>& args) {
  return parseCommand<RecoverOptions>(args, recoverSpec(), readRecover);
}

Result<CommandLine<CheckNodeOptions>> parseCheckNodeOptions(const std::vector<std::string>& args) {
  return parseCommand<CheckNodeOptions>(args, checkNodeSpec(), readCheckNode);
}

}  // namespace hostprep

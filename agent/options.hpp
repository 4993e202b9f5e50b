// Command-line options become typed configs here, with enums for every choice. Every option is
// declared once, in the option table of options.cpp, beside each command's use of it; its value
// is checked by the same validator the config file uses (agent/option_values); the parsing they
// share is option_parser.hpp's. A command's parser returns its options,
// or --help with its help text (commands.hpp: exitEarly).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "agent/context.hpp"
#include "agent/converge.hpp"
#include "agent/option_values.hpp"
#include "drivers/common/error.hpp"
#include "drivers/model/mode.hpp"
#include "drivers/model/selection.hpp"

namespace hostprep {

// Splits the global options (--root, --output, --log-level) from argv, wherever they stand.
// Returns the remaining words: the command name first, then its own options.
struct ParsedGlobal {
  GlobalOptions global;
  std::vector<std::string> rest;
  bool help = false;
  bool version = false;
};
Result<ParsedGlobal> parseGlobalOptions(int argc, const char* const* argv);
std::string globalOptionsHelp();

// Comma-separated lists on the command line, each element checked as in the config file.
Result<std::vector<Bdf>> parseBdfList(std::string_view option, std::string_view text);
Result<std::vector<PciId>> parsePciIdList(std::string_view option, std::string_view text);

// Selection flags; each overrides the config's value when given.
struct SelectionOverrides {
  std::optional<std::vector<PciId>> gpuIds;
  std::optional<std::vector<Bdf>> devices;
  std::optional<std::string> hostDriver;
  std::optional<DriverProvider> hostDriverProvider;
  void applyTo(SelectionOptions& s) const;
};

// --config: the agent's config file under --root; a missing file is an error only when named.
struct ConfigFile {
  std::string path{kConfigPath};
  bool given = false;
};

// ---- prepare: the options of a convergence (agent/converge) ----
struct PrepareOptions {
  ConvergeOptions converge;  // --mode M: every selected device to M
  // No --mode: the config's mode, devices rules, selection, holder-nodes and vGPU config apply;
  // the selection, --holder-nodes and --vgpu-config flags given win over the config's.
  bool fromConfig = false;
  ConfigFile config;
  SelectionOverrides selection;
  bool holderNodesGiven = false;
  bool vgpuConfigGiven = false;
  bool noReset = false;  // --no-reset (wins over the config's reset-on-return)
};
Result<CommandLine<PrepareOptions>> parsePrepareOptions(const std::vector<std::string>& args);

// ---- preflight ----
enum class ColorChoice { kAuto, kAlways, kNever };

struct PreflightOptions {
  std::optional<Mode> mode;  // --mode; unset: the configured mode, else vm-passthrough
  bool image = false;        // --image: judge --root as an image, not a running host
  SelectionOptions selection;
  ColorChoice color = ColorChoice::kAuto;
};
Result<CommandLine<PreflightOptions>> parsePreflightOptions(const std::vector<std::string>& args);

// ---- status ----
struct StatusOptions {
  std::optional<std::string> write;       // host path, when --write was given
  std::optional<std::string> pciIdsFile;  // a host path, read under --root
  std::optional<Mode> mode;
  ConfigFile config;
  SelectionOverrides selection;
};
Result<CommandLine<StatusOptions>> parseStatusOptions(const std::vector<std::string>& args);

// ---- agent ----
struct AgentOptions {
  ConfigFile config;
  std::optional<Mode> mode;
  bool reconcile = false;
  bool once = false;
  bool noReset = false;  // --no-reset: as reset-on-return: false
  std::chrono::milliseconds lockTimeout{30'000};
  std::chrono::milliseconds unbindTimeout{30'000};
};
Result<CommandLine<AgentOptions>> parseAgentOptions(const std::vector<std::string>& args);

// ---- persist ----
struct PersistOptions {
  std::optional<Mode> mode;  // unset: the config's mode and devices rules
  bool dryRun = false;
  ConfigFile config;
  SelectionOverrides selection;
};
Result<CommandLine<PersistOptions>> parsePersistOptions(const std::vector<std::string>& args);

// ---- recover ----
struct RecoverOptions {
  std::optional<Mode> mode;  // the driver to bind afterwards; unset: the config's mode, else none
  bool dryRun = false;
  bool force = false;
  bool noReset = false;  // for the bind afterwards (prepare's --no-reset)
  ConfigFile config;
  SelectionOverrides selection;  // --devices (required), --gpu-ids, --host-driver(-provider)
  std::chrono::milliseconds lockTimeout{30'000};
  std::chrono::milliseconds unbindTimeout{30'000};
};
Result<CommandLine<RecoverOptions>> parseRecoverOptions(const std::vector<std::string>& args);

// ---- check-node: cluster documents in, findings out. "-" names standard input (at most once).
struct CheckNodeOptions {
  std::vector<std::string> nodes;  // Node / NodeList documents
  std::optional<std::string> clusterPolicy;
  std::optional<std::string> kubevirt;
  std::vector<std::string> vms;
  std::vector<std::string> status;
  std::vector<std::string> resourceSlices;  // kubectl get resourceslices -o json
  std::optional<std::string> vgpuConfig;
  bool operands = false;  // print the table of operands per mode and stop
};
Result<CommandLine<CheckNodeOptions>> parseCheckNodeOptions(const std::vector<std::string>& args);

}  // namespace hostprep

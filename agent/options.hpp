// Command-line options become typed configs here, in one file, with enums for every choice.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "agent/context.hpp"
#include "drivers/error.hpp"
#include "drivers/mode.hpp"
#include "drivers/selection.hpp"

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

// Shared validators: each names the option and the fix in its error.
Result<std::vector<Bdf>> parseBdfList(std::string_view option, std::string_view text);
Result<std::vector<PciId>> parsePciIdList(std::string_view option, std::string_view text);
Result<std::string> parseDriverName(std::string_view option, std::string_view name);

struct PrepareOptions {
  Mode mode = Mode::kContainer;
  bool dryRun = false;
  bool force = false;
  SelectionOptions selection;
  std::chrono::milliseconds lockTimeout{30'000};
  std::chrono::milliseconds unbindTimeout{30'000};
  std::string holderNodes;  // glob of device nodes whose holders block unbinding the host driver
  bool help = false;
  // vm-vgpu: vgpu-device-manager's config file ("" = the embedded defaults per GPU model) and
  // the config in it (the role of the nvidia.com/vgpu.config label).
  std::string vgpuConfigFile;
  std::string vgpuConfigName = "default";
};
Result<PrepareOptions> parsePrepareOptions(const std::vector<std::string>& args);
std::string prepareHelp();

// ---- preflight ----
enum class ColorChoice { kAuto, kAlways, kNever };

struct PreflightOptions {
  std::optional<Mode> mode;  // --mode; unset: the configured mode, else vm-passthrough
  bool image = false;        // --image: judge --root as an image, not a running host
  SelectionOptions selection;
  ColorChoice color = ColorChoice::kAuto;
  bool help = false;
};
Result<PreflightOptions> parsePreflightOptions(const std::vector<std::string>& args);
std::string preflightHelp();

}  // namespace hostprep

// ---- status, agent, persist (issue 5) ----
namespace hostprep {

// An absolute file path under --root, without "..": "--write: 'x' is not an absolute path".
Result<std::string> parseHostFilePath(std::string_view option, std::string_view text);

// Selection flags shared by status and persist; each overrides the config's value when given.
struct SelectionOverrides {
  std::optional<std::vector<PciId>> gpuIds;
  std::optional<std::vector<Bdf>> devices;
  std::optional<std::string> hostDriver;
  void applyTo(SelectionOptions& s) const;
};

struct StatusOptions {
  std::optional<std::string> write;       // host path, when --write was given
  std::optional<std::string> pciIdsFile;  // a file on this machine
  std::optional<Mode> mode;
  std::string configPath{"/etc/hostprep/config.yaml"};
  bool configGiven = false;
  SelectionOverrides selection;
  bool help = false;
};
Result<StatusOptions> parseStatusOptions(const std::vector<std::string>& args);
std::string statusHelp();

struct AgentOptions {
  std::string configPath{"/etc/hostprep/config.yaml"};
  bool configGiven = false;
  std::optional<Mode> mode;
  bool reconcile = false;
  bool once = false;
  std::chrono::milliseconds lockTimeout{30'000};
  std::chrono::milliseconds unbindTimeout{30'000};
  bool help = false;
};
Result<AgentOptions> parseAgentOptions(const std::vector<std::string>& args);
std::string agentHelp();

struct PersistOptions {
  Mode mode = Mode::kContainer;
  bool dryRun = false;
  std::string configPath{"/etc/hostprep/config.yaml"};
  bool configGiven = false;
  SelectionOverrides selection;
  bool help = false;
};
Result<PersistOptions> parsePersistOptions(const std::vector<std::string>& args);
std::string persistHelp();
// check-node: cluster documents in, findings out. "-" names standard input (at most once).
struct CheckNodeOptions {
  std::vector<std::string> nodes;  // Node / NodeList documents
  std::optional<std::string> clusterPolicy;
  std::optional<std::string> kubevirt;
  std::vector<std::string> vms;
  std::vector<std::string> status;
  std::vector<std::string> resourceSlices;  // kubectl get resourceslices -o json
  std::optional<std::string> vgpuConfig;
  bool operands = false;  // print the table of operands per mode and stop
  bool help = false;
};
Result<CheckNodeOptions> parseCheckNodeOptions(const std::vector<std::string>& args);
std::string checkNodeHelp();

}  // namespace hostprep

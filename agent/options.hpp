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

}  // namespace hostprep

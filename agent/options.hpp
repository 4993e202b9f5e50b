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

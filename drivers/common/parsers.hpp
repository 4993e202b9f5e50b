// Pure parsers for kernel text: /proc/cmdline, /proc/modules, modules.alias. Each is a function
// of a string, tested table-driven; none touches the host.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace hostprep {

// The kernel command line as words, with "key=value" split. Quotes group words like the kernel
// does ("a=\"x y\""). A key given twice keeps its last value, as the kernel's parser does.
struct Cmdline {
  std::vector<std::pair<std::string, std::optional<std::string>>> params;

  bool has(std::string_view key) const;
  std::optional<std::string> value(std::string_view key) const;  // last value
  bool operator==(const Cmdline&) const = default;
};
Cmdline parseCmdline(std::string_view text);

// Module names from /proc/modules (first column), normalised with '-' -> '_'.
std::set<std::string> parseProcModules(std::string_view text);
std::string normalizeModuleName(std::string_view name);

// Is this a safe module or driver name to put in a path? [A-Za-z0-9_-], 1..64 chars.
bool isValidModuleName(std::string_view name);

// One "alias <pattern> <module>" line of modules.alias.
struct ModuleAlias {
  std::string pattern;
  std::string module;
};
std::vector<ModuleAlias> parseModulesAlias(std::string_view text, std::string_view prefix = {});
// Can fnmatch(3) judge this alias pattern at a bounded cost? fnmatch backtracks on every '*':
// real aliases have at most 7 and are short, so a pattern with more than 16 or longer than 256
// characters cannot be real and must not cost exponential time.
bool aliasPatternAffordable(std::string_view pattern);

// The best VFIO driver for a device, as NVIDIA's vfio-manage picks it: among "vfio_pci:" aliases
// whose pattern matches the device's modalias (with "pci:" replaced by "vfio_pci:"), the one with
// the fewest wildcards; "vfio_pci" when none matches. Lines naming an invalid module are skipped,
// so the result always satisfies isValidModuleName.
std::string bestVfioModule(std::string_view modulesAlias, std::string_view modalias);
// The lines of a modules.alias that bestVfioModule reads (those holding "vfio_pci:"), in their
// order: a few hundred bytes of a distribution's megabyte, for which bestVfioModule answers the
// same for every modalias. Callers that look up many devices keep these lines instead of the file.
std::string vfioAliasLines(std::string_view modulesAlias);

}  // namespace hostprep

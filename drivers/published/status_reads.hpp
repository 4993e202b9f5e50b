// What the status reads from the host beside the snapshot: the node's name, pci.ids, and what the
// last prepare converged to (run/hostprep/last-mode, which prepare writes).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "drivers/common/error.hpp"
#include "drivers/common/pci.hpp"
#include "drivers/model/device_rules.hpp"
#include "drivers/model/mode.hpp"
#include "drivers/seam/host.hpp"

namespace hostprep {

inline constexpr std::string_view kLastModePath = "run/hostprep/last-mode";

std::string readNodeName(const Host& host);  // proc/sys/kernel/hostname, else etc/hostname
// pci.ids under the root (usr/share/misc, usr/share/hwdata); nullopt when there is none.
std::optional<std::string> readPciIds(const Host& host);

// What the last prepare converged to (run/hostprep/last-mode): the node's mode, and on a split
// each GPU's mode. The file holds the mode on its first line (all a file from before splits
// holds, and all one with no split holds), then one "BDF MODE" line per GPU of a split.
struct LastMode {
  Mode mode = Mode::kContainer;
  std::map<Bdf, Mode> gpus;  // empty: every GPU in `mode`
  bool operator==(const LastMode&) const = default;
  // The GPUs' modes as devices rules over `mode` ({bdf: ...} each), for the status.
  std::vector<DeviceRule> rules() const;
};
std::string formatLastMode(const LastMode& m);
// Errors name the line and what is wrong with it; `file` names the file in them.
Result<LastMode> parseLastMode(std::string_view text, std::string_view file);
// nullopt: no file (no prepare since boot). A file that does not parse: an error naming it.
Result<std::optional<LastMode>> readLastMode(const Host& host);
Status writeLastMode(Host& host, const LastMode& m);

}  // namespace hostprep

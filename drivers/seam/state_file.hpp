// The small state files hostprep keeps between runs under <root>/run/hostprep (the last mode
// prepared, the last selection): written through the seam, atomically, by the commands that
// record them (status, config); the journal and the run lock live in the same directory.
#pragma once

#include <string_view>

#include "drivers/common/error.hpp"
#include "drivers/seam/host.hpp"

namespace hostprep {

inline constexpr std::string_view kStateDir = "run/hostprep";

// Writes one of the state files under kStateDir (last-mode, last-selection) atomically, creating
// the directory (0755) when it is missing; a file that already holds `text` is left as it is.
Status writeStateFile(Host& host, std::string_view path, std::string_view text);

}  // namespace hostprep

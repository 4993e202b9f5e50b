// Timed reads and writes of kernel attributes, under RootHost::readAttr and writeAttr: each runs
// in a child process, so that one the kernel does not answer (an unbind waiting for a driver's
// remove(), a driver_override read waiting for the device lock) cannot hang hostprep; the child
// is left in the kernel and collected later (reapStrayChildren, host.hpp). Internal to the seam:
// the paths are resolved already (RootHost refuses an unsafe host path and prefixes its root).
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "drivers/common/error.hpp"

namespace hostprep {

// Writes `data` with one write(2); ETIMEDOUT when it has not returned in `timeout`.
Status timedWrite(const std::string& path, std::string_view data,
                  std::chrono::milliseconds timeout);
// Reads at most 4 KiB (EFBIG beyond); ETIMEDOUT when the read has not returned in `timeout`.
Result<std::string> timedRead(const std::string& path, std::chrono::milliseconds timeout);

}  // namespace hostprep

// Names that become parts of paths: BDFs, driver and module names, vGPU type names, kernel
// releases, config paths. Every name from the command line, a config file, a journal or the
// kernel itself is checked here before it is joined into a host path, so "../", "/", NUL and
// overlong names are errors that name the input instead of a write somewhere else.
#pragma once

#include <string>
#include <string_view>

#include "drivers/common/error.hpp"

namespace hostprep {

// The longest name hostprep puts into one path component (NAME_MAX).
inline constexpr size_t kMaxNameLength = 255;

// Why `name` is not safe as one path component, or empty when it is: 1..maxLen bytes, no '/',
// no NUL or other control byte, not "." or "..".
std::string pathComponentProblem(std::string_view name, size_t maxLen = kMaxNameLength);
inline bool isSafePathComponent(std::string_view name, size_t maxLen = kMaxNameLength) {
  return pathComponentProblem(name, maxLen).empty();
}

// Why `path` is not a safe host path, or empty when it is: no NUL or control byte, no ".."
// component, at most 4095 bytes. Host::resolve's callers check it (the last line of defence).
std::string hostPathProblem(std::string_view path);

// Untrusted text for a message: printable ASCII as is, other bytes as \xNN, cut at 80 bytes.
std::string quoteUntrusted(std::string_view s);

// "<what>: '<name>' is not a driver name: <reason>" (exit 2). Driver and module names are
// [A-Za-z0-9_-], 1..64 bytes (isValidModuleName).
Status checkDriverName(std::string_view what, std::string_view name);
// "<what>: '<name>' is not a safe name: <reason>" (exit 2), for names without a tighter rule
// (vGPU type directory names, mdev UUIDs, config file names).
Status checkPathComponent(std::string_view what, std::string_view name,
                          size_t maxLen = kMaxNameLength);
// A file path from the command line or a config file (absolute or relative): no NUL or control
// byte, no ".." component, at most 4095 bytes (exit 2 naming the option).
Status checkConfigPath(std::string_view what, std::string_view path);

// A kernel release as uname prints it ("6.1.0-18-amd64"): [A-Za-z0-9._+~-], 1..64 bytes, not
// "." or "..". It names lib/modules/<release>.
bool isValidKernelRelease(std::string_view release);

}  // namespace hostprep

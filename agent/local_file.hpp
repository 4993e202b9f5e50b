// Files the user names on the command line, and the one rule they follow:
// - a host file (--config, status --write and --pci-ids, prepare --vgpu-config, and the config's
//   vgpu.config-file and status.path) is a host path: absolute, without "..", read and written
//   under --root through the Host seam, like every other host path (parseHostFilePath checks the
//   name; a relative path is refused, since the current directory is on the machine hostprep
//   runs on, not on the host under --root);
// - check-node's inputs are cluster documents (kubectl and hostprep output), not host state: read
//   on this machine as given, relative paths from the current directory, "-" for standard input;
//   check-node reads no host and ignores --root.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "drivers/common/error.hpp"
#include "drivers/seam/host.hpp"

namespace hostprep {

// How such a file is named in messages: "standard input" for "-", else the path.
std::string localFileName(const std::string& path);

// Reads a whole file, or standard input for "-", up to `cap` bytes. Errors (exit 2) name the
// file: "<path>: cannot open" and "<name>: cannot read" with errno, "<name>: larger than <cap>"
// ("1 GiB") with EFBIG.
Result<std::string> readLocalFile(const std::string& path, size_t cap);

// Where a host path was looked for, for messages: "" when --root is /, else
// " under --root /host (read as /host/etc/hostprep/vgpu.yaml)".
std::string underRoot(const Host& host, std::string_view path);

// Reads a host file the user named with `option` ("--vgpu-config"), up to `cap` bytes. Errors exit
// 2 and say where hostprep looked: "--vgpu-config: cannot read /etc/hostprep/vgpu.yaml under
// --root /host (read as /host/etc/hostprep/vgpu.yaml)" with errno (no such file, a directory),
// "... larger than 1 MiB" with EFBIG.
Result<std::string> readHostFile(const Host& host, std::string_view option, std::string_view path,
                                 size_t cap);

}  // namespace hostprep

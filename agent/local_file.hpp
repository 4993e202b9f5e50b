// Files the user names on the command line (check-node's inputs, --vgpu-config, --pci-ids). They
// are read on this machine as given, not under --root: they are inputs, not host state, so they do
// not go through the Host seam.
#pragma once

#include <cstddef>
#include <string>

#include "drivers/error.hpp"

namespace hostprep {

// How such a file is named in messages: "standard input" for "-", else the path.
std::string localFileName(const std::string& path);

// Reads a whole file, or standard input for "-", up to `cap` bytes. Errors (exit 2) name the
// file: "<path>: cannot open" and "<name>: cannot read" with errno, "<name>: larger than <cap>"
// ("1 GiB") with EFBIG.
Result<std::string> readLocalFile(const std::string& path, size_t cap);

}  // namespace hostprep

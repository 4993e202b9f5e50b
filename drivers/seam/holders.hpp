// Who holds a device: processes with open file descriptors on matching device nodes, found by
// scanning <root>/proc/*/fd the way fuser does.
#pragma once

#include <string>
#include <vector>

#include "drivers/seam/host.hpp"

namespace hostprep {

struct Holder {
  int pid = 0;
  std::string comm;
  std::string node;              // "/dev/nvidia0"
  std::string describe() const;  // "pid 4242 (nvidia-persistenced) holds /dev/nvidia0"
};

// Processes holding a node that matches one of the globs ("/dev/nvidia*", "/dev/vfio/12").
std::vector<Holder> findHolders(const Host& host, const std::vector<std::string>& globs);

// The same in two halves, so the scan of /proc can run while the plan that names the globs is
// made (agent/converge.cpp): every open descriptor on a node under /dev/ of every process but
// this one, then those that match.
struct OpenNode {
  int pid = 0;
  std::string node;  // the descriptor's target, "/dev/nvidia0"
};
std::vector<OpenNode> openDeviceNodes(const Host& host);
std::vector<Holder> holdersAmong(const Host& host, const std::vector<OpenNode>& open,
                                 const std::vector<std::string>& globs);

}  // namespace hostprep

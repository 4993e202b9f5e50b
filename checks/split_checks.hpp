// The checks of a mixed node, whose GPUs hostprep splits between modes and declares so through its
// NFD labels (feature.node.kubernetes.io/hostprep.desired-mode=mixed, hostprep.gpus.<mode>=N):
// the split read from the labels, and the node's resources against it.
#pragma once

#include "checks/node_checks.hpp"

namespace hostprep {

// 1b. The split a mixed node declares (n.split), or split-invalid when the labels cannot be one.
void readSplit(NodeResult& n, const NodeFacts& f);
// 3b. A split node's resources against its declared split, instead of checkResources.
void checkSplit(NodeResult& n, const NodeFacts& f);

}  // namespace hostprep

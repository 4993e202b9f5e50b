// The KubeVirt check of check-node: every sandbox resource a node advertises is permitted in the
// KubeVirt CR's permittedHostDevices, as an external resource, with a selector that matches the
// device; the feature gates the GPU workloads need are on.
#pragma once

#include "checks/check_node.hpp"
#include "checks/cluster_inputs.hpp"

namespace hostprep {

// Adds node findings to report.nodes and cluster findings to report.clusterFindings.
void checkKubeVirt(CheckNodeReport& report, const KubeVirtView& kv, const Statuses& statuses);

}  // namespace hostprep

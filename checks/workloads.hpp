// The workload check of check-node: what VMs and pods ask for (VirtualMachine,
// VirtualMachineInstance, Pod and pod templates) against what the nodes advertise and what the
// KubeVirt CR permits.
#pragma once

#include <vector>

#include "checks/check_node.hpp"
#include "checks/cluster_inputs.hpp"

namespace hostprep {

// Adds cluster findings to report.clusterFindings; kubevirt may be null (no --kubevirt).
void checkWorkloads(CheckNodeReport& report, const std::vector<Document>& workloads,
                    const KubeVirtView* kubevirt);

}  // namespace hostprep

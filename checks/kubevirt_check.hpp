// The KubeVirt check of check-node: every sandbox resource a node advertises is permitted in the
// KubeVirt CR's permittedHostDevices, as an external resource, with a selector that matches the
// device; the feature gates the GPU workloads need are on.
#pragma once

#include "checks/check_node.hpp"
#include "checks/cluster_inputs.hpp"

namespace hostprep {

// The JSON merge patch (RFC 7386, kubectl patch --type merge) that adds `pci` and `mdev` entries
// to the CR's permittedHostDevices lists: a merge patch replaces a list whole, so each list it
// names carries the CR's entries first. nullopt when there is nothing to add.
std::optional<nlohmann::json> permittedDevicesPatch(const KubeVirtView& kv,
                                                    const std::vector<nlohmann::json>& pci,
                                                    const std::vector<nlohmann::json>& mdev);

// Adds node findings to report.nodes and cluster findings to report.clusterFindings; the
// resources advertised but not permitted also get one cluster finding kubevirt-permit-patch
// whose fix is the kubectl patch that permits them all.
void checkKubeVirt(CheckNodeReport& report, const KubeVirtView& kv, const Statuses& statuses);

}  // namespace hostprep

// check-node's inputs, read defensively into small views: the Nodes, the ClusterPolicy, the
// KubeVirt CR and the hosts' status documents. A document of the wrong shape (a Pod among the
// nodes, a status document without a node name) is a usage error naming it; a field of the wrong
// type is read as absent.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "checks/check_node.hpp"
#include "drivers/common/pci.hpp"

namespace hostprep {

// The ClusterPolicy's sandbox settings (the operator's api/nvidia/v1/clusterpolicy_types.go).
struct Policy {
  PolicyView view;
  std::string name = "cluster-policy";

  // "the ClusterPolicy cluster-policy (policy.json)", or "the ClusterPolicy" when assumed.
  std::string ref() const;
};
// An invalid defaultWorkload is not a usage error but a cluster finding, added to `cluster`.
Result<Policy> readPolicy(const std::optional<Document>& doc, std::vector<Finding>& cluster);

// One host's 'hostprep status --output json' document (agent/status.schema.json), as far as
// check-node uses it. The snake_case names of the first reader ("node", "actual_mode", "vendor",
// "device") are still read where the schema's names are absent.
struct StatusView {
  std::string source;
  std::string node;
  std::optional<Mode> actualMode;  // nullopt: absent, or not one of the three modes
  bool hasAdvertised = false;
  std::vector<std::pair<std::string, int64_t>> advertised;
  std::optional<int> gpus;             // devices with role "gpu"
  std::vector<uint16_t> gpuDeviceIds;  // NVIDIA device ids of those GPUs
  std::vector<Bdf> vfioDevices;        // the devices on vfio-pci (or nvgrace_gpu_vfio_pci)
  // The document's permittedHostDevices (absent in documents of older versions), by resource
  // name: the selectors the host itself saw, preferred to any guess from the resource name.
  std::map<std::string, PciId> permittedPci;         // pciHostDevices: pciVendorSelector
  std::map<std::string, std::string> permittedMdev;  // mediatedDevices: mdevNameSelector
  // Devices that no longer answer ("responsive": false), "BDF" or "BDF (D3cold)", and the message
  // of a DevicesResponsive condition that is False.
  std::vector<std::string> unresponsive;
  std::vector<Bdf> unresponsiveBdfs;
  std::optional<std::string> notResponding;
};

// The status documents, and which one belongs to a node (the first for that node).
struct Statuses {
  std::vector<StatusView> all;
  std::unordered_map<std::string, size_t> byNode;

  const StatusView* find(const std::string& node) const;
};
Result<Statuses> readStatuses(const std::vector<Document>& docs);

// One entry of the KubeVirt CR's spec.configuration.permittedHostDevices.
struct HostDeviceEntry {
  std::string resource;
  bool mediated = false;  // mediatedDevices, else pciHostDevices
  bool external = false;
  std::optional<std::string> selector;  // pciVendorSelector or mdevNameSelector
};

struct KubeVirtView {
  std::string source;
  std::string name = "kubevirt";        // metadata.name, for the patch check-node prints
  std::string namespace_ = "kubevirt";  // metadata.namespace
  // spec.configuration.permittedHostDevices.pciHostDevices and .mediatedDevices as given (empty
  // arrays when absent): a JSON merge patch replaces a list whole (RFC 7386), so the patch that
  // adds entries carries these too.
  nlohmann::json pciHostDevices = nlohmann::json::array();
  nlohmann::json mediatedDevices = nlohmann::json::array();
  std::vector<HostDeviceEntry> entries;
  std::vector<std::string> gates;
  // spec.configuration.mediatedDevicesConfiguration, when set: its keys (mediatedDeviceTypes,
  // nodeMediatedDeviceTypes, ...).
  std::optional<std::vector<std::string>> mdevConfig;

  const HostDeviceEntry* find(std::string_view resource) const;
  bool gate(std::string_view g) const;
};
Result<std::optional<KubeVirtView>> readKubeVirt(const std::optional<Document>& doc);

// A Node document, found in the node inputs (each one checked to be a named Node); or, with
// items set, the items of a List read by parseNodeDocuments, every one a named Node, to be read
// one at a time (NodeItems::forEach), each then named "<source> (item N)".
struct NodeDoc {
  const nlohmann::json* body;
  std::string source;
  const NodeItems* items = nullptr;
};
Result<std::vector<NodeDoc>> collectNodes(const std::vector<Document>& docs);

// A node's metadata.labels; a label whose value is not a scalar reads as absent.
class Labels {
 public:
  explicit Labels(const nlohmann::json* l) : l_(l && l->is_object() ? l : nullptr) {}
  std::optional<std::string> get(std::string_view key) const;
  bool is(std::string_view key, std::string_view value) const { return get(key) == value; }
  const nlohmann::json* raw() const { return l_; }

 private:
  const nlohmann::json* l_;
};

// The nvidia.com/ resources of status.capacity and status.allocatable into n.resources, sorted by
// name; a count that is not a whole number becomes a quantity-invalid finding in `bad`.
void readResources(NodeResult& n, const nlohmann::json& node, std::vector<Finding>& bad);

}  // namespace hostprep

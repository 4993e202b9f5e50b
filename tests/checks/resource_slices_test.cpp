// The DRA check: gpu.nvidia.com devices in ResourceSlices against the nodes' modes and the hosts'
// status documents, resource.k8s.io/v1 and v1beta1 alike.
#include "checks/resource_slices.hpp"

#include <catch2/catch.hpp>

#include "tests/checks/check_node_support.hpp"

using namespace hostprep;
using namespace hostprep::test;

TEST_CASE("ResourceSlices are read in v1 and v1beta1, other drivers skipped", "[check-node]") {
  auto v1 = readResourceSlices(load("dra/resourceslices.json"));
  REQUIRE(v1);
  REQUIRE(v1->size() == 4);  // example.com's slice is not read
  CHECK(v1->at(0).slice == "gpu-a-gpu.nvidia.com-7xk2p");
  CHECK(v1->at(0).node == "gpu-a");
  CHECK(v1->at(0).name == "gpu-0");
  CHECK(v1->at(0).type == std::optional<std::string>("gpu"));
  CHECK(v1->at(2).type == std::optional<std::string>("vfio"));
  CHECK(v1->at(2).pciBusId == std::optional<std::string>("0000:3b:00.0"));

  auto beta = readResourceSlices(load("dra/resourceslices-broken-v1beta1.yaml"));
  REQUIRE(beta);
  REQUIRE(beta->size() == 5);
  CHECK(beta->at(0).type == std::optional<std::string>("vfio"));
  CHECK(beta->at(0).pciBusId == std::optional<std::string>("0000:17:00.0"));
  CHECK(beta->at(4).node == "gpu-z");
  CHECK_FALSE(beta->at(4).pciBusId);

  // A name qualified by the driver's domain is the same attribute.
  Document q{"q.json", nlohmann::json::parse(R"({"kind": "ResourceSlice", "spec": {
      "driver": "gpu.nvidia.com", "nodeName": "n",
      "devices": [{"name": "d", "attributes": {"gpu.nvidia.com/type": {"string": "vfio"}}}]}})")};
  auto qualified = readResourceSlices({q});
  REQUIRE(qualified);
  REQUIRE(qualified->size() == 1);
  CHECK(qualified->front().type == std::optional<std::string>("vfio"));
  CHECK(qualified->front().slice == "q.json");

  auto bad = readResourceSlices(load("clean/nodes.json"));
  REQUIRE_FALSE(bad);
  CHECK(bad.error().exit == Exit::kUsage);
  CHECK(bad.error().message == "clean/nodes.json (item 1): a Node, not a ResourceSlice");
  CHECK(bad.error().advice == "pass 'kubectl get resourceslices -o json'");
}

TEST_CASE("DRA devices on the clean cluster agree with the modes and the host's status",
          "[check-node]") {
  auto in = cleanInput();
  in.resourceSlices = load("dra/resourceslices.json");
  auto r = check(in);
  CHECK(ids(r, Severity::kInfo).empty());
}

TEST_CASE(
    "vfio devices off passthrough nodes, gpu devices on them, vfio devices hostprep did not "
    "move",
    "[check-node]") {
  auto in = cleanInput();
  in.workloads.clear();
  in.resourceSlices = load("dra/resourceslices-broken-v1beta1.yaml");
  auto r = check(in);
  CHECK(ids(r, Severity::kInfo) ==
        std::vector<std::string>{"dra-vfio-wrong-mode@gpu-a", "dra-gpu-on-passthrough@gpu-b",
                                 "dra-vfio-not-prepared@gpu-b", "dra-node-unknown@cluster"});
  CHECK(find(r, "dra-vfio-wrong-mode", "gpu-a")->message ==
        "the DRA driver gpu.nvidia.com publishes 1 device of type vfio on this node (gpu-vfio-0 "
        "(0000:17:00.0), ResourceSlice gpu-a-gpu.nvidia.com-7xk2p), but the node's mode is "
        "container: claims of DeviceClass vfio.gpu.nvidia.com land on GPUs the host driver should "
        "hold");
  CHECK_THAT(find(r, "dra-gpu-on-passthrough", "gpu-b")->message,
             Catch::StartsWith("the DRA driver gpu.nvidia.com publishes 1 device of type gpu on "
                               "this vm-passthrough node (gpu-0 (0000:3b:00.0), ResourceSlice "
                               "gpu-b-gpu.nvidia.com-q9w4d)"));
  const auto* np = find(r, "dra-vfio-not-prepared", "gpu-b");
  REQUIRE(np);
  CHECK(np->severity == Severity::kError);
  CHECK(np->message ==
        "the DRA driver publishes gpu-vfio-2 (0000:af:00.0) as type vfio, but its "
        "resource.kubernetes.io/pciBusID is not a device hostprep moved to vfio-pci on this node "
        "(clean/status-gpu-b.json: 0000:3b:00.0, 0000:86:00.0): a VM claiming it gets a GPU that "
        "is not prepared for passthrough");
  CHECK(find(r, "dra-node-unknown", "")->severity == Severity::kInfo);

  SECTION("without the host's status the devices hostprep moved are unknown: not judged") {
    in.statuses.clear();
    auto r2 = check(in);
    CHECK_FALSE(find(r2, "dra-vfio-not-prepared", "gpu-b"));
    CHECK(find(r2, "dra-gpu-on-passthrough", "gpu-b"));
  }
  SECTION("a device the status shows still on the host driver is not moved") {
    in.statuses.front().body["devices"][1]["driver"] = "nvidia";
    auto r2 = check(in);
    REQUIRE(find(r2, "dra-vfio-not-prepared", "gpu-b"));
    CHECK_THAT(find(r2, "dra-vfio-not-prepared", "gpu-b")->message,
               Catch::StartsWith("the DRA driver publishes gpu-vfio-1 (0000:86:00.0), gpu-vfio-2 "
                                 "(0000:af:00.0) as type vfio, but their"));
  }
}

TEST_CASE("the driver's pcieBusID, uuid and parentUUID, and the devices of each node",
          "[check-node][dra]") {
  auto devs = readResourceSlices(load("dra-only/resourceslices.json"));
  REQUIRE(devs);
  REQUIRE(devs->size() == 6);
  CHECK(devs->at(0).pciBusId == std::optional<std::string>("0000:18:00.0"));  // pcieBusID
  CHECK(devs->at(0).uuid == std::optional<std::string>("GPU-4f6a1c2e-8d3b-5a7f-9e21-0c4b7d8e1a35"));
  CHECK(devs->at(4).type == std::optional<std::string>("vfio"));
  CHECK(devs->at(4).pciBusId == std::optional<std::string>("0000:17:00.0"));
  auto byNode = draDevicesByNode(*devs);
  REQUIRE(byNode.size() == 2);
  CHECK(byNode.at("dra-c").gpus == 4);
  CHECK(byNode.at("dra-c").vfio == 0);
  CHECK(byNode.at("dra-c").slice == "dra-c-gpu.nvidia.com-x7t2k");
  CHECK(byNode.at("dra-p").gpus == 0);
  CHECK(byNode.at("dra-p").vfio == 2);

  // A GPU published whole and as MIG devices counts once; a mig device without parentUUID
  // leaves the count unknown; other types are no GPU.
  std::vector<SliceDevice> mixed{
      {"s", "n", "gpu-0", "gpu", std::nullopt, "GPU-a", std::nullopt},
      {"s", "n", "gpu-0-mig-9-0-4", "mig", std::nullopt, "MIG-1", "GPU-a"},
      {"s", "n", "gpu-1-mig-9-0-4", "mig", std::nullopt, "MIG-2", "GPU-b"},
      {"s", "n", "gpu-1-mig-9-4-4", "mig", std::nullopt, "MIG-3", "GPU-b"},
      {"s", "n", "channel-0", "channel", std::nullopt, std::nullopt, std::nullopt}};
  auto n = draDevicesByNode(mixed).at("n");
  CHECK(n.gpus == 2);
  CHECK(n.gpusKnown);
  mixed[3].parentUuid.reset();
  CHECK_FALSE(draDevicesByNode(mixed).at("n").gpusKnown);
}

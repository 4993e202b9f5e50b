// The workload check: what VMs and pods ask for against what the nodes advertise.
#include <catch2/catch.hpp>

#include "checks/check_node.hpp"
#include "tests/checks/check_node_support.hpp"

using namespace hostprep;
using namespace hostprep::test;

TEST_CASE("a VMI asking nvidia.com/GA102GL_A10 where no node has it", "[check-node]") {
  auto in = withCleanPolicy("broken/nodes-no-a10.json");
  in.workloads = load("broken/vmi-a10.yaml");
  auto r = check(in);
  const auto* f = find(r, "request-unsatisfiable", "");
  REQUIRE(f);
  CHECK(f->severity == Severity::kError);
  CHECK(f->subject == "VirtualMachineInstance default/a10-vm");
  CHECK(f->message ==
        "VirtualMachineInstance default/a10-vm asks for nvidia.com/GA102GL_A10: will stay Pending "
        "forever: no node advertises nvidia.com/GA102GL_A10; nodes advertise "
        "nvidia.com/GH100_H100_PCIE (gpu-h), nvidia.com/NVIDIA_A10-12Q (gpu-c), nvidia.com/gpu "
        "(gpu-a)");
  CHECK(ids(r, Severity::kWarning) == std::vector<std::string>{"request-unsatisfiable@cluster"});
  CHECK(summaryLine(r) == "3 nodes, 3 ok; 1 cluster error");
}

TEST_CASE("a pod asking nvidia.com/gpu when only sandbox nodes have GPUs is named",
          "[check-node]") {
  CheckNodeInput in;
  auto nodes = load("clean/nodes.json");
  nodes.front().body["items"].erase(0);  // drop the container node
  in.nodes = nodes;
  in.clusterPolicy = one("clean/cluster-policy.yaml");
  in.workloads = load("clean/workloads.yaml");
  auto r = check(in);
  const auto* f = find(r, "request-gpu-only-sandbox", "");
  REQUIRE(f);
  CHECK(f->subject == "Pod default/cuda-job");
  CHECK_THAT(
      f->message,
      Catch::Contains("Pod default/cuda-job asks for nvidia.com/gpu: will stay Pending forever"));
  CHECK_THAT(f->message, Catch::Contains("sandbox nodes (gpu-b vm-passthrough, gpu-c vm-vgpu)"));
  CHECK(ids(r, Severity::kWarning) == std::vector<std::string>{"request-gpu-only-sandbox@cluster"});
}

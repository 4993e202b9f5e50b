// A mixed node's checks: the split hostprep declares through its NFD labels, read and checked
// against the resources the node advertises; each broken node caught with the right id, on the
// right node, with the right severity.
#include <catch2/catch.hpp>

#include "checks/check_node.hpp"
#include "tests/checks/check_node_support.hpp"

using namespace hostprep;
using namespace hostprep::test;

namespace {

constexpr const char* kSplitS = "the declared split (container=2, vm-passthrough=2)";

CheckNodeInput mixedInput() {
  auto in = withCleanPolicy("mixed/nodes.yaml");
  auto cfg = readVgpuConfigs(text("clean/vgpu-config.yaml"), "vgpu-config.yaml");
  REQUIRE(cfg);
  in.vgpuConfigs = *cfg;
  return in;
}

nlohmann::json& node(CheckNodeInput& in, int i) { return in.nodes.front().body["items"][i]; }

}  // namespace

TEST_CASE("a split node that advertises its split passes", "[check-node][split]") {
  auto in = mixedInput();
  auto r = check(in);
  CHECK(ids(r, Severity::kInfo).empty());
  CHECK(summaryLine(r) == "2 nodes, 2 ok");
  REQUIRE(r.nodes[0].split);
  CHECK(r.nodes[0].split->describe() == "container=2, vm-passthrough=2");
  CHECK(r.nodes[0].mode == Mode::kContainer);  // the workload label: the node's default
  REQUIRE(r.nodes[1].split);
  CHECK(r.nodes[1].split->describe() == "vm-passthrough=1, vm-vgpu=1");
  auto j = reportJson(r);
  CHECK(j["nodes"][0]["split"] == nlohmann::json{{"container", 2}, {"vm-passthrough", 2}});
  CHECK(j["nodes"][1]["split"] == nlohmann::json{{"vm-passthrough", 1}, {"vm-vgpu", 1}});
  CHECK_THAT(
      reportText(r),
      Catch::Contains("gpu-mx: container (label), split container=2, vm-passthrough=2: ok\n"));
}

TEST_CASE("two kinds without a declared split stay an error", "[check-node][split]") {
  auto in = mixedInput();
  node(in, 0)["metadata"]["labels"].erase("feature.node.kubernetes.io/hostprep.desired-mode");
  auto r = check(in);
  CHECK_FALSE(r.nodes[0].split);
  CHECK(reportJson(r)["nodes"][0]["split"].is_null());
  CHECK(find(r, "mixed-resource-kinds", "gpu-mx"));
  CHECK(find(r, "resource-wrong-kind", "gpu-mx"));
  // The sandbox operands are another mode's again.
  CHECK(find(r, "deploy-label-conflict", "gpu-mx"));
  // A node that declares one mode is not a split either, whatever its per-mode counts say.
  node(in, 0)["metadata"]["labels"]["feature.node.kubernetes.io/hostprep.desired-mode"] =
      "container";
  auto r2 = check(in);
  CHECK(find(r2, "mixed-resource-kinds", "gpu-mx"));
}

TEST_CASE("a split node with the wrong counts", "[check-node][split]") {
  auto in = mixedInput();
  node(in, 0)["status"]["allocatable"]["nvidia.com/gpu"] = "1";
  node(in, 0)["status"]["capacity"]["nvidia.com/gpu"] = "1";
  node(in, 0)["status"]["allocatable"]["nvidia.com/GA102GL_A10"] = "3";
  node(in, 0)["status"]["capacity"]["nvidia.com/GA102GL_A10"] = "3";
  node(in, 1)["status"]["allocatable"].erase("nvidia.com/NVIDIA_A10-12Q");
  node(in, 1)["status"]["capacity"].erase("nvidia.com/NVIDIA_A10-12Q");
  auto r = check(in);
  const auto& f = r.nodes[0].findings;
  REQUIRE(f.size() == 2);
  CHECK(f[0].id == "split-count-mismatch");
  CHECK(f[0].severity == Severity::kError);
  CHECK(f[0].resource == "nvidia.com/gpu");
  CHECK(f[0].message ==
        std::string("nvidia.com/gpu has 1 allocatable but ") + kSplitS + " has 2 container GPUs");
  CHECK(f[1].id == "split-count-mismatch");
  CHECK(f[1].message ==
        std::string("the passthrough resources (nvidia.com/GA102GL_A10: 3) sum to 3 allocatable "
                    "but ") +
            kSplitS + " has 2 vm-passthrough GPUs");
  const auto* v = find(r, "split-count-mismatch", "gpu-mv");
  REQUIRE(v);
  CHECK(v->message ==
        "no vGPU type resource is allocatable but the declared split (vm-passthrough=1, "
        "vm-vgpu=1) has 1 vm-vgpu GPU");

  SECTION("time-slicing multiplies the container count") {
    auto in2 = mixedInput();
    node(in2, 0)["metadata"]["labels"]["nvidia.com/gpu.replicas"] = "4";
    auto r2 = check(in2);
    const auto* t = find(r2, "split-count-mismatch", "gpu-mx");
    REQUIRE(t);
    CHECK(t->message == std::string("nvidia.com/gpu has 2 allocatable but ") + kSplitS +
                            " has 2 container GPUs × 4 replicas");
    node(in2, 0)["status"]["allocatable"]["nvidia.com/gpu"] = "8";
    node(in2, 0)["status"]["capacity"]["nvidia.com/gpu"] = "8";
    CHECK(ids(check(in2), Severity::kWarning).empty());
  }
  SECTION("the vGPU count is the config's, on the split's vm-vgpu GPUs only") {
    auto in2 = mixedInput();
    node(in2, 1)["status"]["allocatable"]["nvidia.com/NVIDIA_A10-12Q"] = "4";
    node(in2, 1)["status"]["capacity"]["nvidia.com/NVIDIA_A10-12Q"] = "4";
    CHECK(find(check(in2), "vgpu-count-mismatch", "gpu-mv"));
  }
}

TEST_CASE("a split node advertising a kind its split does not declare", "[check-node][split]") {
  auto in = mixedInput();
  node(in, 0)["status"]["capacity"]["nvidia.com/NVIDIA_A10-12Q"] = "2";
  node(in, 0)["status"]["allocatable"]["nvidia.com/NVIDIA_A10-12Q"] = "2";
  node(in, 1)["status"]["capacity"]["nvidia.com/gpu"] = "0";  // registered, no device: stale
  auto r = check(in);
  const auto* f = find(r, "split-undeclared-kind", "gpu-mx");
  REQUIRE(f);
  CHECK(f->severity == Severity::kError);
  CHECK(f->resource == "nvidia.com/NVIDIA_A10-12Q");
  CHECK(f->message ==
        std::string("advertises nvidia.com/NVIDIA_A10-12Q (2), a vGPU resource, but ") + kSplitS +
            " has no vm-vgpu GPU");
  CHECK_FALSE(find(r, "split-undeclared-kind", "gpu-mv"));
  CHECK(find(r, "resource-stale", "gpu-mv"));
  CHECK(ids(r, Severity::kWarning) == std::vector<std::string>{"split-undeclared-kind@gpu-mx"});
}

TEST_CASE("split labels that cannot be a split", "[check-node][split]") {
  const std::string prefix =
      "feature.node.kubernetes.io/hostprep.desired-mode=mixed declares a split that cannot be: ";
  auto in = mixedInput();
  auto& labels = node(in, 0)["metadata"]["labels"];
  SECTION("container and vm-vgpu") {
    labels.erase("feature.node.kubernetes.io/hostprep.gpus.vm-passthrough");
    labels["feature.node.kubernetes.io/hostprep.gpus.vm-vgpu"] = "2";
    auto r = check(in);
    const auto* f = find(r, "split-invalid", "gpu-mx");
    REQUIRE(f);
    CHECK(f->severity == Severity::kError);
    CHECK(f->message == prefix +
                            "container and vm-vgpu GPUs on one node: the one nvidia module cannot "
                            "be both the datacenter driver and the vGPU manager; the node is "
                            "checked as a container node");
    CHECK_FALSE(r.nodes[0].split);
    // Checked as its one mode, the passthrough resource is the old error again.
    CHECK(find(r, "mixed-resource-kinds", "gpu-mx"));
  }
  SECTION("one mode only") {
    labels.erase("feature.node.kubernetes.io/hostprep.gpus.vm-passthrough");
    CHECK(find(check(in), "split-invalid", "gpu-mx")->message ==
          prefix +
              "only container=2 has GPUs: that is one mode; the node is checked as a "
              "container node");
  }
  SECTION("a count that is not one and a mode that is not one") {
    labels["feature.node.kubernetes.io/hostprep.gpus.vm-passthrough"] = "two";
    labels["feature.node.kubernetes.io/hostprep.gpus.vm-passthru"] = "2";
    CHECK(find(check(in), "split-invalid", "gpu-mx")->message ==
          prefix +
              "feature.node.kubernetes.io/hostprep.gpus.vm-passthrough='two' is not a GPU count; "
              "feature.node.kubernetes.io/hostprep.gpus.vm-passthru names no mode (container, "
              "vm-passthrough, vm-vgpu); the node is checked as a container node");
  }
}

TEST_CASE("the vfio-manager on a split node", "[check-node][split]") {
  auto in = mixedInput();
  node(in, 0)["metadata"]["labels"]["nvidia.com/gpu.deploy.vfio-manager"] = "true";
  auto r = check(in);
  const auto* f = find(r, "deploy-label-conflict", "gpu-mx");
  REQUIRE(f);
  CHECK(f->message ==
        "nvidia.com/gpu.deploy.vfio-manager=true on a node split container=2, vm-passthrough=2: "
        "the vfio-manager binds every GPU of the node to vfio-pci, the other mode's GPUs too");
  CHECK(ids(r, Severity::kWarning) == std::vector<std::string>{"deploy-label-conflict@gpu-mx"});
}

TEST_CASE("a split node's status document: mode mixed, both resource sets", "[check-node][split]") {
  auto in = mixedInput();
  auto status = load("clean/status-gpu-b.json");
  auto& st = status.front().body;
  st["node"] = "gpu-mx";
  st["actual_mode"] = "mixed";
  st["advertised"] = {{"nvidia.com/gpu", 2}, {"nvidia.com/GA102GL_A10", 2}};
  in.statuses = status;
  CHECK(ids(check(in), Severity::kInfo).empty());
  // The host prepared three for VMs, the node shows two.
  st["advertised"]["nvidia.com/GA102GL_A10"] = 3;
  in.statuses = status;
  auto r = check(in);
  CHECK(ids(r, Severity::kWarning) ==
        std::vector<std::string>{"status-advertised-mismatch@gpu-mx"});
}

// A cluster whose GPUs NVIDIA's DRA driver publishes, the device plugin off: no nvidia.com/*
// extended resource, the ResourceSlices are the advertisement (tests/fixtures/cluster/dra-only).

TEST_CASE("a split node whose GPUs the DRA driver publishes", "[check-node][split][dra]") {
  // gpu-mx with the device plugins off: its 2 + 2 GPUs in a v1beta1 slice instead.
  auto in = mixedInput();
  auto& mx = node(in, 0)["status"];
  for (const char* part : {"capacity", "allocatable"}) {
    mx[part].erase("nvidia.com/gpu");
    mx[part].erase("nvidia.com/GA102GL_A10");
  }
  auto dev = [](const std::string& name, const std::string& type, const std::string& bus) {
    return nlohmann::json{{"name", name},
                          {"basic",
                           {{"attributes",
                             {{"type", {{"string", type}}},
                              {"productName", {{"string", "NVIDIA A10"}}},
                              {"resource.kubernetes.io/pcieRoot", {{"string", "pci0000:00"}}},
                              {"pcieBusID", {{"string", bus}}}}}}}};
  };
  nlohmann::json slice{
      {"apiVersion", "resource.k8s.io/v1beta1"},
      {"kind", "ResourceSlice"},
      {"metadata", {{"name", "gpu-mx-gpu.nvidia.com-b7r2c"}}},
      {"spec",
       {{"driver", "gpu.nvidia.com"},
        {"nodeName", "gpu-mx"},
        {"pool", {{"generation", 1}, {"name", "gpu-mx"}, {"resourceSliceCount", 1}}},
        {"devices",
         {dev("gpu-0", "gpu", "0000:17:00.0"), dev("gpu-1", "gpu", "0000:31:00.0"),
          dev("gpu-vfio-0", "vfio", "0000:b1:00.0"), dev("gpu-vfio-1", "vfio", "0000:ca:00.0")}}}}};
  in.resourceSlices = {Document{"slices.yaml", slice}};
  auto r = check(in);
  CHECK(ids(r, Severity::kInfo).empty());

  auto& devices = in.resourceSlices.front().body["spec"]["devices"];
  SECTION("one vm-passthrough GPU short") {
    devices.erase(3);
    auto r2 = check(in);
    CHECK(ids(r2, Severity::kInfo) == std::vector<std::string>{"split-count-mismatch@gpu-mx"});
    CHECK(find(r2, "split-count-mismatch", "gpu-mx")->message ==
          std::string("the DRA driver gpu.nvidia.com publishes 1 device of type vfio "
                      "(ResourceSlice gpu-mx-gpu.nvidia.com-b7r2c) but ") +
              kSplitS + " has 2 vm-passthrough GPUs");
  }
  SECTION("one GPU too many on the host driver") {
    devices.push_back(dev("gpu-2", "gpu", "0000:4b:00.0"));
    auto r2 = check(in);
    CHECK(ids(r2, Severity::kInfo) == std::vector<std::string>{"split-count-mismatch@gpu-mx"});
    CHECK(find(r2, "split-count-mismatch", "gpu-mx")->message ==
          std::string("the DRA driver gpu.nvidia.com publishes 3 GPUs (devices of type gpu or "
                      "mig, ResourceSlice gpu-mx-gpu.nvidia.com-b7r2c) but ") +
              kSplitS + " has 2 container GPUs");
  }
  SECTION("without the slices nothing counts the split's GPUs") {
    in.resourceSlices.clear();
    auto r2 = check(in);
    CHECK(ids(r2, Severity::kInfo) ==
          std::vector<std::string>{"split-count-mismatch@gpu-mx", "split-count-mismatch@gpu-mx"});
  }
}

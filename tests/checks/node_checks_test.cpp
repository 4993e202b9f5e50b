// The per-node checks: the effective mode, deploy labels, resource kinds and counts, the host's
// status document. Each broken node is caught with the right id, on the right node, with the
// right severity.
#include <catch2/catch.hpp>

#include "checks/check_node.hpp"
#include "tests/checks/check_node_support.hpp"

using namespace hostprep;
using namespace hostprep::test;

TEST_CASE("a passthrough label with nvidia.com/gpu advertised", "[check-node]") {
  auto in = withCleanPolicy("broken/passthrough-with-gpu.json");
  auto r = check(in);
  CHECK(r.exitCode() == 1);
  const auto* f = find(r, "resource-wrong-kind", "gpu-p");
  REQUIRE(f);
  CHECK(f->severity == Severity::kError);
  CHECK(f->resource == "nvidia.com/gpu");
  CHECK(f->message ==
        "advertises nvidia.com/gpu (2), a container resource, but the node's mode is "
        "vm-passthrough: a vm-passthrough node advertises PCI-name resources such as "
        "nvidia.com/GA102GL_A10 and never nvidia.com/gpu");
  REQUIRE(find(r, "mode-resource-missing", "gpu-p"));
  CHECK(find(r, "mode-resource-missing", "gpu-p")->severity == Severity::kError);
  CHECK(ids(r, Severity::kWarning) ==
        std::vector<std::string>{"resource-wrong-kind@gpu-p", "mode-resource-missing@gpu-p"});
  CHECK(summaryLine(r) == "1 node, 0 ok, 1 with errors");
}

TEST_CASE("labels present while the ClusterPolicy disables sandbox workloads", "[check-node]") {
  CheckNodeInput in;
  in.nodes = load("broken/labels-ignored.json");
  in.clusterPolicy = one("broken/cluster-policy-disabled.yaml");
  auto r = check(in);
  const auto* f = find(r, "workload-label-ignored", "gpu-l");
  REQUIRE(f);
  CHECK(f->severity == Severity::kError);
  CHECK_THAT(f->message,
             Catch::StartsWith("label nvidia.com/gpu.workload.config=vm-passthrough is ignored: "
                               "the ClusterPolicy cluster-policy ("));
  CHECK_THAT(f->message,
             Catch::EndsWith("has sandboxWorkloads.enabled=false, so the operator prepares "
                             "every node for containers and never reads the label (no "
                             "event, no warning)"));
  // The node is judged as what it really is: a container node, and as such it is consistent.
  REQUIRE(r.nodes.size() == 2);
  CHECK(r.nodes[1].mode == Mode::kContainer);
  CHECK(r.nodes[1].modeSource == ModeSource::kSandboxDisabled);
  CHECK(ids(r, Severity::kWarning) == std::vector<std::string>{"workload-label-ignored@gpu-l"});

  SECTION("without --cluster-policy the assumption is said, and the mismatch points at it") {
    in.clusterPolicy.reset();
    auto r2 = check(in);
    const auto* a = find(r2, "cluster-policy-assumed", "");
    REQUIRE(a);
    CHECK(a->severity == Severity::kWarning);
    const auto* w = find(r2, "resource-wrong-kind", "gpu-l");
    REQUIRE(w);
    CHECK_THAT(w->fix, Catch::Contains("sandboxWorkloads.enabled=true"));
    CHECK(find(r2, "deploy-label-conflict", "gpu-l"));
    CHECK_FALSE(find(r2, "resource-wrong-kind", "gpu-a"));
  }
}

TEST_CASE("the host's status against the node object", "[check-node]") {
  auto in = cleanInput();
  in.statuses.front().body["advertised"]["nvidia.com/GA102GL_A10"] = 1;
  in.statuses.front().body["actual_mode"] = "container";
  auto r = check(in);
  const auto* f = find(r, "status-advertised-mismatch", "gpu-b");
  REQUIRE(f);
  CHECK_THAT(f->message, Catch::StartsWith("the host expects 1 × nvidia.com/GA102GL_A10 ("));
  CHECK(find(r, "status-mode-mismatch", "gpu-b"));
  in.statuses.front().body["node"] = "gpu-z";
  auto r2 = check(in);
  CHECK(find(r2, "status-node-unknown", ""));
}

TEST_CASE("a status document with a device that no longer answers", "[check-node][reset]") {
  auto in = cleanInput();
  CHECK_FALSE(find(check(in), "device-unresponsive", "gpu-b"));
  SECTION("the device's own fields") {
    auto& dev = in.statuses.front().body["devices"][1];
    dev["responsive"] = false;
    dev["powerState"] = "D3cold";
    auto r = check(in);
    CHECK(r.exitCode() == 1);
    const auto* f = find(r, "device-unresponsive", "gpu-b");
    REQUIRE(f);
    CHECK(f->severity == Severity::kError);
    CHECK_THAT(f->message, Catch::StartsWith("0000:86:00.0 (D3cold) does not answer (config space "
                                             "reads 0xffff) on the host ("));
    CHECK_THAT(
        f->message,
        Catch::EndsWith("): no driver can use it, and a device plugin may still advertise it"));
    CHECK(f->fix ==
          "run 'hostprep recover --devices 0000:86:00.0' on the node; if it still does not answer, "
          "drain the node and reboot it");
  }
  SECTION("the condition alone") {
    in.statuses.front().body["conditions"] =
        nlohmann::json::array({{{"type", "DevicesResponsive"},
                                {"status", "False"},
                                {"reason", "DevicesNotAnswering"},
                                {"message", "0000:3b:00.0 does not answer"}}});
    auto r = check(in);
    const auto* f = find(r, "device-unresponsive", "gpu-b");
    REQUIRE(f);
    CHECK_THAT(f->message,
               Catch::StartsWith("DevicesResponsive is False: 0000:3b:00.0 does not answer on the "
                                 "host ("));
    CHECK_THAT(f->fix, Catch::StartsWith("run 'hostprep recover --devices BDF[,...]' on the node"));
  }
  SECTION("a True condition and answering devices say nothing") {
    in.statuses.front().body["conditions"] = nlohmann::json::array(
        {{{"type", "DevicesResponsive"}, {"status", "True"}, {"message", "2 device(s) answer"}}});
    CHECK_FALSE(find(check(in), "device-unresponsive", "gpu-b"));
  }
}

TEST_CASE("zero allocatable, capacity disagreement, mixed kinds, stale and invalid labels",
          "[check-node]") {
  CheckNodeInput in;
  in.clusterPolicy = one("clean/cluster-policy.yaml");
  auto nodes = load("clean/nodes.json");
  auto& items = nodes.front().body["items"];
  items[0]["status"]["allocatable"]["nvidia.com/gpu"] = "0";          // gpu-a
  items[1]["status"]["allocatable"]["nvidia.com/GA102GL_A10"] = "1";  // gpu-b
  items[1]["status"]["capacity"]["nvidia.com/NVIDIA_A10-12Q"] = "0";  // gpu-b stale
  items[2]["status"]["capacity"]["nvidia.com/GA102GL_A10"] = "1";     // gpu-c mixed
  items[2]["status"]["allocatable"]["nvidia.com/GA102GL_A10"] = "1";
  in.nodes = nodes;
  auto r = check(in);
  CHECK(find(r, "allocatable-zero", "gpu-a"));
  CHECK(find(r, "capacity-allocatable-mismatch", "gpu-b"));
  CHECK(find(r, "capacity-allocatable-mismatch", "gpu-b")->severity == Severity::kWarning);
  CHECK(find(r, "resource-stale", "gpu-b"));
  CHECK(find(r, "resource-stale", "gpu-b")->severity == Severity::kInfo);
  CHECK(find(r, "mixed-resource-kinds", "gpu-c"));
  CHECK(find(r, "resource-wrong-kind", "gpu-c"));

  items[0]["metadata"]["labels"]["nvidia.com/gpu.workload.config"] = "vm-passthru";
  items[0]["status"]["allocatable"]["nvidia.com/gpu"] = "2";
  in.nodes = nodes;
  auto r2 = check(in);
  CHECK(find(r2, "workload-label-invalid", "gpu-a"));
  CHECK(r2.nodes[0].mode == Mode::kContainer);
  CHECK(r2.nodes[0].modeSource == ModeSource::kInvalidLabel);
}

TEST_CASE("a node advertised by the DRA driver's ResourceSlices has its mode's resource",
          "[check-node][dra]") {
  auto in = withCleanPolicy("dra-only/nodes.json");
  in.resourceSlices = load("dra-only/resourceslices.json");
  auto r = check(in);
  CHECK(ids(r, Severity::kInfo).empty());
  CHECK(r.exitCode() == 0);
  CHECK(summaryLine(r) == "2 nodes, 2 ok");

  auto& slices = in.resourceSlices.front().body["items"];
  SECTION("without --resource-slices nothing advertises the GPUs") {
    in.resourceSlices.clear();  // `slices` dangles from here on: no section after this uses it
    auto r2 = check(in);
    CHECK(ids(r2, Severity::kWarning) ==
          std::vector<std::string>{"mode-resource-missing@dra-c", "mode-resource-missing@dra-p"});
    CHECK(find(r2, "mode-resource-missing", "dra-c")->message ==
          "no nvidia.com/gpu in the node's capacity: the device plugin is not running or found no "
          "GPU on the nvidia driver (mode container)");
  }
  SECTION("a node no slice names is still missing its resource") {
    slices.erase(1);
    auto r2 = check(in);
    CHECK(ids(r2, Severity::kWarning) == std::vector<std::string>{"mode-resource-missing@dra-p"});
    const auto* f = find(r2, "mode-resource-missing", "dra-p");
    REQUIRE(f);
    CHECK(f->severity == Severity::kError);
    CHECK(f->message ==
          "no passthrough resource (nvidia.com/<PCI device name>): the sandbox device plugin is "
          "not running, or no GPU is bound to vfio-pci (mode vm-passthrough); nor does the DRA "
          "driver gpu.nvidia.com publish a device of type vfio on it in the ResourceSlices");
  }
  SECTION("slices that miss a GPU") {
    slices[0]["spec"]["devices"].erase(3);
    auto r2 = check(in);
    CHECK(ids(r2, Severity::kInfo) == std::vector<std::string>{"gpu-count-mismatch@dra-c"});
    const auto* f = find(r2, "gpu-count-mismatch", "dra-c");
    REQUIRE(f);
    CHECK(f->severity == Severity::kWarning);
    CHECK(f->message ==
          "the node has 4 GPUs but the DRA driver gpu.nvidia.com publishes only 3 GPUs (devices "
          "of type gpu or mig) on it (ResourceSlice dra-c-gpu.nvidia.com-x7t2k)");

    slices[1]["spec"]["devices"].erase(1);
    auto r3 = check(in);
    REQUIRE(find(r3, "gpu-count-mismatch", "dra-p"));
    CHECK(find(r3, "gpu-count-mismatch", "dra-p")->message ==
          "the node has 2 GPUs but the DRA driver gpu.nvidia.com publishes only 1 device of type "
          "vfio on it (ResourceSlice dra-p-gpu.nvidia.com-m4q8z)");
  }
  SECTION("slices that disagree with the mode: GPUs on the host driver on a passthrough node") {
    for (auto& d : slices[1]["spec"]["devices"]) d["attributes"]["type"]["string"] = "gpu";
    auto r2 = check(in);
    CHECK(ids(r2, Severity::kWarning) ==
          std::vector<std::string>{"mode-resource-missing@dra-p", "dra-gpu-on-passthrough@dra-p"});
    CHECK(r2.exitCode() == 1);
  }
  SECTION("vfio devices on the container node") {
    for (auto& d : slices[0]["spec"]["devices"]) d["attributes"]["type"]["string"] = "vfio";
    auto r2 = check(in);
    CHECK(ids(r2, Severity::kWarning) ==
          std::vector<std::string>{"mode-resource-missing@dra-c", "dra-vfio-wrong-mode@dra-c"});
  }
  SECTION("MIG devices count their GPU once") {
    auto& devs = slices[0]["spec"]["devices"];
    const auto parent = devs[3]["attributes"]["uuid"];
    devs.erase(3);
    for (int i = 0; i < 2; ++i) {
      devs.push_back({{"name", "gpu-3-mig-19-" + std::to_string(i) + "-1"},
                      {"attributes",
                       {{"type", {{"string", "mig"}}},
                        {"uuid", {{"string", "MIG-" + std::to_string(i)}}},
                        {"parentUUID", parent},
                        {"profile", {{"string", "1g.10gb"}}}}}});
    }
    auto r2 = check(in);
    CHECK(ids(r2, Severity::kInfo).empty());
    devs.back()["attributes"].erase("parentUUID");  // its GPU cannot be told: not counted
    devs.erase(devs.size() - 2);
    auto r3 = check(in);
    CHECK(ids(r3, Severity::kInfo).empty());
  }
}

// One owner per GPU: the operator's vfio-manager and vgpu-device-manager beside hostprep.
TEST_CASE(
    "a ClusterPolicy that still enables the operator's VM agents over hostprep nodes is an "
    "error naming its fields",
    "[check-node][operator]") {
  auto in = withCleanPolicy("mixed/nodes.yaml");
  in.clusterPolicy = one("broken/cluster-policy-vfio-manager.yaml");
  auto r = check(in);
  const auto* f = find(r, "operator-agent-enabled", "gpu-mx");
  REQUIRE(f);
  CHECK(f->severity == Severity::kError);
  CHECK(f->message ==
        "hostprep runs on this node (its hostprep.* NFD labels) and the ClusterPolicy "
        "cluster-policy (broken/cluster-policy-vfio-manager.yaml) still has "
        "spec.vfioManager.enabled true: the operator's vfio-manager (vfio-manage bind --all) or "
        "vgpu-device-manager would move the same GPUs, racing hostprep");
  CHECK_THAT(f->fix, Catch::StartsWith("turn them off: kubectl patch clusterpolicy/cluster-policy "
                                       "--type merge -p "
                                       "'{\"spec\":{\"vfioManager\":{\"enabled\":false}}}' "
                                       "(Helm: --set vfioManager.enabled=false)"));
  CHECK(find(r, "operator-agent-enabled", "gpu-mv"));
  CHECK(r.exitCode() == 1);

  // Both agents named when the policy leaves both at the operator's default (absent: true).
  auto policy = one("broken/cluster-policy-vfio-manager.yaml");
  policy.body["spec"].erase("vfioManager");
  policy.body["spec"].erase("vgpuDeviceManager");
  in.clusterPolicy = policy;
  auto both = check(in);
  REQUIRE(find(both, "operator-agent-enabled", "gpu-mx"));
  CHECK_THAT(find(both, "operator-agent-enabled", "gpu-mx")->message,
             Catch::Contains("spec.vfioManager.enabled and spec.vgpuDeviceManager.enabled true"));

  // Turned off (the clean policy): no finding. Sandbox workloads off: the operator deploys
  // neither agent, no finding either.
  auto clean = check(withCleanPolicy("mixed/nodes.yaml"));
  CHECK_FALSE(find(clean, "operator-agent-enabled", "gpu-mx"));
  policy.body["spec"]["sandboxWorkloads"]["enabled"] = false;
  in.clusterPolicy = policy;
  CHECK_FALSE(find(check(in), "operator-agent-enabled", "gpu-mx"));
}

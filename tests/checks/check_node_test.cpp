// check-node as a whole on the seed's exercise: a clean three-node cluster passes, and every
// finding id the checker emits is one the JSON schema lists.
#include "checks/check_node.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <set>

#include "tests/checks/check_node_support.hpp"

using namespace hostprep;
using namespace hostprep::test;

TEST_CASE("the seed's clean cluster: container, vm-passthrough, vm-vgpu with matching resources",
          "[check-node]") {
  auto r = check(cleanInput());
  CHECK(ids(r, Severity::kInfo).empty());
  CHECK(r.exitCode() == 0);
  REQUIRE(r.nodes.size() == 3);
  CHECK(r.nodes[0].mode == Mode::kContainer);
  CHECK(r.nodes[1].mode == Mode::kVmPassthrough);
  CHECK(r.nodes[1].gpus == std::optional<int>(2));  // from the status document
  CHECK(r.nodes[2].mode == Mode::kVmVgpu);
  CHECK(summaryLine(r) == "3 nodes, 3 ok");
}

TEST_CASE("the clean cluster also passes against the vgpu-device-manager config", "[check-node]") {
  auto in = cleanInput();
  auto cfg = readVgpuConfigs(text("clean/vgpu-config.yaml"), "vgpu-config.yaml");
  REQUIRE(cfg);
  in.vgpuConfigs = *cfg;
  auto r = check(in);
  CHECK(ids(r, Severity::kInfo).empty());
}

TEST_CASE("every finding id the checker emits is listed in the JSON schema", "[check-node]") {
  std::ifstream f(std::string(HOSTPREP_FIXTURES_DIR) + "/../../checks/check-node.schema.json");
  REQUIRE(f);
  auto schema = nlohmann::json::parse(f);
  const auto& known = schema["$defs"]["findingId"]["enum"];
  auto in = cleanInput();
  in.clusterPolicy.reset();
  in.kubevirt = one("broken/kubevirt-not-external.yaml");
  in.kubevirt->body["spec"]["configuration"]["mediatedDevicesConfiguration"] = {
      {"mediatedDeviceTypes", {"nvidia-592"}}};
  auto more = load("broken/labels-ignored.json");
  in.nodes.insert(in.nodes.end(), more.begin(), more.end());
  in.nodes.push_back(load("broken/vgpu-a10-4q-four.yaml").front());
  in.nodes.push_back(load("broken/passthrough-with-gpu.json").front());
  in.nodes.push_back(load("lifecycle/nodes.yaml").front());
  auto mixed = load("mixed/nodes.yaml");
  auto& split = mixed.front().body["items"];
  split[0]["status"]["allocatable"]["nvidia.com/gpu"] = "1";  // split-count-mismatch
  split[1]["status"]["allocatable"]["nvidia.com/gpu"] = "1";  // split-undeclared-kind
  split[1]["metadata"]["name"] = "gpu-mv2";
  split.push_back(split[1]);
  split[2]["metadata"]["name"] = "gpu-mv3";
  split[2]["metadata"]["labels"]["feature.node.kubernetes.io/hostprep.gpus.container"] = "1";
  in.nodes.push_back(mixed.front());
  in.resourceSlices = load("dra/resourceslices-broken-v1beta1.yaml");
  auto vmi = load("broken/vmi-a10.yaml");
  vmi.front().body["spec"]["domain"]["devices"]["gpus"][0]["deviceName"] =
      "nvidia.com/GH100_H100_PCIE";
  in.workloads.insert(in.workloads.end(), vmi.begin(), vmi.end());
  auto r = check(in);
  std::set<std::string> seen;
  for (const auto& x : all(r)) seen.insert(x.id);
  CHECK(seen.size() >= 14);
  for (const char* id : {"split-count-mismatch", "split-undeclared-kind", "split-invalid"}) {
    INFO(id);
    CHECK(seen.count(id) == 1);
  }
  for (const auto& id : seen) {
    INFO(id);
    CHECK(std::find(known.begin(), known.end(), id) != known.end());
  }
}

TEST_CASE("every finding id of the JSON schema is documented in README's table", "[check-node]") {
  std::ifstream s(std::string(HOSTPREP_SOURCE_DIR) + "/checks/check-node.schema.json");
  std::ifstream r(std::string(HOSTPREP_SOURCE_DIR) + "/README.md");
  REQUIRE(s);
  REQUIRE(r);
  auto schema = nlohmann::json::parse(s);
  std::stringstream readme;
  readme << r.rdbuf();
  for (const auto& id : schema["$defs"]["findingId"]["enum"]) {
    INFO(id);
    CHECK(readme.str().find("`" + id.get<std::string>() + "`") != std::string::npos);
  }
}

// check-node's inputs: documents of the wrong shape are usage errors naming the document.
#include "checks/cluster_inputs.hpp"

#include <catch2/catch.hpp>

#include "tests/checks/check_node_support.hpp"

using namespace hostprep;
using namespace hostprep::test;

TEST_CASE("input documents of the wrong shape are usage errors", "[check-node]") {
  CheckNodeInput in;
  in.nodes = load("clean/workloads.yaml");
  auto r = checkNodes(in);
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == Exit::kUsage);
  CHECK(r.error().message == "clean/workloads.yaml (document 1): a Pod, not a Node");
}

TEST_CASE("the ClusterPolicy: the operator's defaults and an invalid defaultWorkload",
          "[check-node]") {
  std::vector<Finding> cluster;
  auto none = readPolicy(std::nullopt, cluster);
  REQUIRE(none);
  CHECK_FALSE(none->view.given);
  CHECK(none->view.sandboxEnabled);  // assumed, and said so by cluster-policy-assumed
  CHECK(none->ref() == "the ClusterPolicy");

  Document d{"policy.json", nlohmann::json::parse(R"({"kind": "ClusterPolicy",
      "metadata": {"name": "gpu-policy"},
      "spec": {"sandboxWorkloads": {"defaultWorkload": "vm-passthru"}}})")};
  auto p = readPolicy(d, cluster);
  REQUIRE(p);
  CHECK(p->view.given);
  CHECK_FALSE(p->view.sandboxEnabled);  // enabled absent: the operator's default, false
  CHECK(p->view.defaultWorkload == Mode::kContainer);
  CHECK(p->ref() == "the ClusterPolicy gpu-policy (policy.json)");
  REQUIRE(cluster.size() == 1);
  CHECK(cluster[0].id == "cluster-policy-default-invalid");
  CHECK(cluster[0].message ==
        "ClusterPolicy gpu-policy has sandboxWorkloads.defaultWorkload 'vm-passthru', which is not "
        "a mode; the operator falls back to container");

  Document list{"policy.json", nlohmann::json::parse(R"({"kind": "List", "items": []})")};
  auto bad = readPolicy(list, cluster);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().exit == Exit::kUsage);
  CHECK(bad.error().message == "policy.json: no ClusterPolicy in the list");
}

TEST_CASE("the KubeVirt CR: gates and permitted devices, a wrong kind named", "[check-node]") {
  auto kv = readKubeVirt(one("clean/kubevirt.yaml"));
  REQUIRE(kv);
  REQUIRE(*kv);
  CHECK((*kv)->gate("GPU"));
  const auto* pci = (*kv)->find("nvidia.com/GA102GL_A10");
  REQUIRE(pci);
  CHECK_FALSE(pci->mediated);
  CHECK(pci->external);
  CHECK(pci->selector == std::optional<std::string>("10DE:2236"));
  CHECK_FALSE((*kv)->find("nvidia.com/gpu"));

  Document node{"kv.json", nlohmann::json::parse(R"({"kind": "Node"})")};
  auto bad = readKubeVirt(node);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message == "kv.json: a Node, not a KubeVirt CR");
  CHECK(bad.error().advice == "pass 'kubectl get kubevirt -n kubevirt kubevirt -o json'");
}

TEST_CASE("status documents: one per node, the first wins, a mode outside the three is none",
          "[check-node]") {
  auto docs = load("clean/status-gpu-b.json");
  auto second = docs.front();
  second.source = "again.json";
  second.body["actual_mode"] = "mixed";
  docs.push_back(second);
  auto st = readStatuses(docs);
  REQUIRE(st);
  REQUIRE(st->all.size() == 2);
  const auto* b = st->find("gpu-b");
  REQUIRE(b);
  CHECK(b->source == "clean/status-gpu-b.json");
  CHECK(b->actualMode == std::optional<Mode>(Mode::kVmPassthrough));
  CHECK(b->gpus == std::optional<int>(2));
  CHECK(b->gpuDeviceIds == std::vector<uint16_t>{0x2236, 0x2236});
  CHECK_FALSE(st->all[1].actualMode);
  CHECK_FALSE(st->find("gpu-a"));

  docs.back().body["advertised"]["nvidia.com/GA102GL_A10"] = "two";
  auto bad = readStatuses(docs);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message ==
        "again.json: advertised.nvidia.com/GA102GL_A10: '\"two\"' is not a count");
}

TEST_CASE("a node's resources: capacity and allocatable merged, sorted, bad counts named",
          "[check-node]") {
  NodeResult n;
  n.name = "gpu-x";
  auto node = nlohmann::json::parse(R"({"status": {
      "capacity": {"nvidia.com/gpu": "2", "cpu": "8", "nvidia.com/GA102GL_A10": "x"},
      "allocatable": {"nvidia.com/gpu": 1}}})");
  std::vector<Finding> bad;
  readResources(n, node, bad);
  REQUIRE(n.resources.size() == 2);
  CHECK(n.resources[0].name == "nvidia.com/GA102GL_A10");
  CHECK(n.resources[0].capacity == std::optional<int64_t>(0));
  CHECK_FALSE(n.resources[0].allocatable);
  CHECK(n.resources[1].name == "nvidia.com/gpu");
  CHECK(n.resources[1].kind == ResourceKind::kContainer);
  CHECK(n.resources[1].shown() == 2);
  CHECK(n.resources[1].allocatable == std::optional<int64_t>(1));
  REQUIRE(bad.size() == 1);
  CHECK(bad[0].id == "quantity-invalid");
  CHECK(bad[0].message == "capacity of nvidia.com/GA102GL_A10 is 'x', not a whole count");

  Labels labels(&node["status"]["capacity"]);
  CHECK(labels.get("cpu") == std::optional<std::string>("8"));
  CHECK(labels.is("nvidia.com/gpu", "2"));
  CHECK_FALSE(labels.get("absent"));
}

TEST_CASE("a count holding invalid UTF-8 is named, not thrown on", "[check-node]") {
  NodeResult n;
  n.name = "gpu-x";
  auto node = nlohmann::json::parse(R"({"status": {"capacity": {}}})");
  node["status"]["capacity"]["nvidia.com/gpu"] = nlohmann::json::array({std::string("\xff")});
  std::vector<Finding> bad;
  readResources(n, node, bad);
  REQUIRE(bad.size() == 1);
  CHECK(bad[0].message == "capacity of nvidia.com/gpu is '[\"\xEF\xBF\xBD\"]', not a whole count");

  auto docs = load("clean/status-gpu-b.json");
  docs.front().body["advertised"]["nvidia.com/GA102GL_A10"] =
      nlohmann::json::array({std::string("\xff")});
  auto st = readStatuses(docs);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().message, Catch::EndsWith("is not a count"));
}

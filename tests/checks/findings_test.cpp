// The words findings are made of, and the findings sink.
#include "checks/findings.hpp"

#include <catch2/catch.hpp>

using namespace hostprep;

TEST_CASE("plural and nameList say counts and lists the way findings print them", "[check-node]") {
  CHECK(plural(1, "GPU", "GPUs") == "1 GPU");
  CHECK(plural(0, "GPU", "GPUs") == "0 GPUs");
  CHECK(plural(2, "node", "nodes") == "2 nodes");
  CHECK(nameList({}) == "");
  CHECK(nameList({"a", "b", "c"}) == "a, b, c");
  CHECK(nameList({"a", "b", "c", "d", "e"}) == "a, b, c and 2 more");
  CHECK(nameList({"a", "b", "c"}, 1) == "a and 2 more");
}

TEST_CASE("a node finding carries the node's name, a cluster finding none", "[check-node]") {
  NodeResult n;
  n.name = "gpu-a";
  addFinding(n, "allocatable-zero", Severity::kError, "msg", "fix", "nvidia.com/gpu");
  REQUIRE(n.findings.size() == 1);
  CHECK(n.findings[0].node == "gpu-a");
  CHECK(n.findings[0].resource == "nvidia.com/gpu");
  CHECK(n.findings[0].subject.empty());
  CHECK(n.state() == NodeState::kError);
  std::vector<Finding> cluster;
  addClusterFinding(cluster, "workload-ignored", Severity::kInfo, "vms.yaml", "msg", "fix");
  REQUIRE(cluster.size() == 1);
  CHECK(cluster[0].node.empty());
  CHECK(cluster[0].subject == "vms.yaml");
  CHECK(cluster[0].resource.empty());
}

TEST_CASE("forEachPrefixed visits exactly the keys under the prefix", "[check-node]") {
  auto j = nlohmann::json::parse(
      R"({"amd.com/gpu": 1, "nvidia.com/a": 2, "nvidia.com/b": 3, "nvidia.comx": 4, "z": 5})");
  std::vector<std::string> keys;
  forEachPrefixed(j, "nvidia.com/",
                  [&](const std::string& k, const nlohmann::json&) { keys.push_back(k); });
  CHECK(keys == std::vector<std::string>{"nvidia.com/a", "nvidia.com/b"});
  forEachPrefixed(nlohmann::json::array(), "x",
                  [&](const std::string&, const nlohmann::json&) { FAIL("an array has no keys"); });
}

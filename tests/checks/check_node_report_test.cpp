// check-node's report: the JSON document and the summary line.
#include <catch2/catch.hpp>

#include "checks/check_node.hpp"
#include "tests/checks/check_node_support.hpp"

using namespace hostprep;
using namespace hostprep::test;

TEST_CASE("the JSON report follows its schema's shape", "[check-node]") {
  CheckNodeInput in;
  in.nodes = load("broken/passthrough-with-gpu.json");
  auto j = reportJson(check(in));
  CHECK(j["schema"] == "hostprep.check-node/v1");
  CHECK(j["ok"] == false);
  CHECK(j["policy"]["given"] == false);
  CHECK(j["summary"]["with_errors"] == 1);
  CHECK(j["nodes"][0]["resources"]["nvidia.com/gpu"]["kind"] == "container");
  bool seen = false;
  for (const auto& f : j["findings"]) {
    if (f["id"] == "resource-wrong-kind") {
      seen = true;
      CHECK(f["node"] == "gpu-p");
      CHECK(f["severity"] == "error");
    }
    if (f["id"] == "cluster-policy-assumed") CHECK(f["node"].is_null());
  }
  CHECK(seen);
}

TEST_CASE("the text report: one block per node, its findings, the summary line", "[check-node]") {
  auto in = withCleanPolicy("broken/passthrough-with-gpu.json");
  auto r = check(in);
  CHECK(r.nodes[0].state() == NodeState::kError);
  auto t = reportText(r);
  CHECK_THAT(t, Catch::StartsWith("policy: sandbox workloads enabled, default workload container "
                                  "(from clean/cluster-policy.yaml)\n"
                                  "gpu-p: vm-passthrough (label), 2 GPUs: 2 errors\n"
                                  "  error resource-wrong-kind: advertises nvidia.com/gpu (2)"));
  CHECK_THAT(t, Catch::EndsWith("\n1 node, 0 ok, 1 with errors\n"));
  auto j = reportJson(r);
  CHECK(j["nodes"][0]["state"] == "error");
  CHECK(j["summary"]["ok"] == 0);
}

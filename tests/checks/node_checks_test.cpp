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

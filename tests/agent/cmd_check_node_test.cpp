// hostprep check-node as users run it: exit codes, stdin, JSON, the operands table.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/support/fixture.hpp"
#include "tests/support/run.hpp"

using hostprep::test::runHostprep;

namespace {
std::string fx(const std::string& rel) {
  return std::string(HOSTPREP_FIXTURES_DIR) + "/cluster/" + rel;
}
}  // namespace

TEST_CASE("check-node on the clean cluster exits 0 with the summary line", "[cli][check-node]") {
  auto r =
      runHostprep({"check-node", fx("clean/nodes.json"), "--cluster-policy",
                   fx("clean/cluster-policy.yaml"), "--kubevirt", fx("clean/kubevirt.yaml"),
                   "--vms", fx("clean/workloads.yaml"), "--status", fx("clean/status-gpu-b.json")});
  CHECK(r.exitCode == 0);
  CHECK_THAT(r.out, Catch::Contains("gpu-b: vm-passthrough (label), 2 GPUs: ok\n"));
  CHECK_THAT(r.out, Catch::EndsWith("3 nodes, 3 ok\n"));
  CHECK(r.err.empty());
}

TEST_CASE(
    "check-node --vgpu-config: the file prepare reads, and a bad one exits 2 naming file, line and "
    "key",
    "[cli][check-node]") {
  auto r =
      runHostprep({"check-node", fx("clean/nodes.json"), "--cluster-policy",
                   fx("clean/cluster-policy.yaml"), "--vgpu-config", fx("clean/vgpu-config.yaml")});
  CHECK(r.exitCode == 0);
  CHECK_THAT(r.out, Catch::EndsWith("3 nodes, 3 ok\n"));
  hostprep::test::Fixture dir;  // a private temporary directory
  dir.write("vgpu.yaml",
            "version: v1\nvgpu-configs:\n  A10-4Q:\n    - devices: all\n      vgpu-devices: "
            "{A10-4Q: six}\n");
  const std::string bad = dir.path("vgpu.yaml").string();
  r = runHostprep({"check-node", fx("clean/nodes.json"), "--vgpu-config", bad});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains(
                        "--vgpu-config: " + bad +
                        ":5: vgpu-configs.A10-4Q[0].vgpu-devices.A10-4Q: 'six' is not a count"));
}

TEST_CASE("check-node: DRA-published GPUs and a two-model vm-vgpu node exit 0",
          "[cli][check-node][dra][vgpu]") {
  auto r = runHostprep({"check-node", fx("dra-only/nodes.json"), "--cluster-policy",
                        fx("clean/cluster-policy.yaml"), "--resource-slices",
                        fx("dra-only/resourceslices.json")});
  CHECK(r.exitCode == 0);
  CHECK_THAT(r.out, Catch::EndsWith("2 nodes, 2 ok\n"));
  r = runHostprep({"check-node", fx("dra-only/nodes.json"), "--cluster-policy",
                   fx("clean/cluster-policy.yaml")});
  CHECK(r.exitCode == 1);  // without the slices nothing advertises the GPUs

  r = runHostprep({"check-node", fx("multi-model/node-a10-a16.yaml"), "--cluster-policy",
                   fx("clean/cluster-policy.yaml"), "--vgpu-config",
                   fx("multi-model/vgpu-config.yaml")});
  CHECK(r.exitCode == 0);
  CHECK_THAT(r.out, Catch::Contains("gpu-q: vm-vgpu (label), 4 GPUs: ok\n"));
  CHECK(r.err.empty());
}

TEST_CASE("check-node exits 1 on an error finding and prints it under its node",
          "[cli][check-node]") {
  auto r = runHostprep({"check-node", fx("broken/passthrough-with-gpu.json"), "--cluster-policy",
                        fx("clean/cluster-policy.yaml")});
  CHECK(r.exitCode == 1);
  CHECK_THAT(r.out, Catch::Contains("gpu-p: vm-passthrough (label), 2 GPUs: 2 errors\n"
                                    "  error resource-wrong-kind: advertises nvidia.com/gpu (2)"));
  CHECK_THAT(r.out, Catch::EndsWith("1 node, 0 ok, 1 with errors\n"));
}

TEST_CASE("check-node: warnings alone exit 0", "[cli][check-node]") {
  // No --cluster-policy with sandbox labels: a warning about the assumption, nothing else.
  auto r = runHostprep({"check-node", fx("clean/nodes.json")});
  CHECK(r.exitCode == 0);
  CHECK_THAT(r.out, Catch::Contains("warning cluster-policy-assumed: no --cluster-policy: assumed "
                                    "sandboxWorkloads.enabled=true"));
}

TEST_CASE("check-node reads standard input with '-', YAML too, and prints JSON",
          "[cli][check-node]") {
  // runHostprep has no stdin: point fd 0 of the child at the fixture by re-opening it here.
  std::string path = fx("broken/vgpu-a10-4q-four.yaml");
  int saved = ::dup(0);
  REQUIRE(saved >= 0);
  FILE* f = std::freopen(path.c_str(), "r", stdin);
  REQUIRE(f);
  auto r = runHostprep(
      {"--output", "json", "check-node", "-", "--cluster-policy", fx("clean/cluster-policy.yaml")});
  ::dup2(saved, 0);
  ::close(saved);
  CHECK(r.exitCode == 1);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["nodes"][0]["source"] == "standard input");
  REQUIRE(j["findings"].size() == 1);
  CHECK(j["findings"][0]["id"] == "vgpu-count-mismatch");
  CHECK(j["findings"][0]["node"] == "gpu-v");
  CHECK(j["findings"][0]["severity"] == "error");
}

TEST_CASE("check-node: malformed or unreadable input exits 2 naming the file and position",
          "[cli][check-node]") {
  auto r = runHostprep({"check-node", fx("broken/malformed.json")});
  CHECK(r.exitCode == 2);
  CHECK(r.out.empty());
  CHECK_THAT(r.err, Catch::StartsWith("hostprep check-node: " + fx("broken/malformed.json") +
                                      ": malformed JSON at line 5, column 51 (byte 106): "));
  r = runHostprep({"check-node", "/nonexistent/nodes.json"});
  CHECK(r.exitCode == 2);
  CHECK(r.err ==
        "hostprep check-node: /nonexistent/nodes.json: cannot open: No such file or directory "
        "(check the path)\n");
  r = runHostprep({"check-node", fx("clean/nodes.json"), "--vms", fx("broken/malformed.json")});
  CHECK(r.exitCode == 2);
  r = runHostprep({"check-node", fx("clean/workloads.yaml")});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("workloads.yaml (document 1): a Pod, not a Node"));
  r = runHostprep({"check-node"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::StartsWith("hostprep check-node: no node file given ("));
  r = runHostprep({"check-node", "-", "--vms", "-"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err,
             Catch::StartsWith("hostprep check-node: '-' (standard input) is given 2 times"));
  r = runHostprep({"--output", "json", "check-node", fx("broken/malformed.json")});
  CHECK(r.exitCode == 2);
  CHECK(nlohmann::json::parse(r.out)["ok"] == false);
}

TEST_CASE("check-node --operands prints the one table", "[cli][check-node]") {
  auto r = runHostprep({"check-node", "--operands"});
  CHECK(r.exitCode == 0);
  CHECK_THAT(r.out, Catch::Contains("sandbox-device-plugin  -          yes             yes"));
  r = runHostprep({"--output", "json", "check-node", "--operands"});
  auto j = nlohmann::json::parse(r.out);
  CHECK(j[0]["operand"] == "driver");
  CHECK(j[0]["label"] == "nvidia.com/gpu.deploy.driver");
}

TEST_CASE("check-node --resource-slices: DRA devices checked, a wrong document exits 2",
          "[cli][check-node]") {
  const std::vector<std::string> base{"check-node",       fx("clean/nodes.json"),
                                      "--cluster-policy", fx("clean/cluster-policy.yaml"),
                                      "--status",         fx("clean/status-gpu-b.json")};
  auto args = base;
  args.insert(args.end(), {"--resource-slices", fx("dra/resourceslices.json")});
  auto r = runHostprep(args);
  CHECK(r.exitCode == 0);
  CHECK_THAT(r.out, Catch::EndsWith("3 nodes, 3 ok\n"));

  args = base;
  args.insert(args.end(), {"--resource-slices", fx("dra/resourceslices-broken-v1beta1.yaml")});
  r = runHostprep(args);
  CHECK(r.exitCode == 1);
  CHECK_THAT(r.out, Catch::Contains("gpu-b: vm-passthrough (label), 2 GPUs: 2 errors\n"
                                    "  error dra-gpu-on-passthrough: "));
  CHECK_THAT(r.out, Catch::Contains("  error dra-vfio-not-prepared: "));

  args = base;
  args.insert(args.end(), {"--resource-slices", fx("clean/workloads.yaml")});
  r = runHostprep(args);
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("workloads.yaml (document 1): a Pod, not a ResourceSlice "
                                    "(pass 'kubectl get resourceslices -o json')"));
  r = runHostprep({"check-node", "-", "--resource-slices", "-"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("'-' (standard input) is given 2 times"));
  r = runHostprep({"check-node", "--help"});
  CHECK_THAT(r.out, Catch::Contains("--resource-slices"));
}

// An empty file is no kubectl or hostprep output (an empty list is still a List): a redirect of a
// command that failed. It was taken as no input at all (--status, --vms, --resource-slices, and a
// node file beside others); now it exits 2 naming the option and the file.
TEST_CASE("check-node: an input file that holds no document exits 2 naming it",
          "[cli][check-node]") {
  hostprep::test::Fixture dir;
  dir.write("empty.json", "");
  dir.write("list.json", "{\"kind\": \"List\", \"items\": []}\n");
  const std::string empty = dir.path("empty.json").string();
  const std::string nodes = fx("clean/nodes.json");
  const struct {
    std::vector<std::string> args;
    std::string err;
  } cases[] = {
      {{nodes, "--status", empty},
       "--status: " + empty +
           " holds no document (pass what 'hostprep status --output json' printed on the node)"},
      {{nodes, "--vms", empty},
       "--vms: " + empty + " holds no document (pass 'kubectl get vms,vmis,pods -A -o json')"},
      {{nodes, "--resource-slices", empty},
       "--resource-slices: " + empty +
           " holds no document (pass 'kubectl get resourceslices -o json')"},
      {{nodes, empty}, empty + " holds no document (pass 'kubectl get nodes -o json')"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args{"check-node"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    auto r = runHostprep(args);
    INFO(c.err);
    CHECK(r.exitCode == 2);
    CHECK(r.err == "hostprep check-node: " + c.err + "\n");
    CHECK(r.out.empty());
  }
  // An empty List is an input: no VMs.
  auto r = runHostprep({"check-node", nodes, "--vms", dir.path("list.json").string(),
                        "--cluster-policy", fx("clean/cluster-policy.yaml")});
  CHECK(r.exitCode == 0);
}

TEST_CASE(
    "check-node --cluster-policy: the operator's vfio-manager left on over hostprep nodes "
    "exits 1",
    "[cli][check-node][operator]") {
  auto r = runHostprep({"check-node", fx("mixed/nodes.yaml"), "--cluster-policy",
                        fx("broken/cluster-policy-vfio-manager.yaml")});
  CHECK(r.exitCode == 1);
  CHECK_THAT(r.out, Catch::Contains("operator-agent-enabled"));
  CHECK_THAT(r.out, Catch::Contains("spec.vfioManager.enabled true"));
  r = runHostprep(
      {"check-node", fx("mixed/nodes.yaml"), "--cluster-policy", fx("clean/cluster-policy.yaml")});
  CHECK_THAT(r.out, !Catch::Contains("operator-agent-enabled"));
  // The example ClusterPolicy of systemd/kubernetes/gpu-operator passes too.
  r = runHostprep({"check-node", fx("mixed/nodes.yaml"), "--cluster-policy",
                   fx("../../../systemd/kubernetes/gpu-operator/cluster-policy.yaml")});
  CHECK(r.exitCode == 0);
  CHECK_THAT(r.out, !Catch::Contains("operator-agent-enabled"));
}

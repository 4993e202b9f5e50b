// The operator's lifecycle labels: operands left paused, failed or pending state labels, a
// pre-installed host driver on a passthrough node.
#include "checks/lifecycle_labels.hpp"

#include <catch2/catch.hpp>

#include "tests/checks/check_node_support.hpp"

using namespace hostprep;
using namespace hostprep::test;

namespace {

std::vector<std::string> idsOf(const NodeResult& n) {
  std::vector<std::string> out;
  for (const auto& f : n.findings) out.push_back(f.id);
  return out;
}

}  // namespace

TEST_CASE("an operand left paused-for-* is an error naming the label and how to resume it",
          "[check-node]") {
  auto r = check(withCleanPolicy("lifecycle/nodes.yaml"));
  REQUIRE(r.nodes.size() == 4);
  const auto& s = r.nodes[0];
  CHECK(idsOf(s) == std::vector<std::string>{"deploy-label-paused", "deploy-label-paused"});
  CHECK(s.findings[0].message ==
        "nvidia.com/gpu.deploy.sandbox-device-plugin=paused-for-vgpu-change: the "
        "sandbox-device-plugin operand was paused for vgpu change and never resumed; the operator "
        "schedules no sandbox-device-plugin pod on this node while the label says paused, and the "
        "operands that wait for it (the validators, the device plugins) wait forever");
  CHECK_THAT(s.findings[0].fix,
             Catch::EndsWith("resume it: kubectl label node gpu-s "
                             "nvidia.com/gpu.deploy.sandbox-device-plugin=true --overwrite"));
  // Paused is not "switched off on purpose": no deploy-label-disabled beside it.
  CHECK_FALSE(find(r, "deploy-label-disabled", "gpu-s"));

  // A paused operand of another mode is removed, not set to true.
  auto in = withCleanPolicy("lifecycle/nodes.yaml");
  in.nodes.front().body["items"][0]["metadata"]["labels"]["nvidia.com/gpu.deploy.driver"] =
      "paused-for-driver-upgrade";
  auto r2 = check(in);
  bool seen = false;
  for (const auto& f : r2.nodes[0].findings) {
    if (f.message.rfind("nvidia.com/gpu.deploy.driver=", 0) != 0) continue;
    seen = true;
    CHECK_THAT(f.fix, Catch::EndsWith("kubectl label node gpu-s nvidia.com/gpu.deploy.driver-"));
  }
  CHECK(seen);
}

TEST_CASE("mig.config.state and cc.mode.state: failed is an error, pending a warning",
          "[check-node]") {
  auto in = withCleanPolicy("lifecycle/nodes.yaml");
  auto r = check(in);
  const auto* mig = find(r, "mig-config-failed", "gpu-u");
  REQUIRE(mig);
  CHECK(mig->severity == Severity::kError);
  CHECK(mig->message ==
        "nvidia.com/mig.config.state=failed: the nvidia-mig-manager could not apply "
        "nvidia.com/mig.config=all-1g.10gb");
  const auto* cc = find(r, "cc-mode-failed", "gpu-c");
  REQUIRE(cc);
  CHECK(cc->message ==
        "nvidia.com/cc.mode.state=failed: the nvidia-cc-manager could not apply "
        "nvidia.com/cc.mode=on");

  auto& labels = in.nodes.front().body["items"][1]["metadata"]["labels"];
  for (const char* state : {"pending", "rebooting"}) {
    labels["nvidia.com/mig.config.state"] = state;
    auto r2 = check(in);
    CHECK_FALSE(find(r2, "mig-config-failed", "gpu-u"));
    const auto* p = find(r2, "mig-config-pending", "gpu-u");
    REQUIRE(p);
    CHECK(p->severity == Severity::kWarning);
    CHECK(p->message ==
          "nvidia.com/mig.config.state=" + std::string(state) +
              ": the nvidia-mig-manager is applying nvidia.com/mig.config=all-1g.10gb; "
              "the GPUs may be reset or unavailable meanwhile");
  }
  labels["nvidia.com/mig.config.state"] = "success";
  auto r3 = check(in);
  CHECK_FALSE(find(r3, "mig-config-pending", "gpu-u"));
  CHECK_FALSE(find(r3, "mig-config-failed", "gpu-u"));
}

TEST_CASE("vgpu.config.state=rebooting is a pending vGPU config", "[check-node]") {
  auto in = withCleanPolicy("broken/vgpu-a10-4q-four.yaml");
  in.nodes.front().body["metadata"]["labels"]["nvidia.com/vgpu.config.state"] = "rebooting";
  auto r = check(in);
  const auto* p = find(r, "vgpu-config-pending", "gpu-v");
  REQUIRE(p);
  CHECK_THAT(p->message, Catch::StartsWith("nvidia.com/vgpu.config.state=rebooting: 'A10-4Q' is "
                                           "still being applied"));
}

TEST_CASE("a pre-installed driver on a vm-passthrough node: the vfio-manager skips it",
          "[check-node]") {
  auto in = withCleanPolicy("lifecycle/nodes.yaml");
  auto r = check(in);
  const auto* f = find(r, "driver-preinstalled-passthrough", "gpu-p");
  REQUIRE(f);
  CHECK(f->severity == Severity::kWarning);
  CHECK_THAT(f->message, Catch::Contains("NVIDIA/k8s-driver-manager issue 191"));
  CHECK_THAT(f->fix, Catch::StartsWith("run 'hostprep prepare --mode vm-passthrough' on the node"));

  // Once the GPUs are on vfio-pci and advertised, it is only said.
  auto& node = in.nodes.front().body["items"][3];
  node["status"]["capacity"]["nvidia.com/GA102GL_A10"] = "2";
  node["status"]["allocatable"]["nvidia.com/GA102GL_A10"] = "2";
  auto r2 = check(in);
  REQUIRE(find(r2, "driver-preinstalled-passthrough", "gpu-p"));
  CHECK(find(r2, "driver-preinstalled-passthrough", "gpu-p")->severity == Severity::kInfo);
  CHECK(r2.nodes[3].state() == NodeState::kOk);

  // On a container node pre-installed is the usual host driver: nothing to say.
  node["metadata"]["labels"]["nvidia.com/gpu.workload.config"] = "container";
  auto r3 = check(in);
  CHECK_FALSE(find(r3, "driver-preinstalled-passthrough", "gpu-p"));
}

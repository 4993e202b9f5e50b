// The vGPU check: nvidia.com/vgpu.config against the types and counts a vm-vgpu node advertises.
#include <catch2/catch.hpp>

#include "checks/check_node.hpp"
#include "tests/checks/check_node_support.hpp"

using namespace hostprep;
using namespace hostprep::test;

TEST_CASE("vGPU A10-4Q on two cards advertising 4 instead of 12", "[check-node]") {
  auto in = withCleanPolicy("broken/vgpu-a10-4q-four.yaml");  // YAML, unquoted allocatable count
  auto r = check(in);
  const auto* f = find(r, "vgpu-count-mismatch", "gpu-v");
  REQUIRE(f);
  CHECK(f->severity == Severity::kError);
  CHECK(f->message ==
        "advertises 4 × nvidia.com/NVIDIA_A10-4Q, but nvidia.com/vgpu.config=A10-4Q on 2 GPUs "
        "must give 12 (6 per GPU × 2 GPUs, built-in profile table)");
  CHECK(ids(r, Severity::kWarning) == std::vector<std::string>{"vgpu-count-mismatch@gpu-v"});

  SECTION("the same from --vgpu-config") {
    auto cfg = readVgpuConfigs(text("clean/vgpu-config.yaml"), "vgpu-config.yaml");
    REQUIRE(cfg);
    in.vgpuConfigs = *cfg;
    auto r2 = check(in);
    REQUIRE(find(r2, "vgpu-count-mismatch", "gpu-v"));
    CHECK_THAT(
        find(r2, "vgpu-count-mismatch", "gpu-v")->message,
        Catch::EndsWith("must give 12 (6 per GPU × 2 GPUs, config 'A10-4Q' in --vgpu-config)"));
  }
  SECTION("the GPU count from the host's status instead of the label") {
    in.nodes.front().body["metadata"]["labels"].erase("nvidia.com/gpu.count");
    auto r2 = check(in);
    CHECK_FALSE(find(r2, "vgpu-count-mismatch", "gpu-v"));
    CHECK(find(r2, "gpu-count-unknown", "gpu-v"));
    in.statuses = {
        {"st",
         {{"node", "gpu-v"},
          {"actual_mode", "vm-vgpu"},
          {"devices",
           {{{"bdf", "0000:3b:00.0"}, {"vendor", "10de"}, {"device", "2236"}, {"role", "gpu"}},
            {{"bdf", "0000:86:00.0"}, {"vendor", "10de"}, {"device", "2236"}, {"role", "gpu"}}}}}}};
    auto r3 = check(in);
    CHECK(find(r3, "vgpu-count-mismatch", "gpu-v"));
  }
  SECTION("a config asking for another type") {
    in.nodes.front().body["metadata"]["labels"]["nvidia.com/vgpu.config"] = "A10-12Q";
    auto r2 = check(in);
    const auto* t = find(r2, "vgpu-type-mismatch", "gpu-v");
    REQUIRE(t);
    CHECK(t->message ==
          "nvidia.com/vgpu.config=A10-12Q asks for A10-12Q, but the node advertises "
          "nvidia.com/NVIDIA_A10-4Q (4); A10-12Q not advertised");
  }
}

// The vGPU check: nvidia.com/vgpu.config against the types and counts a vm-vgpu node advertises.
#include <catch2/catch.hpp>

#include "checks/check_node.hpp"
#include "tests/checks/check_node_support.hpp"
#include "tests/support/schema.hpp"

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

TEST_CASE("a node with two GPU models: each device-filter entry counts only its own GPUs",
          "[check-node]") {
  auto in = withCleanPolicy("two-model/node-a10-l4.yaml");
  in.statuses = load("two-model/status-gpu-m.json");

  SECTION("the default entries of the built-in profile table") {
    auto r = check(in);
    CHECK(ids(r, Severity::kInfo).empty());
  }
  SECTION("the entries of --vgpu-config") {
    auto cfg = readVgpuConfigs(text("two-model/vgpu-config.yaml"), "vgpu-config.yaml");
    REQUIRE(cfg);
    in.vgpuConfigs = *cfg;
    auto r = check(in);
    CHECK(ids(r, Severity::kInfo).empty());

    // One L4 device short: the L4 entry (2 per GPU × 1 matching GPU) is named, the A10 one not.
    auto& node = in.nodes.front().body;
    node["status"]["capacity"]["nvidia.com/NVIDIA_L4-12Q"] = "1";
    node["status"]["allocatable"]["nvidia.com/NVIDIA_L4-12Q"] = "1";
    auto r2 = check(in);
    CHECK(
        ids(r2, Severity::kWarning) ==
        std::vector<std::string>{"vgpu-count-mismatch@gpu-m", "status-advertised-mismatch@gpu-m"});
    const auto* f = find(r2, "vgpu-count-mismatch", "gpu-m");
    REQUIRE(f);
    CHECK(f->message ==
          "advertises 1 × nvidia.com/NVIDIA_L4-12Q, but nvidia.com/vgpu.config=default on 2 GPUs "
          "must give 2 (2 per GPU × 1 matching GPU, config 'default' in --vgpu-config)");
  }
}

TEST_CASE("the two-model fixtures are shaped like what kubectl and hostprep status print",
          "[check-node]") {
  auto schema = nlohmann::json::parse(text("../../../agent/status.schema.json"));
  auto status = nlohmann::json::parse(text("two-model/status-gpu-m.json"));
  CHECK(validateSchema(schema, status) == std::vector<std::string>{});
}

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

TEST_CASE("without --status, the GPUs of each model are inferred from the advertised types",
          "[check-node][vgpu]") {
  // gpu-q: 2 A10 + 2 A16, one device-filter entry per model (tests/fixtures/cluster/multi-model).
  auto in = withCleanPolicy("multi-model/node-a10-a16.yaml");
  auto cfg = readVgpuConfigs(text("multi-model/vgpu-config.yaml"), "vgpu-config.yaml");
  REQUIRE(cfg);
  in.vgpuConfigs = *cfg;
  auto& node = in.nodes.front().body;
  auto advertise = [&](const std::string& type, int count) {
    node["status"]["capacity"]["nvidia.com/NVIDIA_" + type] = std::to_string(count);
    node["status"]["allocatable"]["nvidia.com/NVIDIA_" + type] = std::to_string(count);
  };

  auto r = check(in);
  CHECK(ids(r, Severity::kInfo) == std::vector<std::string>{"vgpu-device-filter-assumed@gpu-q"});
  CHECK(r.exitCode() == 0);
  CHECK(find(r, "vgpu-device-filter-assumed", "gpu-q")->message ==
        "the GPU models are unknown: the GPUs each device-filter matches were inferred from the "
        "vGPU types the node advertises: 2 GPUs of 0x223610DE (A10-12Q), 2 GPUs of 0x25B610DE "
        "(A16-4Q) of its 4 GPUs");

  SECTION("a count no number of GPUs gives") {
    advertise("A10-12Q", 3);
    auto r2 = check(in);
    CHECK(ids(r2, Severity::kInfo) == std::vector<std::string>{"vgpu-count-mismatch@gpu-q"});
    const auto* f = find(r2, "vgpu-count-mismatch", "gpu-q");
    REQUIRE(f);
    CHECK(f->severity == Severity::kError);
    CHECK(f->resource == "nvidia.com/NVIDIA_A10-12Q");
    CHECK(f->message ==
          "advertises 3 × nvidia.com/NVIDIA_A10-12Q, but nvidia.com/vgpu.config=a10-a16 gives 2 "
          "per A10 GPU that device-filter 0x223610DE matches (config 'a10-a16' in --vgpu-config): "
          "no number of the node's 4 GPUs gives 3");
    CHECK(r2.exitCode() == 1);
  }
  SECTION("counts that each fit some GPUs, but no split of the node's GPUs") {
    advertise("A10-12Q", 2);  // one A10's vGPUs missing: 1 + 2 GPUs of the 4
    auto r2 = check(in);
    CHECK(ids(r2, Severity::kInfo) == std::vector<std::string>{"vgpu-count-mismatch@gpu-q"});
    const auto* f = find(r2, "vgpu-count-mismatch", "gpu-q");
    REQUIRE(f);
    CHECK(f->resource.empty());
    CHECK(f->message ==
          "the advertised vGPU types need 1 GPU of 0x223610DE for 2 × nvidia.com/NVIDIA_A10-12Q "
          "at 2 per GPU, 2 GPUs of 0x25B610DE for 8 × nvidia.com/NVIDIA_A16-4Q at 4 per GPU, but "
          "nvidia.com/vgpu.config=a10-a16 (config 'a10-a16' in --vgpu-config) splits the node's 4 "
          "GPUs among its device-filters: no split gives every type its count");
  }
  SECTION("another split of the same 4 GPUs fits: 1 A10 + 3 A16") {
    advertise("A10-12Q", 2);
    advertise("A16-4Q", 12);
    auto r2 = check(in);
    CHECK(ids(r2, Severity::kWarning).empty());
    CHECK_THAT(find(r2, "vgpu-device-filter-assumed", "gpu-q")->message,
               Catch::EndsWith("1 GPU of 0x223610DE (A10-12Q), 3 GPUs of 0x25B610DE (A16-4Q) of "
                               "its 4 GPUs"));
  }
  SECTION("the operator's default config, from the built-in profile table") {
    in.vgpuConfigs.reset();
    node["metadata"]["labels"]["nvidia.com/vgpu.config"] = "default";
    node["status"]["capacity"].erase("nvidia.com/NVIDIA_A16-4Q");
    node["status"]["allocatable"].erase("nvidia.com/NVIDIA_A16-4Q");
    advertise("A16-8Q", 4);  // the default: A16-8Q x 2 per A16 GPU
    auto r2 = check(in);
    CHECK(ids(r2, Severity::kWarning).empty());
    CHECK_THAT(find(r2, "vgpu-device-filter-assumed", "gpu-q")->message,
               Catch::EndsWith("2 GPUs of 0x223610DE (A10-12Q), 2 GPUs of 0x25B610DE (A16-8Q) of "
                               "its 4 GPUs"));
    advertise("A16-8Q", 6);
    auto r3 = check(in);
    CHECK(ids(r3, Severity::kInfo) == std::vector<std::string>{"vgpu-count-mismatch@gpu-q"});
    CHECK_THAT(find(r3, "vgpu-count-mismatch", "gpu-q")->message,
               Catch::Contains("3 GPUs of 0x25B610DE for 6 × nvidia.com/NVIDIA_A16-8Q at 2 per "
                               "GPU, but nvidia.com/vgpu.config=default (the operator's default "
                               "config) splits the node's 4 GPUs"));
  }
  SECTION("without a GPU count nothing is inferred") {
    node["metadata"]["labels"].erase("nvidia.com/gpu.count");
    auto r2 = check(in);
    CHECK(ids(r2, Severity::kInfo) == std::vector<std::string>{"gpu-count-unknown@gpu-q"});
  }
}

TEST_CASE("a single-model node's device-filter entry still counts every GPU",
          "[check-node][vgpu]") {
  // gpu-m of the two-model fixtures, told it has 2 GPUs but without --status.
  auto in = withCleanPolicy("two-model/node-a10-l4.yaml");
  auto cfg = readVgpuConfigs(text("two-model/vgpu-config.yaml"), "vgpu-config.yaml");
  REQUIRE(cfg);
  in.vgpuConfigs = *cfg;
  auto& node = in.nodes.front().body;
  node["metadata"]["labels"]["nvidia.com/gpu.count"] = "2";
  auto r = check(in);  // one A10 and one L4: it fits
  CHECK(ids(r, Severity::kWarning).empty());

  // Only A10s: an A10-only node of 2 GPUs must show 4 A10-12Q, not the 2 one GPU gives.
  node["status"]["capacity"].erase("nvidia.com/NVIDIA_L4-12Q");
  node["status"]["allocatable"].erase("nvidia.com/NVIDIA_L4-12Q");
  auto r2 = check(in);
  CHECK(ids(r2, Severity::kInfo) == std::vector<std::string>{"vgpu-count-mismatch@gpu-m"});
  CHECK(find(r2, "vgpu-count-mismatch", "gpu-m")->message ==
        "the advertised vGPU types need 1 GPU of 0x223610DE for 2 × nvidia.com/NVIDIA_A10-12Q at 2 "
        "per GPU, but nvidia.com/vgpu.config=default (config 'default' in --vgpu-config) splits "
        "the node's 2 GPUs among its device-filters: no split gives every type its count");
}

// Resource names classified by the device plugins' naming rules, and Kubernetes counts.
#include "checks/resource_kinds.hpp"

#include <catch2/catch.hpp>

#include "tests/checks/check_node_support.hpp"

using namespace hostprep;
using namespace hostprep::test;

TEST_CASE("resource names are classified by the device plugins' naming rules", "[check-node]") {
  CHECK(classifyResource("nvidia.com/gpu") == ResourceKind::kContainer);
  CHECK(classifyResource("nvidia.com/mig-1g.10gb") == ResourceKind::kContainer);
  CHECK(classifyResource("nvidia.com/GA102GL_A10") == ResourceKind::kPassthrough);
  CHECK(classifyResource("nvidia.com/GH100_H100_PCIE") == ResourceKind::kPassthrough);
  CHECK(classifyResource("nvidia.com/2236") == ResourceKind::kPassthrough);
  CHECK(classifyResource("nvidia.com/NVIDIA_A10-12Q") == ResourceKind::kVgpu);
  CHECK(classifyResource("nvidia.com/GRID_T4-4Q") == ResourceKind::kVgpu);
  CHECK(classifyResource("nvidia.com/NVIDIA_A100-1-5CME") == ResourceKind::kVgpu);
  CHECK(classifyResource("nvidia.com/pgpu-thing") == ResourceKind::kOther);
  CHECK(classifyResource("amd.com/gpu") == ResourceKind::kOther);
  CHECK(vgpuTypeOf("nvidia.com/NVIDIA_A10-4Q") == std::optional<std::string>("A10-4Q"));
  CHECK(vgpuTypeOf("nvidia.com/NVIDIA_H200X-141C") == std::optional<std::string>("H200X-141C"));
  CHECK_FALSE(vgpuTypeOf("nvidia.com/GA102GL_A10"));
  CHECK(parseCount(nlohmann::json("4")) == std::optional<int64_t>(4));
  CHECK(parseCount(nlohmann::json(4)) == std::optional<int64_t>(4));
  CHECK_FALSE(parseCount(nlohmann::json("1.5")));
}

// converge, the path prepare and the agent share, on fixture hosts with the fake kernel.
#include "agent/converge.hpp"

#include <catch2/catch.hpp>

#include "agent/config.hpp"
#include "drivers/status.hpp"
#include "tests/support/fake_kernel.hpp"
#include "tests/support/fixture.hpp"

using namespace hostprep;
using hostprep::test::FakeKernel;
using hostprep::test::FakeModules;
using hostprep::test::Fixture;

namespace {

struct Rig {
  Fixture fx;
  FakeKernel kernel;
  FakeModules modules;
  Kernel k;
  explicit Rig(const std::string& scenario)
      : fx(scenario), kernel(fx.root()), modules(kernel), k{kernel, modules} {}
  std::optional<std::string> driver(const char* bdf) {
    return readPciFunction(kernel, *parseBdf(bdf))->driver;
  }
};

ConvergeOptions passthroughOf(const char* bdf) {
  ConvergeOptions co;
  co.mode = Mode::kVmPassthrough;
  co.selection.devices = {*parseBdf(bdf)};
  co.unbindTimeout = std::chrono::milliseconds(500);
  co.lockTimeout = std::chrono::milliseconds(500);
  return co;
}

}  // namespace

TEST_CASE("a run that converges records its mode and its selection for status", "[converge]") {
  Rig r("two-a10");
  auto c = converge(r.k, passthroughOf("0000:86:00.0"));
  REQUIRE(c.status);
  CHECK(r.driver("0000:86:00.0") == std::optional<std::string>("vfio-pci"));
  CHECK(r.driver("0000:3b:00.0") == std::optional<std::string>("nvidia"));
  CHECK(readLastMode(r.kernel) == Mode::kVmPassthrough);
  auto sel = readLastSelection(r.kernel);
  REQUIRE(sel);
  REQUIRE(*sel);
  CHECK((*sel)->devices == std::vector<Bdf>{*parseBdf("0000:86:00.0")});
  CHECK((*sel)->gpuIds.empty());
  CHECK((*sel)->hostDriver == "nvidia");
  // A second run with nothing to do records it again (the node is in that mode, those devices).
  auto again = passthroughOf("0000:86:00.0");
  again.selection.gpuIds = {{0x10de, 0x2236}};
  auto n = converge(r.k, again);
  REQUIRE(n.status);
  REQUIRE(n.plan);
  CHECK(n.plan->noop());
  CHECK((*readLastSelection(r.kernel))->gpuIds == std::vector<PciId>{{0x10de, 0x2236}});
}

TEST_CASE("a dry run or a refused run records nothing", "[converge]") {
  Rig r("two-a10");
  auto dry = passthroughOf("0000:86:00.0");
  dry.dryRun = true;
  REQUIRE(converge(r.k, dry).status);
  CHECK_FALSE(r.kernel.exists(kLastSelectionPath));
  CHECK_FALSE(readLastMode(r.kernel));

  // The holder glob defaults to /dev/<host-driver>*: nvidia-persistenced holding /dev/nvidia0
  // refuses the run.
  Rig held("held-device");
  ConvergeOptions co;
  co.mode = Mode::kVmPassthrough;
  co.lockTimeout = std::chrono::milliseconds(500);
  auto c = converge(held.k, co);
  REQUIRE_FALSE(c.status);
  CHECK(c.status.error().exit == Exit::kRefused);
  CHECK_THAT(c.status.error().message,
             Catch::Contains("pid 4242 (nvidia-persistenced) holds /dev/nvidia0"));
  CHECK_FALSE(held.kernel.exists(kLastSelectionPath));
}

TEST_CASE("the agent's vGPU config is a host path, read through the Host", "[converge][vgpu]") {
  Fixture fx;
  FakeKernel host(fx.root());
  fx.write("etc/hostprep/vgpu.yaml",
           "version: v1\nvgpu-configs:\n  a10:\n    - devices: all\n      vgpu-devices: "
           "{A10-4Q: 2}\n");
  auto cfg = loadVgpuConfig("/etc/hostprep/vgpu.yaml", "a10", &host);
  REQUIRE(cfg);
  REQUIRE(*cfg);
  REQUIRE((*cfg)->size() == 1);
  auto absent = loadVgpuConfig("etc/hostprep/absent.yaml", "a10", &host);
  REQUIRE_FALSE(absent);
  CHECK(absent.error().describe() == "--vgpu-config: cannot read " +
                                         fx.path("etc/hostprep/absent.yaml").string() +
                                         ": No such file or directory (check the path)");
  CHECK(absent.error().exit == Exit::kUsage);
}

// converge, the path prepare and the agent share, on fixture hosts with the fake kernel.
#include "agent/converge.hpp"

#include <catch2/catch.hpp>

#include "agent/config.hpp"
#include "agent/status_writer.hpp"
#include "drivers/published/status.hpp"
#include "drivers/published/status_reads.hpp"
#include "tests/agent/converge_rig.hpp"
#include "tests/support/fake_kernel.hpp"
#include "tests/support/fixture.hpp"

using namespace hostprep;
using hostprep::test::FakeKernel;
using hostprep::test::Fixture;

namespace {

using Rig = hostprep::test::FakeHost;
using hostprep::test::quickConverge;

ConvergeOptions passthroughOf(const char* bdf) {
  ConvergeOptions co = quickConverge(Mode::kVmPassthrough);
  co.selection.devices = {*parseBdf(bdf)};
  return co;
}

// The last-mode file as read back; a file that does not parse fails the test.
std::optional<LastMode> lastMode(const Host& host) {
  auto m = readLastMode(host);
  REQUIRE(m);
  return *m;
}

}  // namespace

TEST_CASE("a run that converges records its mode and its selection for status", "[converge]") {
  Rig r("two-a10");
  auto c = converge(r.k, passthroughOf("0000:86:00.0"));
  REQUIRE(c.status);
  CHECK(r.driver("0000:86:00.0") == std::optional<std::string>("vfio-pci"));
  CHECK(r.driver("0000:3b:00.0") == std::optional<std::string>("nvidia"));
  CHECK(lastMode(r.kernel) == LastMode{Mode::kVmPassthrough, {}});
  CHECK(r.kernel.read(kLastModePath).value_or("(none)") ==
        "vm-passthrough\n");  // one mode: as it always was
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

TEST_CASE("a split is recorded GPU by GPU, and status reads it back when no config names a mode",
          "[converge][mixed]") {
  Rig r("two-a10");
  ConvergeOptions co = passthroughOf("0000:86:00.0");
  co.mode = Mode::kContainer;
  co.selection.devices.clear();
  DeviceRule rule;
  rule.match.bdf = parseBdf("0000:86:00.0");
  rule.mode = Mode::kVmPassthrough;
  co.rules = {rule};
  auto c = converge(r.k, co);
  REQUIRE(c.status);
  CHECK(r.driver("0000:86:00.0") == std::optional<std::string>("vfio-pci"));
  CHECK(r.driver("0000:3b:00.0") == std::optional<std::string>("nvidia"));
  CHECK(r.kernel.read(kLastModePath).value_or("(none)") ==
        "container\n0000:3b:00.0 container\n0000:86:00.0 vm-passthrough\n");
  CHECK(lastMode(r.kernel) == LastMode{Mode::kContainer,
                                       {{*parseBdf("0000:3b:00.0"), Mode::kContainer},
                                        {*parseBdf("0000:86:00.0"), Mode::kVmPassthrough}}});
  // status with no config: the split the run left, not its default for every GPU.
  StatusRequest req;
  auto o = observe(r.kernel, req);
  REQUIRE(o);
  CHECK((*o)->doc.desiredModeSource == "last-prepare");
  CHECK((*o)->doc.desiredSummary() == "mixed");
  CHECK((*o)->doc.desiredSplit ==
        std::map<Mode, int>{{Mode::kContainer, 1}, {Mode::kVmPassthrough, 1}});
  CHECK((*o)->doc.converged);
  // The same split again: nothing to do, and the run says so.
  auto again = converge(r.k, co);
  REQUIRE(again.status);
  REQUIRE(again.plan);
  CHECK(
      nothingToDo(*again.plan) ==
      "nothing to do: 4 device(s) already in their modes, mixed (container: 1, vm-passthrough: 1)");
  // Every GPU back to one mode: the file is one line again.
  co.rules.clear();
  REQUIRE(converge(r.k, co).status);
  CHECK(r.kernel.read(kLastModePath).value_or("(none)") == "container\n");
}

TEST_CASE("how runs name a mode or a split", "[converge][mixed]") {
  CHECK(modeSummary({}, Mode::kVmVgpu) == "vm-vgpu");
  CHECK(modeSummary({{Mode::kVmPassthrough, 4}}, Mode::kContainer) == "vm-passthrough");
  CHECK(modeSummary({{Mode::kContainer, 1}, {Mode::kVmPassthrough, 3}}, Mode::kContainer) ==
        "mixed (container: 1, vm-passthrough: 3)");
  CHECK(inModes({{Mode::kContainer, 2}}, Mode::kContainer) == "in container mode");
  CHECK(inModes({{Mode::kVmPassthrough, 1}, {Mode::kVmVgpu, 1}}, Mode::kVmVgpu) ==
        "in their modes, mixed (vm-passthrough: 1, vm-vgpu: 1)");
  CHECK(targetText(Mode::kContainer, {}) == "container");
  CHECK(targetText(Mode::kContainer, {DeviceRule{}, DeviceRule{}}) ==
        "container and 2 devices rule(s)");
}

TEST_CASE("a dry run or a refused run records nothing", "[converge]") {
  Rig r("two-a10");
  auto dry = passthroughOf("0000:86:00.0");
  dry.dryRun = true;
  REQUIRE(converge(r.k, dry).status);
  CHECK_FALSE(r.kernel.exists(kLastSelectionPath));
  CHECK_FALSE(lastMode(r.kernel));

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
  auto cfg = loadVgpuConfig("/etc/hostprep/vgpu.yaml", "a10", host);
  REQUIRE(cfg);
  REQUIRE(*cfg);
  REQUIRE((*cfg)->size() == 1);
  auto absent = loadVgpuConfig("/etc/hostprep/absent.yaml", "a10", host);
  REQUIRE_FALSE(absent);
  CHECK(absent.error().describe() ==
        "--vgpu-config: cannot read /etc/hostprep/absent.yaml under --root " + fx.root().string() +
            " (read as " + fx.path("etc/hostprep/absent.yaml").string() +
            "): No such file or directory (check the path: a file option names a host path, "
            "under --root)");
  CHECK(absent.error().exit == Exit::kUsage);
}

namespace {

ConvergeOptions splitOf(const char* passthroughBdf) {
  ConvergeOptions co = quickConverge(Mode::kContainer);
  co.rules = {{{*parseBdf(passthroughBdf), {}, {}, {}}, Mode::kVmPassthrough}};
  return co;
}

// Two A10s in one IOMMU group (a PCIe switch without ACS), the first with its audio function.
const char* kSharedGroup = R"(kernel: 6.1.0-test-amd64
cmdline: BOOT_IMAGE=/vmlinuz root=/dev/nvme0n1p2 ro intel_iommu=on
modules: [nvidia, snd_hda_intel, nvme]
available_modules: [vfio, vfio_pci, vfio_pci_core, vfio_iommu_type1]
root_disk: 0000:5e:00.0
devices:
  - {bdf: "0000:3b:00.0", id: "10de:2236", class: "030200", driver: nvidia, group: 30}
  - {bdf: "0000:3b:00.1", id: "10de:1aef", class: "040300", driver: snd_hda_intel, group: 30}
  - {bdf: "0000:3c:00.0", id: "10de:2236", class: "030200", driver: nvidia, group: 30}
  - {bdf: "0000:5e:00.0", id: "144d:a80a", class: "010802", driver: nvme, group: 40}
)";

struct SharedRig : hostprep::test::FakeHost {
  SharedRig() : FakeHost(Fixture::HostYaml{kSharedGroup}) {}
};

}  // namespace

TEST_CASE("a split converges both ways in one run, and the next run is a no-op",
          "[converge][mixed]") {
  Rig r("two-a10");
  auto first = converge(r.k, splitOf("0000:3b:00.0"));
  REQUIRE(first.status);
  CHECK(r.driver("0000:3b:00.0") == std::optional<std::string>("vfio-pci"));
  CHECK(r.driver("0000:3b:00.1") == std::optional<std::string>("vfio-pci"));  // with its GPU
  CHECK(r.driver("0000:86:00.0") == std::optional<std::string>("nvidia"));
  CHECK(r.driver("0000:86:00.1") == std::optional<std::string>("snd_hda_intel"));

  // Reversed: 3b:00.0 vfio-pci -> nvidia while 86:00.0 nvidia -> vfio-pci, one plan, one journal.
  auto back = converge(r.k, splitOf("0000:86:00.0"));
  REQUIRE(back.status);
  REQUIRE(back.plan);
  CHECK(back.plan->split() ==
        std::map<Mode, int>{{Mode::kContainer, 1}, {Mode::kVmPassthrough, 1}});
  std::map<std::string, std::string> to;
  for (const auto& mv : back.plan->moves) {
    if (mv.changes) to[mv.bdf.str()] = std::string(toString(mv.mode)) + " " + mv.target();
  }
  CHECK(to ==
        std::map<std::string, std::string>{{"0000:3b:00.0", "container a driver of module nvidia"},
                                           {"0000:3b:00.1", "container its own driver"},
                                           {"0000:86:00.0", "vm-passthrough vfio-pci"},
                                           {"0000:86:00.1", "vm-passthrough vfio-pci"}});
  CHECK(r.driver("0000:3b:00.0") == std::optional<std::string>("nvidia"));
  CHECK(r.driver("0000:3b:00.1") == std::optional<std::string>("snd_hda_intel"));
  CHECK(r.driver("0000:86:00.0") == std::optional<std::string>("vfio-pci"));
  CHECK(r.driver("0000:86:00.1") == std::optional<std::string>("vfio-pci"));
  CHECK_FALSE(r.kernel.exists(kJournalPath));

  auto again = converge(r.k, splitOf("0000:86:00.0"));
  REQUIRE(again.status);
  REQUIRE(again.plan);
  CHECK(again.plan->noop());
}

TEST_CASE("mixes that cannot be are refused before anything changes", "[converge][mixed]") {
  Rig r("two-a10");
  const auto before = r.fx.deviceState();
  auto co = splitOf("0000:3b:00.0");
  co.rules[0].mode = Mode::kVmVgpu;  // container + vm-vgpu
  auto c = converge(r.k, co);
  REQUIRE_FALSE(c.status);
  CHECK(c.status.error().exit == Exit::kUsage);
  CHECK_THAT(c.status.error().message,
             Catch::Contains("one nvidia module cannot be both the datacenter driver and the "
                             "vGPU manager"));
  CHECK(r.fx.deviceState() == before);

  SharedRig s;
  const auto sharedBefore = s.fx.deviceState();
  auto split = converge(s.k, splitOf("0000:3c:00.0"));
  REQUIRE_FALSE(split.status);
  CHECK(split.status.error().exit == Exit::kRefused);
  CHECK_THAT(split.status.error().message,
             Catch::Contains("GPU 0000:3b:00.0 (10de:2236 3D controller) (container) and GPU "
                             "0000:3c:00.0 (10de:2236 3D controller) (vm-passthrough) share "
                             "IOMMU group 30"));
  CHECK(s.fx.deviceState() == sharedBefore);
}

TEST_CASE(
    "prepare --devices A does not drag an unselected GPU B of A's group along without --force",
    "[converge][mixed]") {
  SharedRig s;
  const auto before = s.fx.deviceState();
  auto co = passthroughOf("0000:3b:00.0");
  auto c = converge(s.k, co);
  REQUIRE_FALSE(c.status);
  CHECK(c.status.error().exit == Exit::kRefused);
  CHECK(c.status.error().message ==
        "refusing to move a GPU that was not selected: GPU 0000:3c:00.0 (10de:2236 3D controller) "
        "is not selected but shares IOMMU group 30 with 0000:3b:00.0");
  CHECK(c.status.error().advice ==
        "select it too (--devices), or pass --force to move it with the other");
  CHECK(s.fx.deviceState() == before);
  co.dryRun = true;  // a dry run says the same
  CHECK_FALSE(converge(s.k, co).status);

  // Selected too: both move.
  auto both = passthroughOf("0000:3b:00.0");
  both.selection.devices.push_back(*parseBdf("0000:3c:00.0"));
  both.dryRun = true;
  CHECK(converge(s.k, both).status);
  // --force: B moves as the companion it is.
  co.dryRun = false;
  co.force = true;
  REQUIRE(converge(s.k, co).status);
  CHECK(readPciFunction(s.kernel, *parseBdf("0000:3c:00.0"))->driver ==
        std::optional<std::string>("vfio-pci"));
}

TEST_CASE("a run reads whole only what its selection can reach", "[converge]") {
  Rig r("two-a10");
  auto c = converge(r.k, passthroughOf("0000:86:00.0"));
  REQUIRE(c.status);
  REQUIRE(c.snapshot);
  const auto* gpu = c.snapshot->find(*parseBdf("0000:86:00.0"));
  const auto* audio = c.snapshot->find(*parseBdf("0000:86:00.1"));
  const auto* nvme = c.snapshot->find(*parseBdf("0000:5e:00.0"));
  REQUIRE(gpu);
  REQUIRE(audio);
  REQUIRE(nvme);
  // The GPUs and the members of their groups, whole.
  CHECK(gpu->iommuGroup == std::optional<int>(60));
  CHECK(audio->iommuGroup == std::optional<int>(60));
  CHECK(audio->numaNode == std::optional<int>(1));
  CHECK(c.snapshot->iommuGroups.at(60).size() == 2);
  // The boot NVMe never moves: its id, class and driver only, not its group or NUMA node.
  CHECK(nvme->id.vendor == 0x144d);
  CHECK(nvme->classCode == 0x010802);
  CHECK(nvme->driver == std::optional<std::string>("nvme"));
  CHECK_FALSE(nvme->iommuGroup);
  CHECK(c.snapshot->iommuGroups.at(40).empty());
}

TEST_CASE("a passthrough plan names the VFIO variant driver modules.alias gives a device",
          "[converge]") {
  Rig r("two-a10");
  r.fx.write("lib/modules/6.1.0-test-amd64/modules.alias",
             "alias pci:v000010DEd*sv*sd*bc03sc*i* nvidia\n"
             "alias vfio_pci:v*d*sv*sd*bc*sc*i* vfio_pci\n"
             "alias vfio_pci:v000010DEd00002236sv*sd*bc*sc*i* a10_vfio_pci");
  ConvergeOptions co;
  co.mode = Mode::kVmPassthrough;
  co.dryRun = true;
  auto c = converge(r.k, co);
  REQUIRE(c.status);
  REQUIRE(c.plan);
  int gpus = 0;
  for (const auto& mv : c.plan->moves) {
    if (mv.role == Role::kGpu) {
      ++gpus;
      CHECK(mv.toDriver == "a10-vfio-pci");
    } else {
      CHECK(mv.toDriver == "vfio-pci");  // the audio function: only the generic alias matches
    }
  }
  CHECK(gpus == 2);
}

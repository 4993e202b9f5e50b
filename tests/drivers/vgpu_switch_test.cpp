// vm-vgpu end to end on the fake kernel: host driver, SR-IOV VFs, vGPU devices on both
// interfaces; validation before any write; leaving vm-vgpu; rollback and crash recovery.
#include <catch2/catch.hpp>

#include "drivers/executor.hpp"
#include "drivers/journal.hpp"
#include "drivers/selection.hpp"
#include "drivers/snapshot.hpp"
#include "drivers/vgpu.hpp"
#include "drivers/vgpu_config.hpp"
#include "tests/support/fake_kernel.hpp"
#include "tests/support/fixture.hpp"

using namespace hostprep;
using hostprep::test::FakeKernel;
using hostprep::test::FakeModules;
using hostprep::test::Fixture;

namespace {

const char* kConfig = R"(version: v1
vgpu-configs:
  A10-4Q:
    - device-filter: ["0x223610DE"]
      devices: all
      vgpu-devices:
        A10-4Q: 6
  too-many:
    - devices: all
      vgpu-devices: {A10-4Q: 7}
  wrong-family:
    - devices: all
      vgpu-devices: {T4-4Q: 1}
  t4-4q:
    - devices: all
      vgpu-devices: {T4-4Q: 4}
  t4-4q-5:
    - devices: [1]
      vgpu-devices: {T4-4Q: 5}
  t4-3q:
    - devices: all
      vgpu-devices: {T4-3Q: 1}
  h100-20c:
    - devices: all
      vgpu-devices: {H100-20C: 4}
  mtty:
    - devices: all
      vgpu-devices: {mtty-2: 2}
  serial:
    - devices: all
      vgpu-devices: {serial: 1}
)";

struct VRig {
  Fixture fx;
  FakeKernel kernel;
  FakeModules modules;
  Kernel k;
  ApplyOptions opt;
  SelectionOptions so;
  std::string hostDriver = "nvidia";

  explicit VRig(const std::string& scenario)
      : fx(scenario), kernel(fx.root()), modules(kernel), k{kernel, modules} {
    opt.unbindTimeout = std::chrono::milliseconds(200);
  }

  // config: a name in kConfig, or "" for the embedded defaults.
  Result<Plan> tryPlan(Mode mode, const std::string& config = {}) {
    auto s = readSnapshot(kernel);
    REQUIRE(s);
    auto sel = selectDevices(*s, so);
    REQUIRE(sel);
    PlanInputs in{mode, hostDriver, ""};
    in.vgpuHost = readVgpuHost(kernel, *s);
    in.vgpuVfioAvailable = modules.available("nvidia_vgpu_vfio");
    if (!config.empty()) {
      auto cfg = parseVgpuConfig(kConfig, "test.yaml");
      REQUIRE(cfg);
      REQUIRE(cfg->find(config));
      in.vgpuConfig = *cfg->find(config);
      in.vgpuConfigName = config;
    }
    return makePlan(*s, *sel, in);
  }
  Plan plan(Mode mode, const std::string& config = {}) {
    auto p = tryPlan(mode, config);
    if (!p) FAIL(p.error().describe());
    return std::move(*p);
  }
  void apply(Mode mode, const std::string& config = {}) {
    auto res = applyPlan(k, plan(mode, config), opt);
    if (!res) FAIL(res.error().describe());
  }
  std::string read(const std::string& rel) { return readTrimmed(kernel, rel).value_or("<absent>"); }
  std::vector<VgpuDevice> vgpus() {
    auto s = readSnapshot(kernel);
    return readVgpuHost(kernel, *s).devices;
  }
  std::optional<std::string> driver(const std::string& bdf) {
    auto f = readPciFunction(kernel, *parseBdf(bdf));
    return f ? f->driver : std::nullopt;
  }
};

std::vector<std::string> describe(const Plan& p) {
  std::vector<std::string> out;
  for (const auto& st : p.steps) out.push_back(st.describe());
  return out;
}

// What differs between two deviceState()s, one "key: before -> after" per line ("" when equal).
std::string diff(const std::map<std::string, std::string>& a,
                 const std::map<std::string, std::string>& b) {
  std::string out;
  for (const auto& [k, v] : a) {
    auto it = b.find(k);
    if (it == b.end()) {
      out += k + ": " + v + " -> (gone)\n";
    } else if (it->second != v) {
      out += k + ": " + v + " -> " + it->second + "\n";
    }
  }
  for (const auto& [k, v] : b) {
    if (!a.count(k)) out += k + ": (new) -> " + v + "\n";
  }
  return out;
}

std::map<std::string, int> advertised(std::initializer_list<std::pair<const std::string, int>> l) {
  return l;
}

}  // namespace

TEST_CASE("two T4s: mdev devices on the PF, the GRID prefix matched, instances counting down",
          "[vgpu]") {
  VRig r("vgpu-two-t4");
  auto before = r.fx.deviceState();
  Plan p = r.plan(Mode::kVmVgpu);  // embedded default: T4-8Q x 2 per card
  CHECK(p.sriov.empty());
  REQUIRE(p.vgpus.size() == 4);
  CHECK(p.vgpus[0].typeName == "GRID T4-8Q");
  CHECK(p.vgpus[0].iface == VgpuInterface::kMdev);
  CHECK(p.vgpus[1].uuid == vgpuUuid(*parseBdf("0000:3b:00.0"), "T4-8Q", 1));
  CHECK(expectedAdvertised(p) == advertised({{"nvidia.com/GRID_T4-8Q", 4}}));
  CHECK(describe(p) ==
        std::vector<std::string>{"0000:3b:00.0: create vGPU T4-8Q (mdev " + p.vgpus[0].uuid + ")",
                                 "0000:3b:00.0: create vGPU T4-8Q (mdev " + p.vgpus[1].uuid + ")",
                                 "0000:d8:00.0: create vGPU T4-8Q (mdev " + p.vgpus[2].uuid + ")",
                                 "0000:d8:00.0: create vGPU T4-8Q (mdev " + p.vgpus[3].uuid + ")"});
  CHECK(r.kernel.writeCount() == 0);
  CHECK(diff(before, r.fx.deviceState()) == "");  // planning touches nothing

  REQUIRE(applyPlan(r.k, p, r.opt));
  const std::string types = "sys/bus/pci/devices/0000:3b:00.0/mdev_supported_types/";
  CHECK(r.read(types + "nvidia-225/available_instances") == "0");
  CHECK(r.read(types + "nvidia-224/available_instances") == "0");  // one type per GPU
  auto devs = r.vgpus();
  REQUIRE(devs.size() == 4);
  for (const auto& d : devs) CHECK(d.typeName == "GRID T4-8Q");
  CHECK(r.read("sys/bus/mdev/devices/" + p.vgpus[3].uuid + "/mdev_type/name") == "GRID T4-8Q");
  CHECK(r.plan(Mode::kVmVgpu).noop());  // idempotent: the same UUIDs are already there
  CHECK_FALSE(r.kernel.exists("run/hostprep/journal.json"));

  SECTION("another profile removes the old devices first, then creates the new ones") {
    Plan q = r.plan(Mode::kVmVgpu, "t4-4q");
    auto steps = describe(q);
    REQUIRE(steps.size() == 4 + 8);
    CHECK_THAT(steps[0], Catch::StartsWith("0000:3b:00.0: remove vGPU "));
    CHECK(steps[4] == "0000:3b:00.0: create vGPU T4-4Q (mdev " +
                          vgpuUuid(*parseBdf("0000:3b:00.0"), "T4-4Q", 0) + ")");
    REQUIRE(applyPlan(r.k, q, r.opt));
    CHECK(r.read(types + "nvidia-224/available_instances") == "0");
    CHECK(r.vgpus().size() == 8);
    CHECK(expectedAdvertised(q) == advertised({{"nvidia.com/GRID_T4-4Q", 8}}));
  }
  SECTION("back to container mode removes every device and gives the instances back") {
    Plan c = r.plan(Mode::kContainer);
    CHECK(describe(c).size() == 4);
    REQUIRE(applyPlan(r.k, c, r.opt));
    CHECK(diff(before, r.fx.deviceState()) == "");
  }
}

TEST_CASE("T4 requests the GPU cannot hold are refused before anything changes", "[vgpu]") {
  VRig r("vgpu-two-t4");
  auto p = r.tryPlan(Mode::kVmVgpu, "t4-4q-5");
  REQUIRE_FALSE(p);
  CHECK(p.error().exit == Exit::kUsage);
  CHECK(p.error().message ==
        "vgpu-config 't4-4q-5': GPU 0000:d8:00.0 (10de:1eb8 3D controller) cannot hold T4-4Q x 5: "
        "at most 4 per GPU");
  auto q = r.tryPlan(Mode::kVmVgpu, "t4-3q");
  REQUIRE_FALSE(q);
  CHECK(q.error().message ==
        "vgpu-config 't4-3q': GPU 0000:3b:00.0 (10de:1eb8 3D controller) does not offer vGPU type "
        "T4-3Q (it offers: GRID T4-1Q (nvidia-222), GRID T4-2Q (nvidia-223), GRID T4-4Q "
        "(nvidia-224), GRID T4-8Q (nvidia-225), GRID T4-16Q (nvidia-226))");
  CHECK(r.kernel.writeCount() == 0);
}

TEST_CASE("two A10s: VFs enabled first, one vGPU per VF, default A10-12Q x 2 per card", "[vgpu]") {
  VRig r("vgpu-two-a10");
  auto before = r.fx.deviceState();
  Plan p = r.plan(Mode::kVmVgpu);
  REQUIRE(p.sriov.size() == 2);
  CHECK(p.sriov[0].to == 16);
  REQUIRE(p.vgpus.size() == 4);
  CHECK(p.vgpus[0].parent.str() == "0000:3b:00.4");  // VF 0: routing id + offset 4
  CHECK(p.vgpus[1].parent.str() == "0000:3b:00.5");
  CHECK(p.vgpus[2].parent.str() == "0000:86:00.4");
  CHECK_FALSE(p.vgpus[0].iface);  // decided once the VF exists
  CHECK(expectedAdvertised(p) == advertised({{"nvidia.com/NVIDIA_A10-12Q", 4}}));
  auto steps = describe(p);
  CHECK(std::vector<std::string>(steps.begin(), steps.begin() + 13) ==
        std::vector<std::string>{
            "load module nvidia_vgpu_vfio",  // available for this kernel, not loaded yet
            "load module pci_pf_stub",
            "0000:3b:00.0: acquire the nvidia unbindLock",
            "0000:3b:00.0: set driver_override to pci-pf-stub",
            "0000:3b:00.0: unbind from nvidia",
            "0000:3b:00.0: probe drivers",
            "0000:3b:00.0: verify it is bound to pci-pf-stub",
            "0000:3b:00.0: set sriov_numvfs to 16",
            "0000:3b:00.0: unbind from pci-pf-stub",
            "0000:3b:00.0: clear driver_override",
            "0000:3b:00.0: probe drivers",
            "0000:3b:00.0: verify it is bound to nvidia",
            "0000:86:00.0: acquire the nvidia unbindLock",
        });
  CHECK(steps[22] == "0000:3b:00.4: probe drivers");  // after both PFs are back on nvidia
  CHECK(steps[23] == "0000:3b:00.4: verify it is bound to nvidia");
  CHECK(steps.back() == "0000:86:00.5: create vGPU A10-12Q (mdev " + p.vgpus[3].uuid + ")");
  CHECK(r.kernel.writeCount() == 0);

  REQUIRE(applyPlan(r.k, p, r.opt));
  CHECK(r.read("sys/bus/pci/devices/0000:3b:00.0/sriov_numvfs") == "16");
  CHECK(r.driver("0000:3b:00.0") == std::optional<std::string>("nvidia"));
  CHECK_FALSE(readPciFunction(r.kernel, *parseBdf("0000:3b:00.0"))->driverOverride);
  CHECK(r.driver("0000:86:02.3") == std::optional<std::string>("nvidia"));  // VF 15, autoprobed
  CHECK(r.driver("0000:3b:00.1") == std::optional<std::string>("snd_hda_intel"));
  auto devs = r.vgpus();
  REQUIRE(devs.size() == 4);
  CHECK(devs[0].parent.str() == "0000:3b:00.4");
  CHECK(devs[0].typeName == "NVIDIA A10-12Q");
  CHECK(devs[0].uuid == p.vgpus[0].uuid);
  CHECK(devs[0].group.has_value());
  // A third A10-12Q on the card has no room: every other VF shows 0 instances of it.
  CHECK(
      r.read(
          "sys/bus/pci/devices/0000:3b:00.6/mdev_supported_types/nvidia-594/available_instances") ==
      "0");
  CHECK(r.plan(Mode::kVmVgpu).noop());

  SECTION("A10-4Q gives 6 per card, 12 on the node") {
    Plan q = r.plan(Mode::kVmVgpu, "A10-4Q");
    CHECK(q.sriov.empty());  // VFs are already on: no reset
    REQUIRE(applyPlan(r.k, q, r.opt));
    auto now = r.vgpus();
    CHECK(now.size() == 12);
    for (const auto& d : now) CHECK(d.typeName == "NVIDIA A10-4Q");
    CHECK(expectedAdvertised(q) == advertised({{"nvidia.com/NVIDIA_A10-4Q", 12}}));
    CHECK(r.plan(Mode::kVmVgpu, "A10-4Q").noop());
  }
  SECTION("vm-vgpu -> container removes the devices, then the VFs, then nothing else moves") {
    Plan c = r.plan(Mode::kContainer);
    auto cs = describe(c);
    REQUIRE(cs.size() > 4);
    for (size_t i = 0; i < 4; ++i) CHECK_THAT(cs[i], Catch::Contains("remove vGPU"));
    CHECK(cs[4] == "0000:3b:00.0: acquire the nvidia unbindLock");
    CHECK(cs[9] == "0000:3b:00.0: set sriov_numvfs to 0");
  }
}

TEST_CASE("leaving vm-vgpu for container puts the A10 host back exactly as it was", "[vgpu]") {
  VRig r("vgpu-two-a10");
  auto before = r.fx.deviceState();
  r.apply(Mode::kVmVgpu);
  Plan c = r.plan(Mode::kContainer);
  auto cs = describe(c);
  REQUIRE(cs.size() >= 6);
  CHECK_THAT(cs[0], Catch::StartsWith("0000:3b:00.4: remove vGPU "));  // on the VF
  REQUIRE(applyPlan(r.k, c, r.opt));
  CHECK(diff(before, r.fx.deviceState()) == "");
  CHECK(r.plan(Mode::kContainer).noop());
}

TEST_CASE("A10-4Q x 7 is refused before anything changes", "[vgpu]") {
  VRig r("vgpu-two-a10");
  auto before = r.fx.deviceState();
  auto p = r.tryPlan(Mode::kVmVgpu, "too-many");
  REQUIRE_FALSE(p);
  CHECK(
      p.error().describe() ==
      "vgpu-config 'too-many': GPU 0000:3b:00.0 (10de:2236 3D controller) cannot hold A10-4Q x 7: "
      "at most 6 per GPU (lower the count in vgpu-devices, or choose a smaller profile)");
  auto w = r.tryPlan(Mode::kVmVgpu, "wrong-family");
  REQUIRE_FALSE(w);
  CHECK_THAT(w.error().message,
             Catch::Contains("does not offer vGPU type T4-4Q (its profiles are the A10-* types"));
  CHECK(r.kernel.writeCount() == 0);
  CHECK(diff(before, r.fx.deviceState()) == "");
  SECTION("also once the VFs are on and show their types") {
    r.apply(Mode::kVmVgpu);
    auto again = r.tryPlan(Mode::kVmVgpu, "too-many");
    REQUIRE_FALSE(again);
    CHECK_THAT(again.error().message, Catch::EndsWith("cannot hold A10-4Q x 7: at most 6 per GPU"));
    auto w2 = r.tryPlan(Mode::kVmVgpu, "wrong-family");
    REQUIRE_FALSE(w2);
    CHECK_THAT(
        w2.error().message,
        Catch::Contains("does not offer vGPU type T4-4Q (it offers: NVIDIA A10-1Q (nvidia-588)"));
  }
}

TEST_CASE("H100 on the per-VF interface: current_vgpu_type on each VF", "[vgpu]") {
  VRig r("vgpu-h100-pervf");
  auto before = r.fx.deviceState();
  Plan p = r.plan(Mode::kVmVgpu);  // default H100-40C x 2
  REQUIRE(p.vgpus.size() == 2);
  REQUIRE(applyPlan(r.k, p, r.opt));
  CHECK(r.read("sys/bus/pci/devices/0000:41:00.4/nvidia/current_vgpu_type") == "1019");
  CHECK(r.read("sys/bus/pci/devices/0000:41:00.5/nvidia/current_vgpu_type") == "1019");
  CHECK(r.read("sys/bus/pci/devices/0000:41:00.6/nvidia/current_vgpu_type") == "0");
  // The card is full of H100-40C: the next VF can create nothing.
  CHECK(r.read("sys/bus/pci/devices/0000:41:00.6/nvidia/creatable_vgpu_types") ==
        "ID    : vGPU Name");
  auto devs = r.vgpus();
  REQUIRE(devs.size() == 2);
  CHECK(devs[0].iface == VgpuInterface::kPerVf);
  CHECK(devs[0].typeName == "NVIDIA H100-40C");
  Plan again = r.plan(Mode::kVmVgpu);
  CHECK(again.noop());
  REQUIRE(again.vgpus.size() == 2);
  CHECK(again.vgpus[0].iface == VgpuInterface::kPerVf);
  CHECK(expectedAdvertised(again) == advertised({{"nvidia.com/NVIDIA_H100-40C", 2}}));

  SECTION("another profile clears the VFs' types first") {
    Plan q = r.plan(Mode::kVmVgpu, "h100-20c");
    auto qs = describe(q);
    CHECK(qs[0] == "0000:41:00.4: remove vGPU type 1019 (current_vgpu_type)");
    REQUIRE(applyPlan(r.k, q, r.opt));
    CHECK(r.vgpus().size() == 4);
    CHECK(r.read("sys/bus/pci/devices/0000:41:00.7/nvidia/current_vgpu_type") == "1018");
  }
  SECTION("and back to container") {
    REQUIRE(applyPlan(r.k, r.plan(Mode::kContainer), r.opt));
    CHECK(diff(before, r.fx.deviceState()) == "");
  }
}

TEST_CASE("a non-NVIDIA mdev parent selected with --gpu-ids, types named by directory", "[vgpu]") {
  VRig r("vgpu-mtty");
  r.so.gpuIds = {PciId{0x1234, 0x11e8}};
  r.hostDriver = "standin";
  auto none = r.tryPlan(Mode::kVmVgpu);
  REQUIRE_FALSE(none);
  CHECK_THAT(none.error().describe(),
             Catch::Contains("no embedded default vGPU config for this model (pass --vgpu-config"));
  auto amb = r.tryPlan(Mode::kVmVgpu, "serial");
  REQUIRE_FALSE(amb);
  CHECK_THAT(amb.error().describe(), Catch::Contains("vGPU type serial is ambiguous"));
  Plan p = r.plan(Mode::kVmVgpu, "mtty");
  REQUIRE(p.vgpus.size() == 2);
  CHECK(p.vgpus[0].typeName == "Dual port serial");
  CHECK(expectedAdvertised(p) == advertised({{"nvidia.com/Dual_port_serial", 2}}));
  REQUIRE(applyPlan(r.k, p, r.opt));
  CHECK(
      r.read("sys/bus/pci/devices/0000:00:05.0/mdev_supported_types/mtty-2/available_instances") ==
      "10");
  CHECK(r.vgpus().size() == 2);
  CHECK(r.plan(Mode::kVmVgpu, "mtty").noop());
}

TEST_CASE("a vGPU device in use blocks leaving vm-vgpu", "[vgpu]") {
  VRig r("vgpu-two-t4");
  r.apply(Mode::kVmVgpu);
  auto devs = r.vgpus();
  REQUIRE(devs[0].group);
  const std::string node = "/dev/vfio/" + std::to_string(*devs[0].group);
  r.fx.write("proc/777/comm", "qemu-system-x86\n");
  r.fx.symlink("proc/777/fd/9", node);
  auto holders = planHolders(r.kernel, r.plan(Mode::kVmPassthrough), r.opt);
  REQUIRE(holders.size() == 1);
  CHECK(holders[0].describe() == "pid 777 (qemu-system-x86) holds " + node);
}

TEST_CASE("sriov_drivers_autoprobe off: VFs stay driverless except those that carry vGPUs",
          "[vgpu]") {
  VRig r("vgpu-two-a10");
  r.fx.write("sys/devices/pci0000:3b/0000:3b:00.0/sriov_drivers_autoprobe", "0\n");
  Plan p = r.plan(Mode::kVmVgpu);
  auto steps = describe(p);
  CHECK(std::find(steps.begin(), steps.end(), "0000:3b:00.4: set driver_override to nvidia") !=
        steps.end());
  // The fake kernel's autoprobe honours the flag too.
  REQUIRE(applyPlan(r.k, p, r.opt));
  CHECK(r.driver("0000:3b:00.4") == std::optional<std::string>("nvidia"));
  CHECK_FALSE(r.driver("0000:3b:00.6"));
  CHECK(r.driver("0000:86:00.6") == std::optional<std::string>("nvidia"));
  CHECK(r.vgpus().size() == 4);
}

TEST_CASE("an unbindLock the driver refuses stops the run and puts everything back", "[vgpu]") {
  VRig r("vgpu-two-a10");
  auto before = r.fx.deviceState();
  r.fx.write("fake/unbindlock/0000:86:00.0", "refuse\n");
  auto res = applyPlan(r.k, r.plan(Mode::kVmVgpu), r.opt);
  REQUIRE_FALSE(res);
  CHECK(res.error().describe() ==
        "0000:86:00.0: acquire the nvidia unbindLock: the nvidia driver did not grant "
        "/proc/driver/nvidia/gpus/0000:86:00.0/unbindLock: Device or resource busy (a process uses "
        "the GPU (nvidia-smi, nvidia-persistenced, a VM); stop it and run again; every device was "
        "put back on its original driver)");
  CHECK(diff(before, r.fx.deviceState()) == "");
}

TEST_CASE("the fake kernel's sriov_numvfs has the real kernel's errors", "[vgpu][fake]") {
  VRig r("vgpu-two-a10");
  const std::string pf = "sys/bus/pci/devices/0000:3b:00.0/sriov_numvfs";
  CHECK(r.kernel.writeAttr(pf, "4").error().err == ENOENT);  // nvidia: no sriov_configure
  REQUIRE(r.kernel.writeAttr("sys/bus/pci/drivers/nvidia/unbind", "0000:3b:00.0"));
  CHECK(r.kernel.writeAttr(pf, "4").error().err == ENOENT);  // no driver
  REQUIRE(r.kernel.loadModule("pci_pf_stub"));
  REQUIRE(r.kernel.writeAttr("sys/bus/pci/devices/0000:3b:00.0/driver_override", "pci-pf-stub"));
  REQUIRE(r.kernel.writeAttr("sys/bus/pci/drivers_probe", "0000:3b:00.0"));
  CHECK(r.kernel.writeAttr(pf, "17").error().err == ERANGE);
  REQUIRE(r.kernel.writeAttr(pf, "4"));
  auto f = readPciFunction(r.kernel, *parseBdf("0000:3b:00.0"));
  REQUIRE(f->virtfns.size() == 4);
  CHECK(f->virtfns[3].str() == "0000:3b:00.7");
  auto vf = readPciFunction(r.kernel, f->virtfns[0]);
  CHECK(vf->physfn == f->bdf);
  CHECK(vf->iommuGroup == 300);
  CHECK(vf->driver == std::optional<std::string>("nvidia"));
  CHECK(r.kernel.exists("sys/class/mdev_bus/0000:3b:00.4"));
  CHECK(r.kernel.writeAttr(pf, "8").error().err == EBUSY);  // non-zero -> other non-zero
  REQUIRE(r.kernel.writeAttr(pf, "0"));
  CHECK(readPciFunction(r.kernel, *parseBdf("0000:3b:00.0"))->virtfns.empty());
  CHECK_FALSE(r.kernel.exists("sys/bus/pci/devices/0000:3b:00.4"));
  CHECK_FALSE(r.kernel.exists("sys/kernel/iommu_groups/300"));
}

TEST_CASE("a failure injected at every write of a vGPU plan leaves the host exactly as it was",
          "[vgpu][faults]") {
  struct Case {
    const char* scenario;
    Mode from;  // applied first (kContainer: nothing)
    Mode to;
    const char* config;
  };
  for (const Case& c : {Case{"vgpu-two-t4", Mode::kContainer, Mode::kVmVgpu, ""},
                        Case{"vgpu-two-a10", Mode::kContainer, Mode::kVmVgpu, ""},
                        Case{"vgpu-h100-pervf", Mode::kContainer, Mode::kVmVgpu, ""},
                        Case{"vgpu-two-a10", Mode::kVmVgpu, Mode::kContainer, ""},
                        Case{"vgpu-two-a10", Mode::kVmVgpu, Mode::kVmVgpu, "A10-4Q"},
                        Case{"vgpu-h100-pervf", Mode::kVmVgpu, Mode::kVmPassthrough, ""}}) {
    size_t first = 0, total = 0;
    {
      VRig probe(c.scenario);
      if (c.from == Mode::kVmVgpu) probe.apply(Mode::kVmVgpu);
      first = probe.kernel.writeCount();
      probe.apply(c.to, c.config);
      total = probe.kernel.writeCount() - first;
    }
    REQUIRE(total > 2);
    for (size_t k = 0; k < total; ++k) {
      INFO(c.scenario << " -> " << toString(c.to) << " " << c.config << ": write " << k << " of "
                      << total);
      VRig r(c.scenario);
      if (c.from == Mode::kVmVgpu) r.apply(Mode::kVmVgpu);
      auto before = r.fx.deviceState();
      Plan p = r.plan(c.to, c.config);
      r.kernel.failWrite(r.kernel.writeCount() + k, EIO);
      auto res = applyPlan(r.k, p, r.opt);
      REQUIRE_FALSE(res);
      CHECK(res.error().err == EIO);
      CHECK_THAT(res.error().advice, Catch::Contains("every device was put back"));
      CHECK(diff(before, r.fx.deviceState()) == "");
      CHECK_FALSE(r.kernel.exists("run/hostprep/journal.json"));
    }
  }
}

TEST_CASE("a crash after any step of a vGPU plan is resolved by the next run", "[vgpu][crash]") {
  for (auto [scenario, from, to] :
       {std::tuple{"vgpu-two-a10", Mode::kContainer, Mode::kVmVgpu},
        std::tuple{"vgpu-two-a10", Mode::kVmVgpu, Mode::kContainer},
        std::tuple{"vgpu-h100-pervf", Mode::kContainer, Mode::kVmVgpu},
        std::tuple{"vgpu-two-t4", Mode::kVmVgpu, Mode::kVmPassthrough}}) {
    size_t steps = 0;
    {
      VRig probe(scenario);
      if (from == Mode::kVmVgpu) probe.apply(from);
      steps = probe.plan(to).steps.size();
    }
    for (size_t k = 0; k < steps; ++k) {
      INFO(scenario << " -> " << toString(to) << ": crash after step " << k << " of " << steps);
      VRig r(scenario);
      if (from == Mode::kVmVgpu) r.apply(from);
      auto before = r.fx.deviceState();
      r.opt.afterStep = [k](size_t i) { return i != k; };
      REQUIRE_FALSE(applyPlan(r.k, r.plan(to), r.opt));
      REQUIRE(r.kernel.exists("run/hostprep/journal.json"));
      r.opt.afterStep = nullptr;
      auto rec = recoverJournal(r.k, r.opt);
      if (!rec) FAIL(rec.error().describe());
      REQUIRE(*rec);
      CHECK(diff(before, r.fx.deviceState()) == "");
      CHECK_FALSE(r.kernel.exists("run/hostprep/journal.json"));
      r.apply(to);  // and the run after that completes
    }
  }
}

TEST_CASE("the journal keeps the vGPU state and reads version 1 journals", "[vgpu][journal]") {
  Journal j;
  j.mode = Mode::kVmVgpu;
  j.pid = 42;
  j.sriov = {{*parseBdf("0000:3b:00.0"), 0}};
  j.vgpuGpus = {*parseBdf("0000:3b:00.0")};
  j.vgpus = {
      {VgpuInterface::kMdev, *parseBdf("0000:3b:00.4"),
       vgpuUuid(*parseBdf("0000:3b:00.4"), "A10-12Q", 0), "nvidia-594", "NVIDIA A10-12Q", 10000},
      {VgpuInterface::kPerVf, *parseBdf("0000:41:00.4"), "", "1019", "NVIDIA H100-40C", 400}};
  j.steps = {
      {StepKind::kCreateVgpu, *parseBdf("0000:3b:00.4"), "A10-12Q", std::nullopt, j.vgpus[0].uuid}};
  auto back = parseJournal(toJson(j));
  REQUIRE(back);
  CHECK(back->vgpus == j.vgpus);
  CHECK(back->sriov.size() == 1);
  CHECK(back->sriov[0].numvfs == 0);
  CHECK(back->vgpuGpus == j.vgpuGpus);
  CHECK(back->steps[0].uuid == j.vgpus[0].uuid);
  CHECK_THAT(toJson(j), Catch::Contains("\"version\": 2"));
  auto v1 = parseJournal(
      R"({"version": 1, "mode": "container", "pid": 1, "next": 0, "devices": [], "steps": []})");
  REQUIRE(v1);
  CHECK(v1->vgpus.empty());
  auto bad =
      parseJournal(R"({"version": 2, "mode": "vm-vgpu", "next": 0, "vgpus": [{"interface": "mdev",
      "parent": "0000:3b:00.4", "uuid": "../../x", "type": "nvidia-1", "group": null}]})");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message == "journal: vgpus[0]: \"uuid\" is not a UUID");
}

TEST_CASE("VFs another driver holds are named before a plan would disable SR-IOV under them",
          "[vgpu]") {
  VRig r("vgpu-two-a10");
  r.apply(Mode::kVmVgpu);
  // The VFs carry vGPUs on the host driver: leaving vm-vgpu may take them.
  auto s = readSnapshot(r.kernel);
  REQUIRE(s);
  CHECK(vfsInUse(*s, r.plan(Mode::kVmPassthrough), r.hostDriver).empty());
  // Someone gives the VF 0000:3b:00.5 to vfio-pci (VF passthrough to a VM).
  const std::string vf = "sys/bus/pci/devices/0000:3b:00.5";
  REQUIRE(r.kernel.loadModule("vfio_pci"));
  REQUIRE(r.kernel.writeAttr(vf + "/driver_override", "vfio-pci"));
  REQUIRE(r.kernel.writeAttr("sys/bus/pci/drivers/nvidia/unbind", "0000:3b:00.5"));
  REQUIRE(r.kernel.writeAttr("sys/bus/pci/drivers_probe", "0000:3b:00.5"));
  REQUIRE(r.driver("0000:3b:00.5") == std::optional<std::string>("vfio-pci"));
  s = readSnapshot(r.kernel);
  REQUIRE(s);
  for (Mode m : {Mode::kVmPassthrough, Mode::kContainer}) {
    auto used = vfsInUse(*s, r.plan(m), r.hostDriver);
    REQUIRE(used.size() == 1);
    CHECK(used[0] == "0000:3b:00.5 (VF of 0000:3b:00.0) on vfio-pci");
  }
}

TEST_CASE("each device of a vGPU plan is reported once, after its last step", "[vgpu]") {
  // A device's steps are not contiguous: entering vm-vgpu parks the PF on pci-pf-stub and
  // returns; leaving it disables every PF's VFs before any PF moves. A user sees one line each.
  VRig r("vgpu-two-a10");
  std::map<std::string, int> reports;
  r.opt.onDevice = [&](const DeviceMove& mv, const Status& s) {
    CHECK(s.ok());
    ++reports[mv.bdf.str()];
  };
  auto once = [&] {
    REQUIRE_FALSE(reports.empty());
    for (const auto& [bdf, n] : reports) {
      INFO(bdf);
      CHECK(n == 1);
    }
    CHECK(reports.count("0000:3b:00.0") == 1);
    reports.clear();
  };
  r.apply(Mode::kVmVgpu);
  once();
  r.apply(Mode::kVmPassthrough);
  once();
}

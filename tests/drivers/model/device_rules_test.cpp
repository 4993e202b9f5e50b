// Per-device modes (drivers/model/device_rules.cpp): rules resolved against fixture hosts,
// companions following their GPU, and the mixes refused.
#include "drivers/model/device_rules.hpp"

#include <catch2/catch.hpp>
#include <memory>

#include "tests/support/fake_kernel.hpp"
#include "tests/support/fixture.hpp"

using namespace hostprep;
using hostprep::test::FakeKernel;
using hostprep::test::Fixture;

namespace {

// Two A10s behind one PCIe switch without ACS: both GPUs and both audio functions in group 30.
const char* kSharedGroup = R"(kernel: 6.1.0-test-amd64
cmdline: BOOT_IMAGE=/vmlinuz root=/dev/nvme0n1p2 ro intel_iommu=on
modules: [nvidia, snd_hda_intel, nvme]
available_modules: [vfio, vfio_pci, vfio_pci_core, vfio_iommu_type1]
root_disk: 0000:5e:00.0
devices:
  - {bdf: "0000:3b:00.0", id: "10de:2236", class: "030200", driver: nvidia, group: 30, numa: 0}
  - {bdf: "0000:3b:00.1", id: "10de:1aef", class: "040300", driver: snd_hda_intel, group: 30}
  - {bdf: "0000:3c:00.0", id: "10de:2236", class: "030200", driver: nvidia, group: 30, numa: 0}
  - {bdf: "0000:5e:00.0", id: "144d:a80a", class: "010802", driver: nvme, group: 40}
)";

struct Topo {
  std::unique_ptr<Fixture> fx;
  FakeKernel kernel;
  Snapshot snap;
  Selection sel;
  explicit Topo(std::unique_ptr<Fixture> f, SelectionOptions so = {})
      : fx(std::move(f)), kernel(fx->root()) {
    auto s = readSnapshot(kernel);
    REQUIRE(s);
    snap = *s;
    auto r = selectDevices(snap, so);
    REQUIRE(r);
    sel = *r;
  }
  explicit Topo(const std::string& scenario, SelectionOptions so = {})
      : Topo(std::make_unique<Fixture>(scenario), std::move(so)) {}
};

std::unique_ptr<Fixture> shared() {
  return std::make_unique<Fixture>(Fixture::HostYaml{kSharedGroup});
}

Bdf bdf(const char* s) { return *parseBdf(s); }

DeviceRule rule(DeviceMatch m, Mode mode) { return {m, mode}; }

std::map<std::string, std::string> named(const DeviceModes& m) {
  std::map<std::string, std::string> out;
  for (const auto& [b, mode] : m) out[b.str()] = std::string(toString(mode));
  return out;
}

}  // namespace

TEST_CASE("rules give GPUs their modes, and companions follow their GPU", "[rules]") {
  Topo h("two-a10");
  auto r = resolveModes(h.snap, h.sel, Mode::kContainer,
                        {rule({bdf("0000:86:00.0"), {}, {}, {}}, Mode::kVmPassthrough)});
  CHECK(r.warnings.empty());
  CHECK(named(r.modes) == std::map<std::string, std::string>{{"0000:3b:00.0", "container"},
                                                             {"0000:3b:00.1", "container"},
                                                             {"0000:86:00.0", "vm-passthrough"},
                                                             {"0000:86:00.1", "vm-passthrough"}});
  CHECK(modeSplit(h.sel, r.modes) ==
        std::map<Mode, int>{{Mode::kContainer, 1}, {Mode::kVmPassthrough, 1}});
  CHECK_FALSE(singleMode(modeSplit(h.sel, r.modes)));
  // No rules: every device takes the default.
  auto all = resolveModes(h.snap, h.sel, Mode::kVmVgpu, {});
  CHECK(all.modes == uniformModes(h.sel, Mode::kVmVgpu));
  CHECK(singleMode(modeSplit(h.sel, all.modes)) == Mode::kVmVgpu);
}

TEST_CASE("the first matching rule wins, and index, numa and model match", "[rules]") {
  Topo h("two-a10");  // 3b:00.0 on NUMA node 0, 86:00.0 on node 1, both 10de:2236
  auto r = resolveModes(h.snap, h.sel, Mode::kContainer,
                        {rule({{}, {}, 1, {}}, Mode::kVmVgpu),
                         rule({{}, PciId{0x10de, 0x2236}, {}, {}}, Mode::kVmPassthrough)});
  CHECK(named(r.modes).at("0000:3b:00.0") == "vm-passthrough");
  CHECK(named(r.modes).at("0000:86:00.0") == "vm-vgpu");
  CHECK(r.warnings.empty());
  auto numa =
      resolveModes(h.snap, h.sel, Mode::kContainer, {rule({{}, {}, {}, 1}, Mode::kVmPassthrough)});
  CHECK(named(numa.modes).at("0000:3b:00.0") == "container");
  CHECK(named(numa.modes).at("0000:86:00.1") == "vm-passthrough");
  // index counts the selected GPUs only: with --devices 86:00.0 it is index 0.
  Topo one("two-a10", {{bdf("0000:86:00.0")}, {}, "nvidia", false});
  auto idx = resolveModes(one.snap, one.sel, Mode::kContainer,
                          {rule({{}, {}, 0, {}}, Mode::kVmPassthrough)});
  CHECK(named(idx.modes).at("0000:86:00.0") == "vm-passthrough");
}

TEST_CASE("a rule that matches nothing is a warning, not an error", "[rules]") {
  Topo h("two-a10");
  auto r = resolveModes(h.snap, h.sel, Mode::kContainer,
                        {rule({{}, PciId{0x10de, 0x2236}, {}, {}}, Mode::kVmPassthrough),
                         rule({bdf("0000:86:00.0"), {}, {}, {}}, Mode::kContainer),
                         rule({{}, PciId{0x10de, 0x2330}, {}, 3}, Mode::kVmPassthrough)});
  CHECK(r.warnings == std::vector<std::string>{
                          "devices[1] {bdf: 0000:86:00.0} matches no selected GPU (or only GPUs "
                          "an earlier rule took)",
                          "devices[2] {model: 10de:2330, numa: 3} matches no selected GPU (or "
                          "only GPUs an earlier rule took)"});
  CHECK(modeSplit(h.sel, r.modes) == std::map<Mode, int>{{Mode::kVmPassthrough, 2}});
}

TEST_CASE("container with vm-vgpu is refused with the reason, and the other mixes are allowed",
          "[rules]") {
  auto bad = checkModeMix({{Mode::kContainer, 2}, {Mode::kVmVgpu, 1}});
  REQUIRE_FALSE(bad);
  CHECK(bad.error().exit == Exit::kUsage);
  CHECK(bad.error().message ==
        "devices: container and vm-vgpu cannot share a node: one nvidia module cannot be both the "
        "datacenter driver and the vGPU manager (2 GPU(s) container, 1 GPU(s) vm-vgpu)");
  CHECK(checkModeMix({{Mode::kContainer, 2}, {Mode::kVmPassthrough, 1}}));
  CHECK(checkModeMix({{Mode::kVmVgpu, 2}, {Mode::kVmPassthrough, 1}}));
  CHECK(checkModeMix({{Mode::kVmVgpu, 2}}));
}

TEST_CASE("two GPUs of one IOMMU group in different modes are refused, naming both and the group",
          "[rules]") {
  Topo h(shared());
  auto r = resolveModes(h.snap, h.sel, Mode::kContainer,
                        {rule({bdf("0000:3c:00.0"), {}, {}, {}}, Mode::kVmPassthrough)});
  auto st = checkGroupModes(h.snap, h.sel, r.modes);
  REQUIRE_FALSE(st);
  CHECK(st.error().exit == Exit::kRefused);
  CHECK(st.error().message ==
        "refusing to split an IOMMU group between modes: GPU 0000:3b:00.0 (10de:2236 3D "
        "controller) (container) and GPU 0000:3c:00.0 (10de:2236 3D controller) (vm-passthrough) "
        "share IOMMU group 30");
  // One mode for the group is fine.
  CHECK(checkGroupModes(h.snap, h.sel, resolveModes(h.snap, h.sel, Mode::kContainer, {}).modes));
}

TEST_CASE("a --devices list naming one GPU of a shared group records the other as not selected",
          "[rules][selection]") {
  Topo h(shared(), {{bdf("0000:3b:00.0")}, {}, "nvidia", false});
  REQUIRE(h.sel.unselectedGpus.size() == 1);
  CHECK(h.sel.unselectedGpus[0].describe(h.snap) ==
        "GPU 0000:3c:00.0 (10de:2236 3D controller) is not selected but shares IOMMU group 30 "
        "with 0000:3b:00.0");
  // Selected too: nothing to record.
  Topo both(shared(), {{bdf("0000:3b:00.0"), bdf("0000:3c:00.0")}, {}, "nvidia", false});
  CHECK(both.sel.unselectedGpus.empty());
}

#include "drivers/published/persist.hpp"

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "tests/support/fixture.hpp"

using namespace hostprep;
using hostprep::test::Fixture;

namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

PersistPlan planFor(Host& host, Mode mode, SelectionOptions so = {}) {
  auto snap = readSnapshot(host);
  REQUIRE(snap);
  auto sel = selectDevices(*snap, so);
  REQUIRE(sel);
  return makePersistPlan(*snap, *sel, mode, [&](std::string_view p) -> std::optional<std::string> {
    auto t = host.read(p);
    return t ? std::optional<std::string>(*t) : std::nullopt;
  });
}

}  // namespace

TEST_CASE("the initramfs block is replaced, never duplicated, and other lines stay", "[persist]") {
  const std::string mine = "# my modules\nraid1\n";
  auto once = withInitramfsBlock(mine, {"vfio", "vfio_pci"});
  CHECK(once == "# my modules\nraid1\n" + std::string(kInitramfsBegin) + "\nvfio\nvfio_pci\n" +
                    std::string(kInitramfsEnd) + "\n");
  CHECK(withInitramfsBlock(once, {"vfio", "vfio_pci"}) == once);
  CHECK(withInitramfsBlock(once, {}) == mine);
}

TEST_CASE("persist vm-passthrough writes the three files, container removes them", "[persist]") {
  Fixture fx("turing-usb-ucsi");
  fx.write("etc/initramfs-tools/modules", "# List of modules\nraid1\n");
  RootHost host(fx.root());
  auto p = planFor(host, Mode::kVmPassthrough);
  CHECK(p.warnings.empty());
  REQUIRE(applyPersistPlan(host, p));
  CHECK(p.initramfsChanges);
  CHECK(slurp(fx.path("etc/modprobe.d/hostprep-vfio.conf")) ==
        "# Written by 'hostprep persist --mode vm-passthrough'; removed by any other mode.\n"
        "# vfio-pci claims the selected GPUs and their companions at boot, before their\n"
        "# host drivers load.\n"
        "options vfio-pci ids=10de:10f7,10de:1ad6,10de:1ad7,10de:1e30\n"
        "softdep nouveau pre: vfio-pci\n"
        "softdep nvidia pre: vfio-pci\n"
        "softdep nvidiafb pre: vfio-pci\n"
        "softdep snd_hda_intel pre: vfio-pci\n"
        "softdep ucsi_ccg pre: vfio-pci\n"
        "softdep xhci_pci pre: vfio-pci\n");
  CHECK(
      slurp(fx.path("etc/modules-load.d/hostprep-vfio.conf")) ==
      "# Written by 'hostprep persist --mode vm-passthrough'.\nvfio\nvfio_iommu_type1\nvfio_pci\n");
  CHECK_THAT(slurp(fx.path("etc/initramfs-tools/modules")),
             Catch::StartsWith("# List of modules\nraid1\n# BEGIN hostprep"));
  // Idempotent.
  CHECK(planFor(host, Mode::kVmPassthrough).noop());

  auto back = planFor(host, Mode::kContainer);
  CHECK_FALSE(back.noop());
  REQUIRE(applyPersistPlan(host, back));
  CHECK_FALSE(std::filesystem::exists(fx.path("etc/modprobe.d/hostprep-vfio.conf")));
  CHECK_FALSE(std::filesystem::exists(fx.path("etc/modules-load.d/hostprep-vfio.conf")));
  CHECK(slurp(fx.path("etc/initramfs-tools/modules")) == "# List of modules\nraid1\n");
  CHECK(planFor(host, Mode::kContainer).noop());
}

TEST_CASE("persist warns when vfio-pci.ids would also take an unselected GPU", "[persist]") {
  Fixture fx("two-a10");
  RootHost host(fx.root());
  SelectionOptions so;
  so.devices = {*parseBdf("0000:3b:00.0")};
  auto p = planFor(host, Mode::kVmPassthrough, so);
  REQUIRE(p.warnings.size() == 2);
  CHECK_THAT(p.warnings[0], Catch::StartsWith("0000:86:00.0 (10de:2236) is not selected"));
}

TEST_CASE("on a split the modprobe.d file names only ids no other mode has", "[persist][mixed]") {
  Fixture fx("two-a10");
  RootHost host(fx.root());
  auto snap = readSnapshot(host);
  REQUIRE(snap);
  auto sel = selectDevices(*snap, {});
  REQUIRE(sel);
  auto modes = uniformModes(*sel, Mode::kContainer);
  auto none = [](std::string_view) { return std::optional<std::string>(); };
  SECTION("twins in two modes: every id is shared, no ids= line, a note") {
    modes[*parseBdf("0000:3b:00.0")] = Mode::kVmPassthrough;
    modes[*parseBdf("0000:3b:00.1")] = Mode::kVmPassthrough;
    auto ids = vfioIdsFor(*snap, *sel, modes);
    CHECK(ids.claim.empty());
    CHECK(ids.shared == std::set<PciId>{*parsePciId("10de:2236"), *parsePciId("10de:1aef")});
    auto p = makePersistPlan(*snap, *sel, modes, none);
    REQUIRE(p.files[0].content);
    CHECK(*p.files[0].content ==
          "# Written by 'hostprep persist' for the vm-passthrough GPUs of a split node;\n"
          "# removed when no GPU is in vm-passthrough mode.\n"
          "# vfio-pci claims the selected GPUs and their companions at boot, before their\n"
          "# host drivers load.\n"
          "# Not in ids= (GPUs in container mode share them): 10de:1aef,10de:2236;\n"
          "# hostprep-prepare.service binds those at boot.\n"
          "softdep nouveau pre: vfio-pci\n"
          "softdep nvidia pre: vfio-pci\n"
          "softdep nvidiafb pre: vfio-pci\n"
          "softdep snd_hda_intel pre: vfio-pci\n");
    REQUIRE(p.notes.size() == 1);
    CHECK_THAT(p.notes[0], Catch::StartsWith("vfio-pci ids=: 10de:1aef,10de:2236 left out"));
  }
  SECTION("every GPU in one mode: the ids as before, no note") {
    auto p = makePersistPlan(*snap, *sel, uniformModes(*sel, Mode::kVmPassthrough), none);
    REQUIRE(p.files[0].content);
    CHECK_THAT(*p.files[0].content, Catch::Contains("options vfio-pci ids=10de:1aef,10de:2236\n"));
    CHECK(p.notes.empty());
  }
  SECTION("no GPU in vm-passthrough: the files go") {
    auto p = makePersistPlan(*snap, *sel, modes, none);
    CHECK_FALSE(p.files[0].content);
    CHECK(p.notes.empty());
  }
}

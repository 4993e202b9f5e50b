// Boot configuration parsers, table-driven, and the reader over an image root.
#include "drivers/published/bootconfig.hpp"

#include <catch2/catch.hpp>

#include "tests/support/fixture.hpp"

using namespace hostprep;
using hostprep::test::Fixture;

TEST_CASE("etc/default/grub: quotes, expansion, comments", "[bootconfig]") {
  auto v = parseGrubDefaults(
      "# comment\n"
      "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet splash\"\n"
      "GRUB_CMDLINE_LINUX='a=\"b c\"'\n"
      "GRUB_TIMEOUT=5 # trailing\n"
      "export GRUB_X=\"$GRUB_CMDLINE_LINUX_DEFAULT more\"\n"
      "GRUB_Y=${GRUB_TIMEOUT}s\n"
      "not an assignment\n");
  CHECK(v["GRUB_CMDLINE_LINUX_DEFAULT"] == "quiet splash");
  CHECK(v["GRUB_CMDLINE_LINUX"] == "a=\"b c\"");
  CHECK(v["GRUB_TIMEOUT"] == "5");
  CHECK(v["GRUB_X"] == "quiet splash more");
  CHECK(v["GRUB_Y"] == "5s");
  // A grub.d snippet appends to what etc/default/grub set.
  auto w = parseGrubDefaults("GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX intel_iommu=on\"\n",
                             {{"GRUB_CMDLINE_LINUX", "console=ttyS0"}});
  CHECK(w["GRUB_CMDLINE_LINUX"] == "console=ttyS0 intel_iommu=on");
}

TEST_CASE("modprobe.d directives", "[bootconfig]") {
  auto d = parseModprobeConf("f.conf",
                             "# hostprep\n"
                             "options vfio-pci ids=10de:2236,10de:1aef disable_vga=1\n"
                             "softdep nvidia pre: vfio-pci post: foo\n"
                             "blacklist nouveau # trailing comment\n"
                             "install nouveau /bin/false\n"
                             "options vfio_iommu_type1 \\\n  allow_unsafe_interrupts=1\n"
                             "lonely\n");
  REQUIRE(d.size() == 5);
  BootConfig b;
  b.modprobe = d;
  CHECK(b.optionValues("vfio_pci", "ids") == std::vector<std::string>{"10de:2236,10de:1aef"});
  CHECK(b.optionValues("vfio-pci", "disable-vga") == std::vector<std::string>{"1"});
  CHECK(b.optionValues("vfio_iommu_type1", "allow_unsafe_interrupts") ==
        std::vector<std::string>{"1"});
  CHECK(b.softdepPre("nvidia") == std::vector<std::string>{"vfio_pci"});
  CHECK(b.blacklisted("nouveau"));
  CHECK_FALSE(b.blacklisted("nvidia"));
  BootConfig i;
  i.modprobe = parseModprobeConf("g.conf", "install nouveau /usr/bin/true\n");
  CHECK(i.blacklisted("nouveau"));
}

TEST_CASE("module lists and BLS options", "[bootconfig]") {
  auto m = parseModulesList("m.conf", "# c\n; c\n\nvfio\nvfio-pci  opt=1\n");
  REQUIRE(m.size() == 2);
  CHECK(m[1].module == "vfio_pci");
  CHECK(parseLoaderEntryOptions(
            "title x\noptions root=/dev/sda1 ro\noptions intel_iommu=on\noptionsx y\n") ==
        "root=/dev/sda1 ro intel_iommu=on");
  Cmdline c = parseCmdline("vfio-pci.ids=10de:2236 vfio_iommu_type1.allow_unsafe_interrupts=1");
  CHECK(cmdlineValue(c, "vfio_pci.ids") == std::optional<std::string>("10de:2236"));
  CHECK(cmdlineHas(c, "vfio-iommu-type1.allow-unsafe-interrupts"));
}

TEST_CASE("readBootConfig over a root: every source, override by file name", "[bootconfig]") {
  Fixture fx;
  fx.write("etc/default/grub", "GRUB_CMDLINE_LINUX=\"a\"\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\n");
  fx.write("etc/kernel/cmdline", "root=/dev/sda1 b\n");
  fx.write("boot/loader/entries/x.conf", "options $kernelopts c\n");
  fx.write("boot/grub2/grubenv", "# GRUB Environment Block\nkernelopts=root=/dev/sda1 ro\n");
  fx.write("usr/lib/modprobe.d/nvidia.conf", "blacklist nouveau\n");
  fx.write("etc/modprobe.d/nvidia.conf", "options nvidia NVreg_X=1\n");  // hides usr/lib's
  fx.write("lib/modprobe.d/other.conf", "softdep nvidia pre: vfio-pci\n");
  fx.write("etc/modprobe.d/ignored.txt", "blacklist nvidia\n");
  fx.write("etc/modules", "vfio\n");
  fx.write("etc/dracut.conf.d/vfio.conf", "add_drivers+=\" vfio_pci vfio_iommu_type1 \"\n");
  fx.symlink("etc/systemd/system/sysinit.target.wants/hostprep-prepare.service",
             "/etc/systemd/system/hostprep-prepare.service");
  auto b = readBootConfig(RootHost(fx.root()));
  REQUIRE(b.cmdlines.size() == 3);
  CHECK(b.cmdlines[0].text == "a quiet");
  CHECK(b.cmdlines[1].origin == "etc/kernel/cmdline");
  CHECK(b.cmdlines[2].text == "root=/dev/sda1 ro c");
  CHECK_FALSE(b.blacklisted("nouveau"));
  CHECK_FALSE(b.blacklisted("nvidia"));
  CHECK(b.softdepPre("nvidia") == std::vector<std::string>{"vfio_pci"});
  CHECK(b.loadsAtBoot("vfio"));
  CHECK(b.loadsAtBoot("vfio-pci"));
  CHECK(b.enabledUnits == std::vector<std::string>{
                              "etc/systemd/system/sysinit.target.wants/hostprep-prepare.service"});
  auto none = readBootConfig(RootHost(Fixture().root()));
  CHECK(none.cmdlines.empty());
  CHECK(none.modprobe.empty());
  CHECK(none.enabledUnits.empty());
}

// The platform parsers, table-driven, and the reader on fixture roots (absent files are states).
#include "drivers/model/platform.hpp"

#include <catch2/catch.hpp>

#include "tests/support/fake_kernel.hpp"
#include "tests/support/fixture.hpp"

using namespace hostprep;
using hostprep::test::FakeKernel;
using hostprep::test::FakeModules;
using hostprep::test::Fixture;

TEST_CASE("cpuinfo: vendor and virtualization flags", "[platform]") {
  struct Case {
    const char* text;
    CpuVendor vendor;
    bool vmx, svm, hypervisor;
  };
  const Case cases[] = {
      {"vendor_id\t: GenuineIntel\nflags\t\t: fpu vmx sse\n", CpuVendor::kIntel, true, false,
       false},
      {"vendor_id\t: AuthenticAMD\nflags\t\t: fpu svm\n", CpuVendor::kAmd, false, true, false},
      {"vendor_id\t: GenuineIntel\nflags\t\t: fpu sse hypervisor\n", CpuVendor::kIntel, false,
       false, true},
      {"vendor_id\t: HygonGenuine\nflags\t\t: svm\n", CpuVendor::kAmd, false, true, false},
      // Only the first processor's flags count; "vmxnet" is not vmx.
      {"vendor_id: GenuineIntel\nflags: vmxnet\nflags: vmx\n", CpuVendor::kIntel, false, false,
       false},
      {"processor: 0\nFeatures: fp asimd\n", CpuVendor::kOther, false, false, false},
  };
  for (const auto& c : cases) {
    INFO(c.text);
    auto f = parseCpuinfo(c.text);
    CHECK(f.known);
    CHECK(f.vendor == c.vendor);
    CHECK(f.vmx == c.vmx);
    CHECK(f.svm == c.svm);
    CHECK(f.hypervisor == c.hypervisor);
  }
}

TEST_CASE("interrupts: IR- chips are remapped, per-CPU counters are not interrupts", "[platform]") {
  auto f = parseInterrupts(
      "           CPU0       CPU1\n"
      "  0:         36          0   IR-IO-APIC    2-edge      timer\n"
      " 24:          0          0  DMAR-MSI    0-edge      dmar0\n"
      " 26:     103520          0   IR-PCI-MSI 2621440-edge      nvme0q0\n"
      " 27:          0          0   PCI-MSI 1-edge      x\n"
      "NMI:          0          0   Non-maskable interrupts\n"
      "ERR:          0\n");
  CHECK(f.lines == 4);
  CHECK(f.remapped == 2);
  CHECK(parseInterrupts("").lines == 0);
}

TEST_CASE("iomem: firmware framebuffers and the PCI function they sit in", "[platform]") {
  auto fbs = parseIomemFramebuffers(
      "00000000-00000fff : Reserved\n"
      "90000000-9fffffff : PCI Bus 0000:00\n"
      "  91000000-91ffffff : 0000:02:00.0\n"
      "    91000000-912fffff : efifb\n"
      "  92000000-92ffffff : PCI Bus 0000:3b\n"
      "    92000000-92ffffff : 0000:3b:00.0\n"
      "      92000000-922fffff : simpledrm\n"
      "a0000000-a02fffff : BOOTFB\n");
  REQUIRE(fbs.size() == 3);
  CHECK(fbs[0].name == "efifb");
  CHECK(fbs[0].device == parseBdf("0000:02:00.0"));
  CHECK(fbs[1].name == "simpledrm");
  CHECK(fbs[1].device == parseBdf("0000:3b:00.0"));
  CHECK(fbs[2].name == "BOOTFB");
  CHECK_FALSE(fbs[2].device);
}

TEST_CASE("kernel config, lockdown, ecap, SecureBoot, module index", "[platform]") {
  auto c = parseKernelConfig(
      "# comment\nCONFIG_VFIO=m\n# CONFIG_INTEL_IOMMU_DEFAULT_ON is not set\n"
      "CONFIG_LOCALVERSION=\"-x\"\nCONFIG_VFIO_PCI=y\n");
  CHECK(c.get("CONFIG_VFIO") == "m");
  CHECK(c.get("CONFIG_INTEL_IOMMU_DEFAULT_ON") == "n");
  CHECK(c.get("CONFIG_LOCALVERSION") == "-x");
  CHECK(c.get("CONFIG_VFIO_PCI") == "y");
  CHECK(c.is("CONFIG_VFIO_PCI", "y"));
  CHECK_FALSE(c.is("CONFIG_VFIO", "y"));
  CHECK_FALSE(c.get("CONFIG_VFI"));  // a prefix of a symbol is not the symbol
  CHECK_FALSE(c.get("CONFIG_ZZZ"));  // after the last symbol
  CHECK_FALSE(c.get("A"));           // before the first
  CHECK(c.size() == 4);
  // Of a symbol set twice, the later line wins; a copy keeps its own text.
  auto twice = parseKernelConfig("CONFIG_B=y\nCONFIG_A=1\nCONFIG_B=m\n# CONFIG_A is not set\n");
  const KernelConfig copy = twice;
  twice = parseKernelConfig("");
  CHECK(copy.get("CONFIG_B") == "m");
  CHECK(copy.get("CONFIG_A") == "n");
  CHECK_FALSE(twice.get("CONFIG_B"));

  CHECK(parseLockdown("[none] integrity confidentiality\n") == std::optional<std::string>("none"));
  CHECK(parseLockdown("none integrity [confidentiality]") ==
        std::optional<std::string>("confidentiality"));
  CHECK_FALSE(parseLockdown("none integrity"));

  CHECK(ecapInterruptRemapping("19e2ff0505e\n") ==
        std::optional<bool>(true));                                        // 0x...5e: bit 3 set
  CHECK(ecapInterruptRemapping("f0050d2") == std::optional<bool>(false));  // 0x...d2: bit 3 clear
  CHECK(ecapInterruptRemapping("0x8") == std::optional<bool>(true));
  CHECK_FALSE(ecapInterruptRemapping("zz"));

  CHECK(parseSecureBootVar(std::string("\x06\0\0\0\x01", 5)) == std::optional<bool>(true));
  CHECK(parseSecureBootVar(std::string("\x06\0\0\0\0", 5)) == std::optional<bool>(false));
  CHECK_FALSE(parseSecureBootVar("ab"));

  CHECK(configSymbolOf("vfio-pci") == std::optional<std::string_view>("CONFIG_VFIO_PCI"));
  CHECK_FALSE(configSymbolOf("nvidia"));
}

TEST_CASE("readPlatform reads a fixture host and leaves absent things unknown", "[platform]") {
  Fixture fx("preflight-intel");
  FakeKernel k(fx.root());
  FakeModules mods(k);
  auto p = readPlatform(k, "6.1.0-test-amd64", mods,
                        {"vfio", "vfio_pci", "kvm_intel", "nouveau", "bogus/../x"});
  CHECK(p.cpu.vendor == CpuVendor::kIntel);
  CHECK(p.devKvm);
  REQUIRE(p.acpiTables);
  CHECK(p.acpiTables->count("DMAR"));
  REQUIRE(p.iommuUnits);
  REQUIRE(p.iommuUnits->size() == 2);
  CHECK((*p.iommuUnits)[0].interruptRemapping == std::optional<bool>(true));
  REQUIRE(p.interrupts);
  CHECK(p.interrupts->lines == 5);
  CHECK(p.interrupts->remapped == 4);
  CHECK(p.lockdown == std::optional<std::string>("none"));
  CHECK_FALSE(p.secureBoot);
  REQUIRE(p.kernelConfig);
  CHECK(p.modules.at("kvm_intel").loaded);
  CHECK(p.modules.at("vfio_pci").indexed);
  CHECK_FALSE(p.modules.at("vfio_pci").loaded);
  CHECK(p.modules.at("vfio_pci").config == std::optional<std::string>("m"));
  CHECK(p.modules.count("bogus/../x") == 0);  // never a path

  Fixture empty;
  FakeKernel e(empty.root());
  FakeModules none(e);
  auto q = readPlatform(e, "", none, {"vfio"});
  CHECK_FALSE(q.cpu.known);
  CHECK_FALSE(q.devKvm);
  CHECK_FALSE(q.acpiTables);
  CHECK_FALSE(q.iommuUnits);
  CHECK_FALSE(q.interrupts);
  CHECK_FALSE(q.framebuffers);
  CHECK_FALSE(q.lockdown);
  CHECK_FALSE(q.kernelConfig);
  CHECK_FALSE(q.modules.at("vfio").available());
}

TEST_CASE("Fabric Manager: FABRIC_MODE and the running daemon", "[platform]") {
  auto kv = parseFabricManagerConfig("# FABRIC_MODE=2\nLOG_LEVEL=4\n FABRIC_MODE = 1 \nbad line\n");
  CHECK(kv.at("FABRIC_MODE") == "1");
  CHECK(kv.at("LOG_LEVEL") == "4");
  CHECK(kv.size() == 2);

  Fixture fx("hgx-h100");
  FakeKernel k(fx.root());
  auto fm = readFabricManager(k);
  CHECK(fm.config);
  CHECK(fm.modeValue == std::optional<std::string>("0"));
  CHECK(fm.mode() == FabricMode::kFullPassthrough);
  CHECK_FALSE(fm.pid);
  CHECK(fm.pidFile.empty());

  SECTION("a live nv-fabricmanager") {
    fx.write("run/nvidia-fabricmanager/nv-fabricmanager.pid", "4242\n");
    fx.write("proc/4242/comm", "nv-fabricmanage\n");
    auto live = readFabricManager(k);
    CHECK(live.pid == std::optional<int>(4242));
    CHECK(live.pidFile == "run/nvidia-fabricmanager/nv-fabricmanager.pid");
  }
  SECTION("a stale pid file, and a pid reused by another process") {
    fx.write("var/run/nvidia-fabricmanager/nv-fabricmanager.pid", "4242\n");
    CHECK_FALSE(readFabricManager(k).pid);
    fx.write("proc/4242/comm", "bash\n");
    CHECK_FALSE(readFabricManager(k).pid);
  }
  SECTION("no config is mode 0; a bad value is no mode") {
    std::filesystem::remove(fx.path("usr/share/nvidia/nvswitch/fabricmanager.cfg"));
    auto none = readFabricManager(k);
    CHECK_FALSE(none.config);
    CHECK(none.mode() == FabricMode::kFullPassthrough);
    fx.write("usr/share/nvidia/nvswitch/fabricmanager.cfg", "FABRIC_MODE=3\n");
    CHECK_FALSE(readFabricManager(k).mode());
  }
}

TEST_CASE("readPlatform: TDX, SEV-SNP, the nvidia version and its GSP firmware", "[platform]") {
  Fixture fx("hgx-h100");
  fx.write("sys/module/kvm_intel/parameters/tdx", "Y\n");
  fx.write("sys/module/nvidia/version", "550.90.05\n");
  fx.write("lib/firmware/nvidia/550.90.05/gsp_ga10x.bin", "x");
  fx.write("lib/firmware/nvidia/550.90.05/gsp_tu10x.bin", "x");
  fx.write("lib/firmware/nvidia/535.54.03/README", "x");
  FakeKernel k(fx.root());
  FakeModules mods(k);
  auto p = readPlatform(k, "6.1.0-test-amd64", mods, {"nvidia"});
  CHECK(p.kvmTdx == std::optional<std::string>("Y"));
  CHECK_FALSE(p.kvmSevSnp);
  CHECK(p.nvidiaVersion == std::optional<std::string>("550.90.05"));
  CHECK(p.gspFirmware.at("550.90.05") ==
        std::vector<std::string>{"gsp_ga10x.bin", "gsp_tu10x.bin"});
  CHECK(p.gspFirmware.at("535.54.03").empty());
  CHECK(p.fabricManager.config);
  CHECK(parseCcMode("ppcie") == CcMode::kPpcie);
  CHECK_FALSE(parseCcMode("yes"));
}

#include "drivers/model/resource_names.hpp"

#include <catch2/catch.hpp>

using namespace hostprep;

namespace {
const char* kPciIds =
    "# comment\n"
    "1234  Another Vendor\n"
    "\t2236  Not The A10\n"
    "10de  NVIDIA Corporation\n"
    "# a comment inside the vendor\n"
    "\t1aef  GA102 High Definition Audio Controller\n"
    "\t20b0  GA100 [A100 SXM4 40GB]\n"
    "\t2236  GA102GL [A10]\n"
    "\t\t10de 1482  A10\n"
    "\t2331  GH100 [H100 PCIe]\n"
    "\t25b6  GA107GL [A2 / A16]\n"
    "\t27b8  AD104GL [L4]\n"
    "10df  Emulex Corporation\n"
    "\t2237  Later vendor device\n";
}

TEST_CASE("passthrough resource names follow the sandbox device plugin", "[naming]") {
  CHECK(passthroughResourceName(kPciIds, 0x2236) == "nvidia.com/GA102GL_A10");
  CHECK(passthroughResourceName(kPciIds, 0x2331) == "nvidia.com/GH100_H100_PCIE");
  CHECK(passthroughResourceName(kPciIds, 0x20b0) == "nvidia.com/GA100_A100_SXM4_40GB");
  CHECK(passthroughResourceName(kPciIds, 0x25b6) == "nvidia.com/GA107GL_A2___A16");
  CHECK(passthroughResourceName(kPciIds, 0x1aef) ==
        "nvidia.com/GA102_HIGH_DEFINITION_AUDIO_CONTROLLER");
}

TEST_CASE("a device id missing from pci.ids falls back to the raw id", "[naming]") {
  CHECK(passthroughResourceName(kPciIds, 0x2235) == "nvidia.com/2235");
  CHECK(passthroughResourceName("", 0x2236) == "nvidia.com/2236");
  // Only the 10de section counts: another vendor's 2237 is not NVIDIA's.
  CHECK(passthroughResourceName(kPciIds, 0x2237) == "nvidia.com/2237");
}

TEST_CASE("another vendor sharing the device id does not leak in", "[naming]") {
  const char* onlyOther =
      "1234  Another Vendor\n\t2236  Not The A10\n10de  NVIDIA\n\t2331  GH100 [H100 PCIe]\n";
  CHECK(passthroughResourceName(onlyOther, 0x2236) == "nvidia.com/2236");
}

TEST_CASE("pci.ids device names for display", "[naming]") {
  CHECK(pciIdsDeviceName(kPciIds, 0x10de, 0x2236) == std::optional<std::string>("GA102GL [A10]"));
  CHECK(pciIdsDeviceName(kPciIds, 0x1234, 0x2236) == std::optional<std::string>("Not The A10"));
  CHECK_FALSE(pciIdsDeviceName(kPciIds, 0x10de, 0x9999));
}

TEST_CASE("pci.ids is read to its last line, with or without a newline", "[naming]") {
  const auto a10 = std::optional<std::string>("GA102GL [A10]");
  CHECK(pciIdsDeviceName("10de  NVIDIA\n\t2236  GA102GL [A10]", 0x10de, 0x2236) == a10);
  CHECK(pciIdsDeviceName("10de  NVIDIA\n\t2236  GA102GL [A10]\n", 0x10de, 0x2236) == a10);
  CHECK(pciIdsDeviceName("\n\n10de  NVIDIA\n\n\t2236  GA102GL [A10]\n", 0x10de, 0x2236) ==
        std::nullopt);  // an empty line ends the vendor's section, as any line without a tab
  CHECK_FALSE(pciIdsDeviceName("10de  NVIDIA", 0x10de, 0x2236));
  CHECK_FALSE(pciIdsDeviceName("10de  NVIDIA\n", 0x10de, 0x2236));
}

TEST_CASE("sanitizePciDeviceName drops what the plugin drops", "[naming]") {
  CHECK(sanitizePciDeviceName(" GA102GL [A10] ") == "GA102GL_A10");
  CHECK(sanitizePciDeviceName("TU104GL [Tesla T4]") == "TU104GL_TESLA_T4");
  CHECK(sanitizePciDeviceName("a.b/c\td") == "A_B_C_D");
  CHECK(sanitizePciDeviceName("(x)+y") == "XY");
}

TEST_CASE("vGPU resource names keep case and underscore whitespace", "[naming]") {
  CHECK(vgpuResourceName("NVIDIA A10-12Q") == "nvidia.com/NVIDIA_A10-12Q");
  CHECK(vgpuResourceName("GRID P100X-1B") == "nvidia.com/GRID_P100X-1B");
  CHECK(vgpuResourceName(" NVIDIA  H200X-141C\n") == "nvidia.com/NVIDIA_H200X-141C");
}

TEST_CASE("KubeVirt's pciVendorSelector is the id upper-case, as its user guide writes it",
          "[naming]") {
  CHECK(pciVendorSelector({0x10de, 0x1eb8}) == "10DE:1EB8");
  CHECK(pciVendorSelector({0x10de, 0x2236}) == "10DE:2236");
}

// PCI addresses, ids and attributes (drivers/common/pci.cpp).
#include "drivers/common/pci.hpp"

#include <catch2/catch.hpp>
#include <random>
#include <tuple>

using namespace hostprep;

TEST_CASE("parseBdf accepts full and short addresses and nothing else", "[parsers]") {
  struct Row {
    const char* in;
    const char* out;  // nullptr = rejected
  };
  const Row rows[] = {
      {"0000:3b:00.0", "0000:3b:00.0"},
      {"0000:3B:1f.7", "0000:3b:1f.7"},
      {"3b:00.1", "0000:3b:00.1"},
      {"10000:3b:00.0", nullptr},
      {"0000:3b:20.0", nullptr},
      {"0000:3b:00.8", nullptr},
      {"../../etc", nullptr},
      {"0000:3b:00.0/", nullptr},
      {"", nullptr},
      {"0000:3b:00", nullptr},
      {"0000-3b:00.0", nullptr},
      {"0000:3g:00.0", nullptr},
      {"0000:+b:00.0", nullptr},
  };
  for (const auto& r : rows) {
    INFO(r.in);
    auto b = parseBdf(r.in);
    if (r.out) {
      REQUIRE(b);
      CHECK(b->str() == r.out);
    } else {
      CHECK_FALSE(b);
    }
  }
}

TEST_CASE("BDFs order by domain then bus then device then function", "[parsers]") {
  // The integer key must order as the four fields do, one after the other, at every width:
  // values at each field's edges (a domain over 16 bits, bus 0xff) and random ones.
  std::mt19937 rng(17);
  auto field = [&](uint32_t max) {
    std::uniform_int_distribution<uint32_t> edge(0, 3), any(0, max);
    switch (edge(rng)) {
      case 0:
        return uint32_t{0};
      case 1:
        return max;
      default:
        return any(rng);
    }
  };
  auto random = [&] {
    return Bdf{field(0xfffff), static_cast<uint8_t>(field(0xff)), static_cast<uint8_t>(field(31)),
               static_cast<uint8_t>(field(7))};
  };
  for (int i = 0; i < 5000; ++i) {
    const Bdf a = random(), b = random();
    const auto ta = std::tie(a.domain, a.bus, a.device, a.function);
    const auto tb = std::tie(b.domain, b.bus, b.device, b.function);
    INFO(a.str() << " " << b.str());
    CHECK((a < b) == (ta < tb));
    CHECK((a == b) == (ta == tb));
    CHECK((a > b) == (ta > tb));
  }
  CHECK(Bdf{1, 0, 0, 0} > Bdf{0, 0xff, 31, 7});
  CHECK(Bdf{0x10000, 0, 0, 0} > Bdf{0xffff, 0xff, 31, 7});
}

TEST_CASE("parsePciId reads vendor:device in hex", "[parsers]") {
  CHECK(parsePciId("10de:2236") == PciId{0x10de, 0x2236});
  CHECK(parsePciId("10DE:2236") == PciId{0x10de, 0x2236});
  CHECK(parsePciId("0x1234:0x11e8") == PciId{0x1234, 0x11e8});
  CHECK_FALSE(parsePciId("10de"));
  CHECK_FALSE(parsePciId("10de:2236:1"));
  CHECK_FALSE(parsePciId("10de:12345"));
  CHECK_FALSE(parsePciId("zz:11"));
}

TEST_CASE("parsePciModalias reads the ids and class the kernel prints, and nothing else",
          "[parsers]") {
  // An A10 and its audio function as Linux prints them (upper-case hex, a newline).
  CHECK(parsePciModalias("pci:v000010DEd00002236sv000010DEsd00001482bc03sc02i00\n") ==
        PciModalias{{0x10de, 0x2236}, {0x10de, 0x1482}, 0x030200});
  CHECK(parsePciModalias("pci:v000010DEd00001AEFsv000010DEsd00001482bc04sc03i00") ==
        PciModalias{{0x10de, 0x1aef}, {0x10de, 0x1482}, 0x040300});
  CHECK(parsePciModalias("pci:v00008086d00000D4Esv00000000sd00000000bc0Csc03i30") ==
        PciModalias{{0x8086, 0x0d4e}, {0, 0}, 0x0c0330});
  CHECK(parsePciModalias("pci:v000010ded00002236sv000010desd00001482bc03sc02i00") ==
        PciModalias{{0x10de, 0x2236}, {0x10de, 0x1482}, 0x030200});
  for (const char* bad : {
           "",
           "pci:",
           "pci:v000010DEd00002236sv000010DEsd00001482bc03sc02",      // no prog-if
           "pci:v000010DEd00002236sv000010DEsd00001482bc03sc02i0",    // short
           "pci:v000010DEd00002236sv000010DEsd00001482bc03sc02i00x",  // trailing text
           "pci:v000010DEd00002236sv000010DEsd00001482bc03sc02i0g",   // not hex
           "pci:v000110DEd00002236sv000010DEsd00001482bc03sc02i00",   // vendor over 16 bits
           "pci:v*d*sv*sd*bc03sc02i00",                               // a pattern, not a device
           "pci:v10DEd2236sv10DEsd1482bc03sc02i00",                   // not 8 digits
           "usb:v1D6Bp0003d0601dc09dsc00dp03ic09isc00ip00in00",       // another bus
           "acpi:PNP0A08:PNP0A03:",
       }) {
    INFO(bad);
    CHECK_FALSE(parsePciModalias(bad));
  }
}

TEST_CASE("parseDriverOverride treats (null) and empty as unset", "[parsers]") {
  CHECK_FALSE(parseDriverOverride("(null)\n"));
  CHECK_FALSE(parseDriverOverride("\n"));
  CHECK(parseDriverOverride("vfio-pci\n") == std::optional<std::string>("vfio-pci"));
}

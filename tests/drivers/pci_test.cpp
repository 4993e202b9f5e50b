// PCI addresses, ids and attributes (drivers/pci.cpp).
#include "drivers/pci.hpp"

#include <catch2/catch.hpp>

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

TEST_CASE("parsePciId reads vendor:device in hex", "[parsers]") {
  CHECK(parsePciId("10de:2236") == PciId{0x10de, 0x2236});
  CHECK(parsePciId("10DE:2236") == PciId{0x10de, 0x2236});
  CHECK(parsePciId("0x1234:0x11e8") == PciId{0x1234, 0x11e8});
  CHECK_FALSE(parsePciId("10de"));
  CHECK_FALSE(parsePciId("10de:2236:1"));
  CHECK_FALSE(parsePciId("10de:12345"));
  CHECK_FALSE(parsePciId("zz:11"));
}

TEST_CASE("parseDriverOverride treats (null) and empty as unset", "[parsers]") {
  CHECK_FALSE(parseDriverOverride("(null)\n"));
  CHECK_FALSE(parseDriverOverride("\n"));
  CHECK(parseDriverOverride("vfio-pci\n") == std::optional<std::string>("vfio-pci"));
}

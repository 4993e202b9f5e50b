// One PCI function read from sysfs (drivers/model/pci_function.cpp): the parsers of what its
// files say; the reads themselves run in every snapshot test (snapshot_test.cpp).
#include "drivers/model/pci_function.hpp"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tests/support/fixture.hpp"
#include "tests/support/forwarding_host.hpp"

using namespace hostprep;

namespace {

// A host that notes every path read, in order, and passes everything to the real one under it.
class ReadLog final : public test::ForwardingHost {
 public:
  using ForwardingHost::ForwardingHost;
  Result<std::string> read(std::string_view p, size_t cap) const override {
    paths.emplace_back(p);
    return ForwardingHost::read(p, cap);
  }
  size_t first(std::string_view suffix) const {
    for (size_t i = 0; i < paths.size(); ++i) {
      if (paths[i].size() >= suffix.size() &&
          paths[i].compare(paths[i].size() - suffix.size(), suffix.size(), suffix) == 0)
        return i;
    }
    return paths.size();
  }
  mutable std::vector<std::string> paths;
};

}  // namespace

TEST_CASE("the power state is read before the config space, which wakes a function in D3cold",
          "[snapshot][reset]") {
  // A config read resumes a function in D3cold first (pci_config_pm_runtime_get): power_state
  // read after it would say where the read left the function, not where it was.
  test::Fixture fx("two-a10");
  const Bdf gpu = *parseBdf("0000:3b:00.0");
  const std::string dir = "sys/devices/pci0000:3b/0000:3b:00.0/";
  fx.write(dir + "power_state", "D3cold\n");
  RootHost real(fx.root());
  ReadLog host(real);
  auto f = readPciFunction(host, gpu);
  REQUIRE(f);
  CHECK(f->powerState == std::optional<std::string>("D3cold"));
  REQUIRE(host.first("/config") < host.paths.size());
  CHECK(host.first("/power_state") < host.first("/config"));
  // The same on a re-read of the binding alone (the agent's, after an event).
  host.paths.clear();
  REQUIRE(readBindingOf(host, *f));
  REQUIRE(host.first("/config") < host.paths.size());
  CHECK(host.first("/power_state") < host.first("/config"));
}

TEST_CASE("resource: the memory BARs 0-5 with their size and 64-bit flag", "[snapshot]") {
  // An H100 SXM5 as drivers/pci/pci-sysfs.c prints it: a 64-bit BAR takes two slots, the
  // ROM and the SR-IOV BARs follow the six; an I/O BAR (flags 0x101) is not memory.
  const std::string text =
      "0x000000009c000000 0x000000009cffffff 0x0000000000140204\n"
      "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
      "0x0000220000000000 0x0000221fffffffff 0x000000000014220c\n"
      "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
      "0x0000222000000000 0x0000222001ffffff 0x000000000014220c\n"
      "0x000000000000e000 0x000000000000e07f 0x0000000000040101\n"
      "0x00000000c0000000 0x00000000c007ffff 0x0000000000046200\n"
      "0x0000230000000000 0x00002307ffffffff 0x000000000014220c\n";
  auto bars = parsePciResource(text);
  REQUIRE(bars.size() == 3);
  CHECK(bars[0] == PciBar{0, 16u << 20, true, false});
  CHECK(bars[1] == PciBar{2, uint64_t{128} << 30, true, true});
  CHECK(bars[2] == PciBar{4, 32u << 20, true, true});
  CHECK(parseVfBarsAssigned(text) == true);  // line 8: VF BAR 1 has 32 GiB
  CHECK(parseVfBarsAssigned("") == std::nullopt);
  std::string empty;
  for (int i = 0; i < 13; ++i)
    empty += "0x0000000000000000 0x0000000000000000 0x0000000000000000\n";
  CHECK(parseVfBarsAssigned(empty) == false);
  CHECK(parsePciResource("").empty());
  CHECK(parsePciResource("garbage\n0x10 0x0f 0x200\n").empty());  // end before start
}

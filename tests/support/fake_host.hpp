// A fixture host behind the fake kernel, as every rig over a fixture holds it: the tree, the fake
// kernel over it, its module loader, and the Kernel the switch and converge take. Rigs add their
// own options and steps to it (tests/drivers/switch_rig.hpp, tests/agent/converge_rig.hpp).
#pragma once

#include <catch2/catch.hpp>
#include <optional>
#include <string>

#include "drivers/common/pci.hpp"
#include "drivers/model/pci_function.hpp"
#include "drivers/switch/executor.hpp"
#include "tests/support/fake_kernel.hpp"
#include "tests/support/fixture.hpp"

namespace hostprep::test {

struct FakeHost {
  Fixture fx;
  FakeKernel kernel;
  FakeModules modules;
  Kernel k;

  // tests/fixtures/<scenario>
  explicit FakeHost(const std::string& scenario)
      : fx(scenario), kernel(fx.root()), modules(kernel), k{kernel, modules} {}
  explicit FakeHost(const Fixture::HostYaml& yaml)
      : fx(yaml), kernel(fx.root()), modules(kernel), k{kernel, modules} {}
  FakeHost(const FakeHost&) = delete;
  FakeHost& operator=(const FakeHost&) = delete;

  // One function as the kernel shows it now (a BDF the host does not have fails the test).
  PciFunction fn(const char* bdf) const {
    auto f = readPciFunction(kernel, *parseBdf(bdf));
    REQUIRE(f);
    return *f;
  }
  std::optional<std::string> driver(const char* bdf) const { return fn(bdf).driver; }
  std::optional<std::string> override(const char* bdf) const { return fn(bdf).driverOverride; }
};

}  // namespace hostprep::test

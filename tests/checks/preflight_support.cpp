#include "tests/checks/preflight_support.hpp"

#include <catch2/catch.hpp>

#include "tests/support/fake_kernel.hpp"

namespace hostprep::test {

PreflightReport preflightOn(const Fixture& fx, Mode mode, SelectionOptions sel) {
  FakeKernel k(fx.root());
  FakeModules mods(k);
  auto snap = readSnapshot(k);
  const std::string release = snap ? snap->kernelRelease : "";
  const PlatformFacts platform = readPlatform(k, release, mods, preflightModules(sel.hostDriver));
  const BootConfig boot = readBootConfig(k);
  HostFacts facts{snap ? &*snap : nullptr, snap ? "" : snap.error().describe(), platform, boot,
                  readTrimmed(k, "proc/cmdline").value_or("")};
  auto r = preflightHost(facts, PreflightRequest{mode, sel});
  REQUIRE(r);
  return *r;
}

CheckResult check(const PreflightReport& r, std::string_view id) {
  const auto* c = r.find(id);
  INFO("check " << id);
  REQUIRE(c != nullptr);
  return *c;
}

std::string statuses(const PreflightReport& r) {
  std::string s;
  for (const auto& c : r.checks) s += c.id + "=" + std::string(toString(c.status)) + " ";
  return s;
}

}  // namespace hostprep::test

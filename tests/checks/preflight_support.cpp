#include "tests/checks/preflight_support.hpp"

#include <catch2/catch.hpp>

#include "drivers/model/operator_driver.hpp"
#include "drivers/model/selection.hpp"
#include "tests/support/fake_kernel.hpp"

namespace hostprep::test {

namespace {

PreflightReport run(const Fixture& fx, const PreflightRequest& req, bool scoped) {
  const SelectionOptions& sel = req.selection;
  FakeKernel k(fx.root());
  FakeModules mods(k);
  auto snap = scoped ? readSnapshot(k, [&](const PciFunction& f) { return maySelect(f, sel); })
                     : readSnapshot(k);
  const std::string release = snap ? snap->kernelRelease : "";
  const PlatformFacts platform = readPlatform(k, release, mods, preflightModules(sel.hostDriver));
  const BootConfig boot = readBootConfig(k);
  HostFacts facts{snap ? &*snap : nullptr, snap ? "" : snap.error().describe(), platform, boot,
                  readTrimmed(k, "proc/cmdline").value_or("")};
  facts.operatorDriver = operatorProvidesDriver(k, sel.hostDriverProvider, release, sel.hostDriver);
  facts.otherAgents = operatorAgents(k);
  auto r = preflightHost(facts, req);
  REQUIRE(r);
  return *r;
}

}  // namespace

PreflightReport preflightOn(const Fixture& fx, Mode mode, SelectionOptions sel) {
  return run(fx, PreflightRequest{mode, sel}, true);
}

PreflightReport preflightWithRules(const Fixture& fx, Mode defaultMode,
                                   const std::vector<DeviceRule>& rules, SelectionOptions sel) {
  PreflightRequest req{defaultMode, sel};
  req.rules = rules;
  return run(fx, req, true);
}

PreflightReport preflightOnFullSnapshot(const Fixture& fx, Mode mode, SelectionOptions sel) {
  return run(fx, PreflightRequest{mode, sel}, false);
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

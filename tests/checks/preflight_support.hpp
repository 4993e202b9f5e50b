// Helpers of the preflight tests: a fixture host read the way 'hostprep preflight' reads a host.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "checks/preflight.hpp"
#include "tests/support/fixture.hpp"

namespace hostprep::test {

// Reads the fixture the way cmdPreflight reads a host (the snapshot scoped to what the selection
// can reach), with the fake module index, and runs every check.
PreflightReport preflightOn(const Fixture& fx, Mode mode, SelectionOptions sel = {});
// The same on a full snapshot (every attribute of every function).
PreflightReport preflightOnFullSnapshot(const Fixture& fx, Mode mode, SelectionOptions sel = {});

// A mixed node: `defaultMode` for the GPUs no rule matches, the rules' modes for the others (as
// cmdPreflight runs without --mode on a config with devices rules).
PreflightReport preflightWithRules(const Fixture& fx, Mode defaultMode,
                                   const std::vector<DeviceRule>& rules, SelectionOptions sel = {});

// One check of a report, by id (a copy, so that check(preflightOn(...), id) outlives the report);
// fails the test when the report lacks it.
CheckResult check(const PreflightReport& r, std::string_view id);

// "cpu.kvm=PASS iommu.firmware=FAIL ...", for INFO lines.
std::string statuses(const PreflightReport& r);

}  // namespace hostprep::test

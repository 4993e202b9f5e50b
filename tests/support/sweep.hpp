// Fault and crash sweeps on the fake kernel. A sweep takes one plan (a SweepCase: a host and a
// target mode), runs it once cleanly to count its steps, kernel writes and host mutations, and
// then replays it once per fault or crash point on a fresh copy of the host, checking after each
// that every device ends exactly where it began (Fixture::deviceState) and that the next run
// completes. The unit tests sweep every plan the fixtures produce; tests/sweep/ sweeps generated
// topologies for the figures in tests/README.md.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "drivers/model/device_rules.hpp"
#include "drivers/model/mode.hpp"
#include "drivers/model/selection.hpp"

namespace hostprep::test {

class FakeKernel;

struct SweepCase {
  std::string name;          // for reports: "two-a10 -> vm-passthrough"
  std::string scenario;      // tests/fixtures/<scenario>; empty: use hostYaml
  std::string hostYaml;      // a generated topology (host.yaml text)
  std::optional<Mode> from;  // first move the host to this mode (cleanly), then sweep `mode`
  Mode mode = Mode::kVmPassthrough;
  // Per-device modes over `from` and `mode` (a mixed node): GPUs these rules match go elsewhere.
  std::vector<DeviceRule> fromRules, rules;
  SelectionOptions selection;  // --devices, --gpu-ids
  // Kernel behaviour for every run of the case (a held device, a driver refusing a device).
  std::function<void(FakeKernel&)> setupKernel;
};

// A plan on a fixture scenario: tests/fixtures/<scenario> moved to `mode` (after a clean move to
// `from`, when given), named for reports.
SweepCase fixtureCase(std::string scenario, Mode mode, std::optional<Mode> from = std::nullopt,
                      SelectionOptions sel = {});
// A mixed node reversed in one run (two-a10: 3b:00.0 on vfio-pci, 86:00.0 on nvidia, then the
// other way round): one plan that moves GPUs both ways.
SweepCase bothWaysCase();
// Every plan the fixtures can produce. A new plan (a vm-vgpu scenario) is one line there.
std::vector<SweepCase> fixtureCases();

// N GPUs, each with `companions` functions (audio, USB, UCSI, ...) in its own IOMMU group, plus
// a root NVMe and a NIC. `vfioEvery` > 0 starts every vfioEvery-th GPU (and its companions)
// already on vfio-pci, for plans that move only part of the host.
std::string generatedTopology(int gpus, int companions, int vfioEvery = 0);

struct SweepTally {
  size_t points = 0;
  size_t stranded = 0;                // points after which the host was not as it began
  std::vector<std::string> failures;  // the first few, described

  void fail(const std::string& what);
  SweepTally& operator+=(const SweepTally& o);
};

// A failure (each errno in turn) injected at every kernel write k of the plan: the run must fail,
// roll back, remove its journal, and leave every device where it began.
SweepTally faultSweep(const SweepCase& c, const std::vector<int>& errnos = {5 /* EIO */});
// The journal write before every step fails (ENOSPC): same promise.
SweepTally journalFaultSweep(const SweepCase& c);
// A SIGKILL right after every step k (ApplyOptions::afterStep returns false); the next run's
// recoverJournal must put every device back, and the run after it must complete.
SweepTally crashSweep(const SweepCase& c);
// A crash right before every host mutation (kernel write, journal write or removal, module
// load), which also lands between a step's write and its verification.
SweepTally mutationCrashSweep(const SweepCase& c);
// A failure at write k, then a crash at every mutation of the rollback that follows, then the
// next run's recovery.
SweepTally rollbackCrashSweep(const SweepCase& c);
// A crash after step k, then a crash at every mutation of the recovery, then recovery again.
SweepTally recoveryCrashSweep(const SweepCase& c);
// A failure at write k and a second one at every write j of the rollback (the rollback fails and
// keeps the journal); the next run's recovery must finish the job.
SweepTally doubleFaultSweep(const SweepCase& c);

}  // namespace hostprep::test

// The fault and crash sweeps over every plan the fixtures produce (tests/support/sweep.hpp), with
// their counts printed for the record. tests/sweep/ runs the same sweeps over generated hosts.
#include "tests/support/sweep.hpp"

#include <catch2/catch.hpp>
#include <cerrno>
#include <iostream>

#include "drivers/common/pci.hpp"
#include "tests/support/fake_kernel.hpp"

using namespace hostprep;
using namespace hostprep::test;

namespace {

// Runs a sweep over every fixture plan (stride 1), or over every stride-th one for the sweeps
// whose points multiply (tests/sweep/ runs those over all plans and more hosts).
template <class F>
SweepTally sweepAll(const char* label, F&& sweep, size_t stride = 1) {
  SweepTally total;
  const auto cases = fixtureCases();
  size_t plans = 0;
  for (size_t i = 0; i < cases.size(); i += stride, ++plans) total += sweep(cases[i]);
  for (const auto& f : total.failures) UNSCOPED_INFO(f);
  std::cout << label << ": " << total.points << " points over " << plans << " plans, "
            << total.stranded << " stranded\n";
  return total;
}

}  // namespace

TEST_CASE("fault sweep: a failure at every kernel write of every plan strands nothing", "[sweep]") {
  auto t =
      sweepAll("fault sweep (EIO, EBUSY, ENODEV at every kernel write)", [](const SweepCase& c) {
        return faultSweep(c, {EIO, EBUSY, ENODEV});
      });
  std::cout << t.points << " fault points, " << t.stranded << " stranded\n";
  CHECK(t.points > 200);
  CHECK(t.stranded == 0);
}

TEST_CASE("fault sweep: a failed journal write strands nothing", "[sweep]") {
  auto t = sweepAll("journal write faults", journalFaultSweep);
  // One point per plan: the journal is written once, before the first step (no unbind hangs here).
  CHECK(t.points == fixtureCases().size());
  CHECK(t.stranded == 0);
}

TEST_CASE("crash sweep: a SIGKILL after every step is recovered by the next run", "[sweep]") {
  auto t = sweepAll("crash sweep (after every step)", crashSweep);
  std::cout << t.points << " crash points, " << t.stranded << " stranded\n";
  CHECK(t.points > 50);
  CHECK(t.stranded == 0);
}

TEST_CASE("crash sweep: a SIGKILL before every host mutation is recovered", "[sweep]") {
  auto t = sweepAll("crash sweep (before every host mutation)", mutationCrashSweep);
  CHECK(t.points > 90);
  CHECK(t.stranded == 0);
}

TEST_CASE("crash sweep: a SIGKILL during the rollback after every fault is recovered", "[sweep]") {
  auto t = sweepAll("crash during rollback", rollbackCrashSweep);
  std::cout << t.points << " crash points during rollback, " << t.stranded << " stranded\n";
  CHECK(t.points > 100);
  CHECK(t.stranded == 0);
}

TEST_CASE("crash sweep: a SIGKILL during recovery is recovered by the run after", "[sweep]") {
  auto t = sweepAll("crash during recovery", recoveryCrashSweep, 3);
  CHECK(t.points > 100);
  CHECK(t.stranded == 0);
}

TEST_CASE("double faults: a rollback that fails leaves a journal the next run resolves",
          "[sweep]") {
  auto t = sweepAll("fault during rollback", doubleFaultSweep, 3);
  CHECK(t.points > 50);
  CHECK(t.stranded == 0);
}

TEST_CASE("the sweep reports a stranded device when there is one", "[sweep]") {
  // The sweep must be able to fail: when the fake kernel's nvidia refuses the GPU, a rollback
  // cannot put it back, and every fault after its unbind is a stranded point.
  SweepCase c;
  c.name = "generated 1x1 with nvidia refusing the GPU";
  c.hostYaml = generatedTopology(1, 1);
  c.mode = Mode::kVmPassthrough;
  c.setupKernel = [](FakeKernel& k) { k.refuseBind(*parseBdf("0000:10:00.0"), "nvidia"); };
  SweepTally bad = faultSweep(c, {EIO});
  CHECK(bad.points == 6);
  CHECK(bad.stranded > 0);
  REQUIRE_FALSE(bad.failures.empty());
  CHECK_THAT(bad.failures.front(), Catch::Contains("0000:10:00.0"));

  c.setupKernel = nullptr;
  SweepTally good = faultSweep(c, {EIO});
  CHECK(good.points == 6);
  CHECK(good.stranded == 0);
}

TEST_CASE("a plan that moves GPUs both ways rolls back from every fault and crash point",
          "[sweep][mixed]") {
  // One GPU vfio-pci -> nvidia while the other goes nvidia -> vfio-pci, in one journal.
  const SweepCase c = bothWaysCase();
  SweepTally t;
  t += faultSweep(c, {EIO, EBUSY});
  t += journalFaultSweep(c);
  t += crashSweep(c);
  t += mutationCrashSweep(c);
  t += rollbackCrashSweep(c);
  t += recoveryCrashSweep(c);
  t += doubleFaultSweep(c);
  for (const auto& f : t.failures) UNSCOPED_INFO(f);
  std::cout << "both ways: " << t.points << " points, " << t.stranded << " stranded\n";
  CHECK(t.points > 100);
  CHECK(t.stranded == 0);
}

// The switch end to end on the fake kernel: plan, apply, verify, roll back, recover.
#include <catch2/catch.hpp>

#include "drivers/executor.hpp"
#include "drivers/selection.hpp"
#include "drivers/snapshot.hpp"
#include "tests/support/fake_kernel.hpp"
#include "tests/support/fixture.hpp"

using namespace hostprep;
using hostprep::test::FakeKernel;
using hostprep::test::FakeModules;
using hostprep::test::Fixture;

namespace {

struct Rig {
  Fixture fx;
  FakeKernel kernel;
  FakeModules modules;
  Kernel k;
  ApplyOptions opt;

  explicit Rig(const std::string& scenario)
      : fx(scenario), kernel(fx.root()), modules(kernel), k{kernel, modules} {
    opt.unbindTimeout = std::chrono::milliseconds(200);
  }

  Plan plan(Mode mode, SelectionOptions so = {}) {
    auto s = readSnapshot(kernel);
    REQUIRE(s);
    auto sel = selectDevices(*s, so);
    REQUIRE(sel);
    auto p = makePlan(*s, *sel, {mode, "nvidia", ""});
    REQUIRE(p);
    return *p;
  }

  std::optional<std::string> driver(const char* bdf) {
    return readPciFunction(kernel, *parseBdf(bdf))->driver;
  }
  std::optional<std::string> override(const char* bdf) {
    return readPciFunction(kernel, *parseBdf(bdf))->driverOverride;
  }
};

const char* kA10[] = {"0000:3b:00.0", "0000:3b:00.1", "0000:86:00.0", "0000:86:00.1"};

}  // namespace

TEST_CASE("the dry-run plan for two A10s lists both GPUs and both audio functions", "[switcher]") {
  Rig r("two-a10");
  auto before = r.fx.deviceState();
  Plan p = r.plan(Mode::kVmPassthrough);
  REQUIRE(p.moves.size() == 4);
  for (size_t i = 0; i < 4; ++i) CHECK(p.moves[i].changes);
  CHECK(p.moves[0].bdf.str() == "0000:3b:00.0");
  CHECK(p.moves[1].bdf.str() == "0000:86:00.0");
  CHECK(p.moves[2].bdf.str() == "0000:3b:00.1");
  CHECK(p.moves[3].bdf.str() == "0000:86:00.1");
  std::vector<std::string> steps;
  for (const auto& st : p.steps) steps.push_back(st.describe());
  CHECK(steps.front() == "load module vfio_pci");
  CHECK(steps[1] == "0000:3b:00.0: set driver_override to vfio-pci");
  CHECK(steps[2] == "0000:3b:00.0: unbind from nvidia");
  CHECK(steps[3] == "0000:3b:00.0: probe drivers");
  CHECK(steps[4] == "0000:3b:00.0: verify it is bound to vfio-pci");
  CHECK(steps[10] == "0000:3b:00.1: unbind from snd_hda_intel");
  CHECK(steps[steps.size() - 2] == "verify /dev/vfio/30 exists");
  CHECK(steps.back() == "verify /dev/vfio/60 exists");
  CHECK(steps.size() == 1 + 4 * 4 + 2);
  CHECK(r.kernel.writeCount() == 0);
  CHECK(r.fx.deviceState() == before);  // planning touches nothing
}

TEST_CASE("vm-passthrough and back on the fake kernel", "[switcher]") {
  Rig r("two-a10");
  auto before = r.fx.deviceState();
  auto res = applyPlan(r.k, r.plan(Mode::kVmPassthrough), r.opt);
  REQUIRE(res);
  for (const char* b : kA10) {
    CHECK(r.driver(b) == std::optional<std::string>("vfio-pci"));
    CHECK(r.override(b) == std::optional<std::string>("vfio-pci"));
  }
  CHECK(r.kernel.exists("dev/vfio/30"));
  CHECK(r.kernel.exists("dev/vfio/60"));
  CHECK(r.driver("0000:5e:00.0") == std::optional<std::string>("nvme"));  // never touched
  CHECK_FALSE(r.kernel.exists("run/hostprep/journal.json"));

  SECTION("a second run to the same mode is a no-op") {
    Plan again = r.plan(Mode::kVmPassthrough);
    CHECK(again.noop());
  }
  SECTION("container mode brings every function back") {
    REQUIRE(applyPlan(r.k, r.plan(Mode::kContainer), r.opt));
    CHECK(r.fx.deviceState() == before);
    CHECK(r.plan(Mode::kContainer).noop());
  }
}

TEST_CASE("groups move in parallel lanes, and serially when asked", "[switcher]") {
  for (bool parallel : {true, false}) {
    INFO("parallel " << parallel);
    Rig r("two-a10");
    auto before = r.fx.deviceState();
    r.opt.parallel = parallel;
    std::vector<std::string> moved;
    r.opt.onDevice = [&](const DeviceMove& mv, const Status& s) {
      CHECK(s.ok());
      moved.push_back(mv.bdf.str());
    };
    REQUIRE(applyPlan(r.k, r.plan(Mode::kVmPassthrough), r.opt));
    CHECK(moved.size() == 4);
    if (!parallel) {
      // Serial runs follow the plan: GPUs first, then companions.
      CHECK(moved == std::vector<std::string>{"0000:3b:00.0", "0000:86:00.0", "0000:3b:00.1",
                                              "0000:86:00.1"});
    }
    REQUIRE(applyPlan(r.k, r.plan(Mode::kContainer), r.opt));
    CHECK(r.fx.deviceState() == before);
  }
}

TEST_CASE("an already prepared node is a no-op", "[switcher]") {
  Rig r("passthrough-done");
  Plan p = r.plan(Mode::kVmPassthrough);
  CHECK(p.noop());
  CHECK(p.moves.size() == 4);
  auto res = applyPlan(r.k, p, r.opt);
  REQUIRE(res);
  CHECK(res->stepsRun == 0);
  CHECK(r.kernel.writeCount() == 0);
}

TEST_CASE("container mode from a passthrough node loads the host driver first", "[switcher]") {
  Rig r("passthrough-done");
  r.fx.write("lib/modules/6.1.0-test-amd64/modules.dep",
             "kernel/drivers/nvidia.ko:\nkernel/drivers/vfio_pci.ko:\n");
  // nvidia is loaded in this fixture; unload it in the fake world by removing its directory.
  std::filesystem::remove_all(r.fx.path("sys/bus/pci/drivers/nvidia"));
  std::filesystem::remove_all(r.fx.path("sys/module/nvidia"));
  r.fx.write("proc/modules", "vfio_pci 1 0 - Live 0x0\nsnd_hda_intel 1 0 - Live 0x0\n");
  Plan p = r.plan(Mode::kContainer);
  REQUIRE_FALSE(p.noop());
  CHECK(p.steps.front().describe() == "load module nvidia");
  REQUIRE(applyPlan(r.k, p, r.opt));
  CHECK(r.driver("0000:3b:00.0") == std::optional<std::string>("nvidia"));
  CHECK(r.driver("0000:3b:00.1") == std::optional<std::string>("snd_hda_intel"));
  CHECK_FALSE(r.override("0000:3b:00.0"));
  CHECK_FALSE(r.kernel.exists("dev/vfio/30"));
}

TEST_CASE("a Turing group moves all four functions", "[switcher]") {
  Rig r("turing-usb-ucsi");
  auto before = r.fx.deviceState();
  REQUIRE(applyPlan(r.k, r.plan(Mode::kVmPassthrough), r.opt));
  for (const char* b : {"0000:18:00.0", "0000:18:00.1", "0000:18:00.2", "0000:18:00.3"}) {
    CHECK(r.driver(b) == std::optional<std::string>("vfio-pci"));
  }
  CHECK(r.driver("0000:17:00.0") == std::optional<std::string>("pcieport"));
  REQUIRE(applyPlan(r.k, r.plan(Mode::kContainer), r.opt));
  CHECK(r.fx.deviceState() == before);
}

TEST_CASE("a failure injected at every step leaves the host exactly as it was",
          "[switcher][faults]") {
  for (auto [scenario, mode] : {std::pair{"two-a10", Mode::kVmPassthrough},
                                std::pair{"turing-usb-ucsi", Mode::kVmPassthrough},
                                std::pair{"passthrough-done", Mode::kContainer}}) {
    size_t total = 0;
    {
      Rig probe(scenario);
      REQUIRE(applyPlan(probe.k, probe.plan(mode), probe.opt));
      total = probe.kernel.writeCount();
    }
    REQUIRE(total > 4);
    for (size_t k = 0; k < total; ++k) {
      INFO(scenario << " write " << k);
      Rig r(scenario);
      auto before = r.fx.deviceState();
      r.kernel.failWrite(k, EIO);
      auto res = applyPlan(r.k, r.plan(mode), r.opt);
      REQUIRE_FALSE(res);
      CHECK(res.error().err == EIO);
      CHECK_THAT(res.error().advice, Catch::Contains("every device was put back"));
      CHECK(r.fx.deviceState() == before);
      CHECK_FALSE(r.kernel.exists("run/hostprep/journal.json"));
    }
  }
}

TEST_CASE("a probe that binds nothing is caught by verification and rolled back", "[switcher]") {
  Rig r("two-a10");
  auto before = r.fx.deviceState();
  // vfio-pci's probe() fails for the audio function: drivers_probe still "succeeds".
  r.kernel.refuseBind(*parseBdf("0000:86:00.1"), "vfio-pci");
  auto res = applyPlan(r.k, r.plan(Mode::kVmPassthrough), r.opt);
  REQUIRE_FALSE(res);
  CHECK(res.error().describe() ==
        "0000:86:00.1: verify it is bound to vfio-pci: bound to no driver after probing: No such "
        "device (the driver refused the device; see dmesg; every device was put back on its "
        "original driver)");
  CHECK(r.fx.deviceState() == before);

  SECTION("a module that cannot load stops the run before any device moves") {
    Rig m("two-a10");
    m.fx.write("lib/modules/6.1.0-test-amd64/modules.dep", "kernel/drivers/nvidia.ko:\n");
    auto res2 = applyPlan(m.k, m.plan(Mode::kVmPassthrough), m.opt);
    REQUIRE_FALSE(res2);
    CHECK_THAT(res2.error().message,
               Catch::StartsWith("load module vfio_pci: cannot load module vfio_pci"));
    CHECK(m.kernel.writeCount() == 0);
  }
}

TEST_CASE("the error names the device, the step, errno and the advice", "[switcher]") {
  Rig r("two-a10");
  r.opt.parallel = false;  // one lane at a time, so the first failure is 0000:3b:00.0's
  r.kernel.failWritesTo("drivers/nvidia/unbind", EBUSY);
  auto res = applyPlan(r.k, r.plan(Mode::kVmPassthrough), r.opt);
  REQUIRE_FALSE(res);
  CHECK(res.error().describe() ==
        "0000:3b:00.0: unbind from nvidia: cannot write to sys/bus/pci/drivers/nvidia/unbind "
        "(injected): Device or resource busy (see dmesg; every device was put back on its "
        "original driver)");
}

TEST_CASE("an unbind that never returns is reported, not waited on forever", "[switcher]") {
  Rig r("two-a10");
  r.opt.parallel = false;
  auto before = r.fx.deviceState();
  const Bdf stuck = *parseBdf("0000:86:00.0");
  r.kernel.holdDevice(stuck);
  auto res = applyPlan(r.k, r.plan(Mode::kVmPassthrough), r.opt);
  REQUIRE_FALSE(res);
  CHECK(res.error().err == ETIMEDOUT);
  CHECK_THAT(res.error().describe(), Catch::Contains("0000:86:00.0: unbind from nvidia"));
  CHECK_THAT(res.error().describe(), Catch::Contains("holds the device"));
  // The stuck device is left alone (touching it would block on its device lock); the others are
  // back, and the journal stays for the next run.
  CHECK_THAT(res.error().describe(),
             Catch::Contains("ROLLBACK FAILED: 0000:86:00.0: left as it is: its unbind from nvidia "
                             "is still pending"));
  CHECK(r.driver("0000:3b:00.0") == std::optional<std::string>("nvidia"));
  CHECK_FALSE(r.override("0000:3b:00.0"));
  REQUIRE(r.kernel.exists("run/hostprep/journal.json"));
  // As on the real kernel the stuck device already looks driverless, yet nothing read or wrote an
  // attribute that takes its device lock (that would have hung the run).
  CHECK_FALSE(readLinkName(r.kernel, "sys/bus/pci/devices/0000:86:00.0/driver"));
  CHECK(r.kernel.blockedAccesses().empty());

  SECTION("while the holder stays, the next run refuses to touch it") {
    auto rec = recoverJournal(r.k, r.opt);
    REQUIRE_FALSE(rec);
    CHECK_THAT(rec.error().describe(), Catch::Contains("still pending"));
    CHECK(r.kernel.exists("run/hostprep/journal.json"));
    CHECK(r.kernel.blockedAccesses().empty());
  }
  SECTION("while the holder stays, a snapshot reads around the locked device") {
    auto s = readSnapshot(r.kernel);
    REQUIRE(s);
    const PciFunction* f = s->find(stuck);
    REQUIRE(f);
    CHECK(f->unbindPending);
    CHECK_FALSE(f->driver);
    CHECK_FALSE(f->driverOverride);
    CHECK_FALSE(s->find(*parseBdf("0000:3b:00.0"))->unbindPending);
    CHECK(r.kernel.blockedAccesses().empty());
  }
  SECTION("once the holder goes, the next run restores everything") {
    r.kernel.releaseDevice(stuck);  // remove() finishes: the device is now driverless
    CHECK_FALSE(r.driver("0000:86:00.0"));
    auto rec = recoverJournal(r.k, r.opt);
    REQUIRE(rec);
    CHECK(r.fx.deviceState() == before);
    CHECK_FALSE(r.kernel.exists("run/hostprep/journal.json"));
  }
}

TEST_CASE("a held device is found with its holder before anything moves", "[switcher]") {
  Rig r("held-device");
  r.opt.holderNodes = {"/dev/nvidia*"};
  auto holders = planHolders(r.kernel, r.plan(Mode::kVmPassthrough), r.opt);
  REQUIRE(holders.size() == 1);
  CHECK(holders[0].describe() == "pid 4242 (nvidia-persistenced) holds /dev/nvidia0");
  SECTION("the node pattern follows the host driver") {
    r.opt.holderNodes = {"/dev/standin*"};
    CHECK(planHolders(r.kernel, r.plan(Mode::kVmPassthrough), r.opt).empty());
  }
}

TEST_CASE("a crash after any step is resolved by the next run", "[switcher][crash]") {
  size_t steps = 0;
  {
    Rig probe("two-a10");
    steps = probe.plan(Mode::kVmPassthrough).steps.size();
  }
  for (size_t k = 0; k < steps; ++k) {
    INFO("crash after step " << k);
    Rig r("two-a10");
    auto before = r.fx.deviceState();
    r.opt.afterStep = [k](size_t i) { return i != k; };
    auto res = applyPlan(r.k, r.plan(Mode::kVmPassthrough), r.opt);
    REQUIRE_FALSE(res);
    REQUIRE(r.kernel.exists("run/hostprep/journal.json"));
    auto rec = recoverJournal(r.k, r.opt);
    REQUIRE(rec);
    REQUIRE(*rec);
    CHECK(**rec == 4);
    CHECK(r.fx.deviceState() == before);
    CHECK_FALSE(r.kernel.exists("run/hostprep/journal.json"));
    // And the run after that completes normally.
    r.opt.afterStep = nullptr;
    REQUIRE(applyPlan(r.k, r.plan(Mode::kVmPassthrough), r.opt));
    CHECK(r.driver("0000:86:00.1") == std::optional<std::string>("vfio-pci"));
  }
}

TEST_CASE("vm-passthrough without an IOMMU is refused before anything changes", "[switcher]") {
  Rig r("no-iommu");
  auto s = readSnapshot(r.kernel);
  auto sel = selectDevices(*s, {});
  auto p = makePlan(*s, *sel, {Mode::kVmPassthrough, "nvidia", ""});
  REQUIRE_FALSE(p);
  CHECK_THAT(p.error().describe(),
             Catch::Contains("0000:3b:00.0 (10de:2236 3D controller): has no IOMMU group"));
  CHECK_THAT(p.error().describe(), Catch::Contains("intel_iommu=on"));
}

TEST_CASE("container mode refuses a GPU held by nouveau with the blacklist advice", "[switcher]") {
  Rig r("two-a10");
  std::filesystem::remove(r.fx.path("sys/devices/pci0000:3b/0000:3b:00.0/driver"));
  r.fx.symlink("sys/devices/pci0000:3b/0000:3b:00.0/driver", "../../../bus/pci/drivers/nouveau");
  auto s = readSnapshot(r.kernel);
  auto sel = selectDevices(*s, {});
  auto p = makePlan(*s, *sel, {Mode::kContainer, "nvidia", ""});
  REQUIRE_FALSE(p);
  CHECK_THAT(p.error().describe(), Catch::Contains("is bound to nouveau, not nvidia"));
  CHECK_THAT(p.error().describe(), Catch::Contains("blacklist nouveau"));
}

TEST_CASE("a device that vanishes mid-plan fails its verification, not passes it", "[switcher]") {
  Rig r("two-a10");
  REQUIRE(applyPlan(r.k, r.plan(Mode::kVmPassthrough), r.opt));
  Plan p = r.plan(Mode::kContainer);
  // The first device that leaves vfio for no driver of its own choosing: unplug it right before
  // that verification, after its probe.
  size_t verify = 0;
  while (verify < p.steps.size() &&
         !(p.steps[verify].kind == StepKind::kVerifyDriver && p.steps[verify].arg.empty())) {
    ++verify;
  }
  REQUIRE(verify < p.steps.size());
  REQUIRE(verify > 0);
  const Bdf gone = *p.steps[verify].bdf;
  r.opt.parallel = false;
  r.opt.afterStep = [&](size_t i) {
    if (i == verify - 1) r.kernel.unplug(gone);
    return true;
  };
  auto res = applyPlan(r.k, p, r.opt);
  REQUIRE_FALSE(res);
  CHECK(res.error().message ==
        gone.str() + ": verify it left vfio: the device is gone from /sys/bus/pci/devices/" +
            gone.str());
  CHECK(res.error().err == ENODEV);
  CHECK(res.error().exit == Exit::kFailed);
  // The rollback cannot put it back either, and says so; the journal stays for the next run.
  CHECK_THAT(res.error().advice,
             Catch::Contains("ROLLBACK FAILED: " + gone.str() + ": the device is gone"));
  CHECK(r.kernel.exists("run/hostprep/journal.json"));
}

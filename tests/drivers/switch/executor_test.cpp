// The executor (drivers/switch/executor.cpp) end to end on the fake kernel: apply, verify, roll
// back, recover; driver moves in lanes, SR-IOV VFs and vGPU devices on both interfaces; holders.
#include "drivers/switch/executor.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <mutex>
#include <thread>

#include "drivers/model/journal.hpp"
#include "drivers/model/snapshot.hpp"
#include "drivers/model/vgpu.hpp"
#include "tests/drivers/switch_rig.hpp"
#include "tests/support/delayed_host.hpp"

using namespace hostprep;
using namespace hostprep::test::rig;
using hostprep::test::DelayedHost;
using hostprep::test::FakeKernel;
using hostprep::test::FakeModules;
using hostprep::test::Fixture;
using hostprep::test::slowRemoveOf;

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

TEST_CASE("a lane whose thread cannot start runs on the caller's thread", "[switcher]") {
  // pthread_create fails with EAGAIN under a pids limit (a pod's, a unit's TasksMax): every
  // second lane gets no thread. The switch completes; nothing is left half-done or terminated.
  Rig r("two-a10");
  size_t started = 0, refused = 0;
  r.opt.startThread = [&](std::function<void()> body) {
    if ((started + refused) % 2 == 1) {
      ++refused;
      throw std::system_error(EAGAIN, std::generic_category(), "pthread_create");
    }
    ++started;
    return std::thread(std::move(body));
  };
  REQUIRE(applyPlan(r.k, r.plan(Mode::kVmPassthrough), r.opt));
  CHECK(started >= 1);
  CHECK(refused >= 1);
  for (const char* b : {"0000:3b:00.0", "0000:3b:00.1", "0000:86:00.0", "0000:86:00.1"})
    CHECK(r.driver(b) == std::optional<std::string>("vfio-pci"));
  CHECK_FALSE(r.kernel.exists("run/hostprep/journal.json"));
}

TEST_CASE("a companion moving to vfio does not wait for its GPU's remove()", "[switcher]") {
  // The GPU's remove() takes half a second; its audio companion, in the same IOMMU group, moves
  // in a lane of its own and is on vfio-pci long before the GPU is.
  Rig r("two-a10");
  Plan p = r.plan(Mode::kVmPassthrough);
  DelayedHost slow(r.kernel, slowRemoveOf("0000:3b:00.0", std::chrono::milliseconds(500)));
  Kernel k{slow, r.modules};
  std::vector<std::string> moved;
  r.opt.onDevice = [&](const DeviceMove& mv, const Status& s) {
    CHECK(s.ok());
    moved.push_back(mv.bdf.str());
  };
  REQUIRE(applyPlan(k, p, r.opt));
  REQUIRE(moved.size() == 4);
  CHECK(moved.back() == "0000:3b:00.0");
  for (const char* b : kA10) CHECK(r.driver(b) == std::optional<std::string>("vfio-pci"));
  CHECK(r.kernel.exists("dev/vfio/30"));
}

TEST_CASE("a group moving back to host drivers keeps its order: GPU, then companion",
          "[switcher]") {
  Rig r("passthrough-done");
  Plan p = r.plan(Mode::kContainer);
  DelayedHost slow(r.kernel, slowRemoveOf("0000:3b:00.0", std::chrono::milliseconds(300)));
  Kernel k{slow, r.modules};
  std::vector<std::string> moved;
  r.opt.onDevice = [&](const DeviceMove& mv, const Status&) { moved.push_back(mv.bdf.str()); };
  REQUIRE(applyPlan(k, p, r.opt));
  auto at = [&](const char* b) { return std::find(moved.begin(), moved.end(), b) - moved.begin(); };
  CHECK(at("0000:3b:00.0") < at("0000:3b:00.1"));
  CHECK(r.driver("0000:3b:00.1") == std::optional<std::string>("snd_hda_intel"));
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
  // leftover: the GPU on nvidia starts with driver_override naming vfio-pci (set, never acted
  // on). The plan leaves the override alone; a rollback must bind nvidia before it writes that
  // override back, since the kernel binds a device only to the driver its override names.
  struct Case {
    const char* scenario;
    Mode mode;
    bool leftover;
  };
  for (auto [scenario, mode, leftover] :
       {Case{"two-a10", Mode::kVmPassthrough, false}, Case{"two-a10", Mode::kVmPassthrough, true},
        Case{"turing-usb-ucsi", Mode::kVmPassthrough, false},
        Case{"passthrough-done", Mode::kContainer, false}}) {
    auto setUp = [leftover = leftover](Rig& r) {
      if (leftover) r.fx.write("sys/bus/pci/devices/0000:3b:00.0/driver_override", "vfio-pci\n");
    };
    size_t total = 0;
    {
      Rig probe(scenario);
      setUp(probe);
      REQUIRE(applyPlan(probe.k, probe.plan(mode), probe.opt));
      total = probe.kernel.writeCount();
    }
    REQUIRE(total > 4);
    for (size_t k = 0; k < total; ++k) {
      INFO(scenario << (leftover ? " (leftover override)" : "") << " write " << k);
      Rig r(scenario);
      setUp(r);
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

TEST_CASE("an unbind that never returns in the rollback is written to the journal as pending",
          "[switcher]") {
  Rig r("two-a10");
  r.opt.parallel = false;  // GPUs first, then companions
  auto before = r.fx.deviceState();
  const Bdf gpu = *parseBdf("0000:3b:00.0");
  // A VM opens the GPU as soon as it is on vfio-pci (its remove() now waits for it), and the
  // companion's unbind fails later: the rollback's unbind of the GPU from vfio-pci never returns.
  bool held = false;
  r.opt.afterStep = [&](size_t) {
    if (!held && r.driver("0000:3b:00.0") == std::optional<std::string>("vfio-pci")) {
      r.kernel.holdDevice(gpu);
      held = true;
    }
    return true;
  };
  r.kernel.failWritesTo("drivers/snd_hda_intel/unbind", EBUSY);
  auto res = applyPlan(r.k, r.plan(Mode::kVmPassthrough), r.opt);
  REQUIRE_FALSE(res);
  REQUIRE(held);
  CHECK_THAT(res.error().describe(),
             Catch::Contains("ROLLBACK FAILED: 0000:3b:00.0: cannot restore it to nvidia: unbind "
                             "from vfio-pci"));
  auto jr = readJournal(r.kernel);
  REQUIRE(jr);
  REQUIRE(*jr);
  bool marked = false;
  for (const auto& d : (*jr)->devices) {
    if (d.bdf == gpu) marked = d.pendingUnbind == std::optional<std::string>("vfio-pci");
  }
  CHECK(marked);
  CHECK(r.kernel.blockedAccesses().empty());

  SECTION("while the VM holds it, the next run and a snapshot read around it") {
    auto rec = recoverJournal(r.k, r.opt);
    REQUIRE_FALSE(rec);
    CHECK_THAT(rec.error().describe(), Catch::Contains("still pending"));
    auto snap = readSnapshot(r.kernel);
    REQUIRE(snap);
    CHECK(snap->find(gpu)->unbindPending);
    CHECK(r.kernel.blockedAccesses().empty());
  }
  SECTION("once it lets go, the next run restores everything") {
    r.kernel.releaseDevice(gpu);
    auto rec = recoverJournal(r.k, r.opt);
    REQUIRE(rec);
    CHECK(r.fx.deviceState() == before);
    CHECK(r.kernel.blockedAccesses().empty());
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

TEST_CASE("two T4s: mdev devices on the PF, the GRID prefix matched, instances counting down",
          "[vgpu]") {
  VRig r("vgpu-two-t4");
  auto before = r.fx.deviceState();
  Plan p = r.plan(Mode::kVmVgpu);  // embedded default: T4-8Q x 2 per card
  CHECK(p.sriov.empty());
  REQUIRE(p.vgpus.size() == 4);
  CHECK(p.vgpus[0].typeName == "GRID T4-8Q");
  CHECK(p.vgpus[0].iface == VgpuInterface::kMdev);
  CHECK(p.vgpus[1].uuid == vgpuUuid(*parseBdf("0000:3b:00.0"), "T4-8Q", 1));
  CHECK(expectedAdvertised(p) == advertised({{"nvidia.com/GRID_T4-8Q", 4}}));
  CHECK(describe(p) ==
        std::vector<std::string>{"0000:3b:00.0: create vGPU T4-8Q (mdev " + p.vgpus[0].uuid + ")",
                                 "0000:3b:00.0: create vGPU T4-8Q (mdev " + p.vgpus[1].uuid + ")",
                                 "0000:d8:00.0: create vGPU T4-8Q (mdev " + p.vgpus[2].uuid + ")",
                                 "0000:d8:00.0: create vGPU T4-8Q (mdev " + p.vgpus[3].uuid + ")"});
  CHECK(r.kernel.writeCount() == 0);
  CHECK(diff(before, r.fx.deviceState()) == "");  // planning touches nothing

  REQUIRE(applyPlan(r.k, p, r.opt));
  const std::string types = "sys/bus/pci/devices/0000:3b:00.0/mdev_supported_types/";
  CHECK(r.read(types + "nvidia-225/available_instances") == "0");
  CHECK(r.read(types + "nvidia-224/available_instances") == "0");  // one type per GPU
  auto devs = r.vgpus();
  REQUIRE(devs.size() == 4);
  for (const auto& d : devs) CHECK(d.typeName == "GRID T4-8Q");
  CHECK(r.read("sys/bus/mdev/devices/" + p.vgpus[3].uuid + "/mdev_type/name") == "GRID T4-8Q");
  CHECK(r.plan(Mode::kVmVgpu).noop());  // idempotent: the same UUIDs are already there
  CHECK_FALSE(r.kernel.exists("run/hostprep/journal.json"));

  SECTION("another profile removes the old devices first, then creates the new ones") {
    Plan q = r.plan(Mode::kVmVgpu, "t4-4q");
    auto steps = describe(q);
    REQUIRE(steps.size() == 4 + 8);
    CHECK_THAT(steps[0], Catch::StartsWith("0000:3b:00.0: remove vGPU "));
    CHECK(steps[4] == "0000:3b:00.0: create vGPU T4-4Q (mdev " +
                          vgpuUuid(*parseBdf("0000:3b:00.0"), "T4-4Q", 0) + ")");
    REQUIRE(applyPlan(r.k, q, r.opt));
    CHECK(r.read(types + "nvidia-224/available_instances") == "0");
    CHECK(r.vgpus().size() == 8);
    CHECK(expectedAdvertised(q) == advertised({{"nvidia.com/GRID_T4-4Q", 8}}));
  }
  SECTION("back to container mode removes every device and gives the instances back") {
    Plan c = r.plan(Mode::kContainer);
    CHECK(describe(c).size() == 4);
    REQUIRE(applyPlan(r.k, c, r.opt));
    CHECK(diff(before, r.fx.deviceState()) == "");
  }
}

TEST_CASE("two A10s: VFs enabled first, one vGPU per VF, default A10-12Q x 2 per card", "[vgpu]") {
  VRig r("vgpu-two-a10");
  auto before = r.fx.deviceState();
  Plan p = r.plan(Mode::kVmVgpu);
  REQUIRE(p.sriov.size() == 2);
  CHECK(p.sriov[0].to == 16);
  REQUIRE(p.vgpus.size() == 4);
  CHECK(p.vgpus[0].parent.str() == "0000:3b:00.4");  // VF 0: routing id + offset 4
  CHECK(p.vgpus[1].parent.str() == "0000:3b:00.5");
  CHECK(p.vgpus[2].parent.str() == "0000:86:00.4");
  CHECK_FALSE(p.vgpus[0].iface);  // decided once the VF exists
  CHECK(expectedAdvertised(p) == advertised({{"nvidia.com/NVIDIA_A10-12Q", 4}}));
  auto steps = describe(p);
  CHECK(std::vector<std::string>(steps.begin(), steps.begin() + 13) ==
        std::vector<std::string>{
            "load module nvidia_vgpu_vfio",  // available for this kernel, not loaded yet
            "load module pci_pf_stub",
            "0000:3b:00.0: acquire the nvidia unbindLock",
            "0000:3b:00.0: set driver_override to pci-pf-stub",
            "0000:3b:00.0: unbind from nvidia",
            "0000:3b:00.0: probe drivers",
            "0000:3b:00.0: verify it is bound to pci-pf-stub",
            "0000:3b:00.0: set sriov_numvfs to 16",
            "0000:3b:00.0: unbind from pci-pf-stub",
            "0000:3b:00.0: clear driver_override",
            "0000:3b:00.0: probe drivers",
            "0000:3b:00.0: verify it is bound to nvidia",
            "0000:86:00.0: acquire the nvidia unbindLock",
        });
  CHECK(steps[22] == "0000:3b:00.4: probe drivers");  // after both PFs are back on nvidia
  CHECK(steps[23] == "0000:3b:00.4: verify it is bound to a driver of module nvidia");
  CHECK(steps.back() == "0000:86:00.5: create vGPU A10-12Q (mdev " + p.vgpus[3].uuid + ")");
  CHECK(r.kernel.writeCount() == 0);

  REQUIRE(applyPlan(r.k, p, r.opt));
  CHECK(r.read("sys/bus/pci/devices/0000:3b:00.0/sriov_numvfs") == "16");
  CHECK(r.driver("0000:3b:00.0") == std::optional<std::string>("nvidia"));
  CHECK_FALSE(readPciFunction(r.kernel, *parseBdf("0000:3b:00.0"))->driverOverride);
  CHECK(r.driver("0000:86:02.3") == std::optional<std::string>("nvidia"));  // VF 15, autoprobed
  CHECK(r.driver("0000:3b:00.1") == std::optional<std::string>("snd_hda_intel"));
  auto devs = r.vgpus();
  REQUIRE(devs.size() == 4);
  CHECK(devs[0].parent.str() == "0000:3b:00.4");
  CHECK(devs[0].typeName == "NVIDIA A10-12Q");
  CHECK(devs[0].uuid == p.vgpus[0].uuid);
  CHECK(devs[0].group.has_value());
  // A third A10-12Q on the card has no room: every other VF shows 0 instances of it.
  CHECK(
      r.read(
          "sys/bus/pci/devices/0000:3b:00.6/mdev_supported_types/nvidia-594/available_instances") ==
      "0");
  CHECK(r.plan(Mode::kVmVgpu).noop());

  SECTION("A10-4Q gives 6 per card, 12 on the node") {
    Plan q = r.plan(Mode::kVmVgpu, "A10-4Q");
    CHECK(q.sriov.empty());  // VFs are already on: no reset
    REQUIRE(applyPlan(r.k, q, r.opt));
    auto now = r.vgpus();
    CHECK(now.size() == 12);
    for (const auto& d : now) CHECK(d.typeName == "NVIDIA A10-4Q");
    CHECK(expectedAdvertised(q) == advertised({{"nvidia.com/NVIDIA_A10-4Q", 12}}));
    CHECK(r.plan(Mode::kVmVgpu, "A10-4Q").noop());
  }
  SECTION("vm-vgpu -> container removes the devices, then the VFs, then nothing else moves") {
    Plan c = r.plan(Mode::kContainer);
    auto cs = describe(c);
    REQUIRE(cs.size() > 4);
    for (size_t i = 0; i < 4; ++i) CHECK_THAT(cs[i], Catch::Contains("remove vGPU"));
    CHECK(cs[4] == "0000:3b:00.0: acquire the nvidia unbindLock");
    CHECK(cs[9] == "0000:3b:00.0: set sriov_numvfs to 0");
  }
}

TEST_CASE("leaving vm-vgpu for container puts the A10 host back exactly as it was", "[vgpu]") {
  VRig r("vgpu-two-a10");
  auto before = r.fx.deviceState();
  r.apply(Mode::kVmVgpu);
  Plan c = r.plan(Mode::kContainer);
  auto cs = describe(c);
  REQUIRE(cs.size() >= 6);
  CHECK_THAT(cs[0], Catch::StartsWith("0000:3b:00.4: remove vGPU "));  // on the VF
  REQUIRE(applyPlan(r.k, c, r.opt));
  CHECK(diff(before, r.fx.deviceState()) == "");
  CHECK(r.plan(Mode::kContainer).noop());
}

TEST_CASE("H100 on the per-VF interface: current_vgpu_type on each VF", "[vgpu]") {
  VRig r("vgpu-h100-pervf");
  auto before = r.fx.deviceState();
  Plan p = r.plan(Mode::kVmVgpu);  // default H100-40C x 2
  REQUIRE(p.vgpus.size() == 2);
  REQUIRE(applyPlan(r.k, p, r.opt));
  CHECK(r.read("sys/bus/pci/devices/0000:41:00.4/nvidia/current_vgpu_type") == "1019");
  CHECK(r.read("sys/bus/pci/devices/0000:41:00.5/nvidia/current_vgpu_type") == "1019");
  CHECK(r.read("sys/bus/pci/devices/0000:41:00.6/nvidia/current_vgpu_type") == "0");
  // The card is full of H100-40C: the next VF can create nothing.
  CHECK(r.read("sys/bus/pci/devices/0000:41:00.6/nvidia/creatable_vgpu_types") ==
        "ID    : vGPU Name");
  auto devs = r.vgpus();
  REQUIRE(devs.size() == 2);
  CHECK(devs[0].iface == VgpuInterface::kPerVf);
  CHECK(devs[0].typeName == "NVIDIA H100-40C");
  Plan again = r.plan(Mode::kVmVgpu);
  CHECK(again.noop());
  REQUIRE(again.vgpus.size() == 2);
  CHECK(again.vgpus[0].iface == VgpuInterface::kPerVf);
  CHECK(expectedAdvertised(again) == advertised({{"nvidia.com/NVIDIA_H100-40C", 2}}));

  SECTION("another profile clears the VFs' types first") {
    Plan q = r.plan(Mode::kVmVgpu, "h100-20c");
    auto qs = describe(q);
    CHECK(qs[0] == "0000:41:00.4: remove vGPU type 1019 (current_vgpu_type)");
    REQUIRE(applyPlan(r.k, q, r.opt));
    CHECK(r.vgpus().size() == 4);
    CHECK(r.read("sys/bus/pci/devices/0000:41:00.7/nvidia/current_vgpu_type") == "1018");
  }
  SECTION("and back to container") {
    REQUIRE(applyPlan(r.k, r.plan(Mode::kContainer), r.opt));
    CHECK(diff(before, r.fx.deviceState()) == "");
  }
}

TEST_CASE(
    "per-VF vGPUs on a GPU with only some of its VFs enabled: the VFs are re-created and "
    "the vGPUs made per VF, as the enabled VFs show, not as mdev devices",
    "[vgpu]") {
  VRig r("vgpu-h100-pervf");
  // 8 of the 16 VFs on, by hand as sriov-manage does: the PF parked on pci-pf-stub for the write.
  REQUIRE(r.kernel.loadModule("pci_pf_stub"));
  const std::string pf = "sys/bus/pci/devices/0000:41:00.0/";
  REQUIRE(r.kernel.writeAttr(pf + "driver_override", "pci-pf-stub"));
  REQUIRE(r.kernel.writeAttr("sys/bus/pci/drivers/nvidia/unbind", "0000:41:00.0"));
  REQUIRE(r.kernel.writeAttr("sys/bus/pci/drivers_probe", "0000:41:00.0"));
  REQUIRE(r.kernel.writeAttr(pf + "sriov_numvfs", "8"));
  REQUIRE(r.kernel.writeAttr("sys/bus/pci/drivers/pci-pf-stub/unbind", "0000:41:00.0"));
  REQUIRE(r.kernel.writeAttr(pf + "driver_override", "\n"));
  REQUIRE(r.kernel.writeAttr("sys/bus/pci/drivers_probe", "0000:41:00.0"));
  REQUIRE(r.read("sys/bus/pci/devices/0000:41:00.4/nvidia/creatable_vgpu_types") != "<absent>");
  REQUIRE_FALSE(r.kernel.exists("sys/bus/pci/devices/0000:41:00.4/mdev_supported_types"));

  Plan p = r.plan(Mode::kVmVgpu);  // default H100-40C x 2
  REQUIRE(p.vgpus.size() == 2);
  CHECK(p.vgpus[0].iface == VgpuInterface::kPerVf);
  CHECK(p.vgpus[0].uuid.empty());
  auto steps = describe(p);
  CHECK(std::count(steps.begin(), steps.end(), "0000:41:00.4: create vGPU H100-40C") == 1);
  for (const auto& st : steps) CHECK(st.find("(mdev ") == std::string::npos);
  REQUIRE(applyPlan(r.k, p, r.opt));
  CHECK(r.read(pf + "sriov_numvfs") == "16");
  CHECK(r.read("sys/bus/pci/devices/0000:41:00.4/nvidia/current_vgpu_type") == "1019");
  CHECK(r.read("sys/bus/pci/devices/0000:41:00.5/nvidia/current_vgpu_type") == "1019");
  CHECK(r.plan(Mode::kVmVgpu).noop());
}

TEST_CASE("a non-NVIDIA mdev parent selected with --gpu-ids, types named by directory", "[vgpu]") {
  VRig r("vgpu-mtty");
  r.so.gpuIds = {PciId{0x1234, 0x11e8}};
  r.hostDriver = "standin";
  auto none = r.tryPlan(Mode::kVmVgpu);
  REQUIRE_FALSE(none);
  CHECK_THAT(none.error().describe(),
             Catch::Contains("no embedded default vGPU config for this model (pass --vgpu-config"));
  auto amb = r.tryPlan(Mode::kVmVgpu, "serial");
  REQUIRE_FALSE(amb);
  CHECK_THAT(amb.error().describe(), Catch::Contains("vGPU type serial is ambiguous"));
  Plan p = r.plan(Mode::kVmVgpu, "mtty");
  REQUIRE(p.vgpus.size() == 2);
  CHECK(p.vgpus[0].typeName == "Dual port serial");
  CHECK(expectedAdvertised(p) == advertised({{"nvidia.com/Dual_port_serial", 2}}));
  REQUIRE(applyPlan(r.k, p, r.opt));
  CHECK(
      r.read("sys/bus/pci/devices/0000:00:05.0/mdev_supported_types/mtty-2/available_instances") ==
      "10");
  CHECK(r.vgpus().size() == 2);
  CHECK(r.plan(Mode::kVmVgpu, "mtty").noop());
}

TEST_CASE("a vGPU device in use blocks leaving vm-vgpu", "[vgpu]") {
  VRig r("vgpu-two-t4");
  r.apply(Mode::kVmVgpu);
  auto devs = r.vgpus();
  REQUIRE(devs[0].group);
  const std::string node = "/dev/vfio/" + std::to_string(*devs[0].group);
  r.fx.write("proc/777/comm", "qemu-system-x86\n");
  r.fx.symlink("proc/777/fd/9", node);
  auto holders = planHolders(r.kernel, r.plan(Mode::kVmPassthrough), r.opt);
  REQUIRE(holders.size() == 1);
  CHECK(holders[0].describe() == "pid 777 (qemu-system-x86) holds " + node);
}

TEST_CASE("sriov_drivers_autoprobe off: VFs stay driverless except those that carry vGPUs",
          "[vgpu]") {
  VRig r("vgpu-two-a10");
  r.fx.write("sys/devices/pci0000:3b/0000:3b:00.0/sriov_drivers_autoprobe", "0\n");
  Plan p = r.plan(Mode::kVmVgpu);
  auto steps = describe(p);
  CHECK(std::find(steps.begin(), steps.end(), "0000:3b:00.4: set driver_override to nvidia") !=
        steps.end());
  // The fake kernel's autoprobe honours the flag too.
  REQUIRE(applyPlan(r.k, p, r.opt));
  CHECK(r.driver("0000:3b:00.4") == std::optional<std::string>("nvidia"));
  CHECK_FALSE(r.driver("0000:3b:00.6"));
  CHECK(r.driver("0000:86:00.6") == std::optional<std::string>("nvidia"));
  CHECK(r.vgpus().size() == 4);
}

TEST_CASE("an unbindLock the driver refuses stops the run and puts everything back", "[vgpu]") {
  VRig r("vgpu-two-a10");
  auto before = r.fx.deviceState();
  r.fx.write("fake/unbindlock/0000:86:00.0", "refuse\n");
  auto res = applyPlan(r.k, r.plan(Mode::kVmVgpu), r.opt);
  REQUIRE_FALSE(res);
  CHECK(res.error().describe() ==
        "0000:86:00.0: acquire the nvidia unbindLock: the nvidia driver did not grant "
        "/proc/driver/nvidia/gpus/0000:86:00.0/unbindLock: Device or resource busy (a process uses "
        "the GPU (nvidia-smi, nvidia-persistenced, a VM); stop it and run again; every device was "
        "put back on its original driver)");
  CHECK(diff(before, r.fx.deviceState()) == "");
}

TEST_CASE("a failure injected at every write of a vGPU plan leaves the host exactly as it was",
          "[vgpu][faults]") {
  struct Case {
    const char* scenario;
    Mode from;  // applied first (kContainer: nothing)
    Mode to;
    const char* config;
  };
  for (const Case& c : {Case{"vgpu-two-t4", Mode::kContainer, Mode::kVmVgpu, ""},
                        Case{"vgpu-two-a10", Mode::kContainer, Mode::kVmVgpu, ""},
                        Case{"vgpu-h100-pervf", Mode::kContainer, Mode::kVmVgpu, ""},
                        Case{"vgpu-two-a10", Mode::kVmVgpu, Mode::kContainer, ""},
                        Case{"vgpu-two-a10", Mode::kVmVgpu, Mode::kVmVgpu, "A10-4Q"},
                        Case{"vgpu-h100-pervf", Mode::kVmVgpu, Mode::kVmPassthrough, ""}}) {
    size_t first = 0, total = 0;
    {
      VRig probe(c.scenario);
      if (c.from == Mode::kVmVgpu) probe.apply(Mode::kVmVgpu);
      first = probe.kernel.writeCount();
      probe.apply(c.to, c.config);
      total = probe.kernel.writeCount() - first;
    }
    REQUIRE(total > 2);
    for (size_t k = 0; k < total; ++k) {
      INFO(c.scenario << " -> " << toString(c.to) << " " << c.config << ": write " << k << " of "
                      << total);
      VRig r(c.scenario);
      if (c.from == Mode::kVmVgpu) r.apply(Mode::kVmVgpu);
      auto before = r.fx.deviceState();
      Plan p = r.plan(c.to, c.config);
      r.kernel.failWrite(r.kernel.writeCount() + k, EIO);
      auto res = applyPlan(r.k, p, r.opt);
      REQUIRE_FALSE(res);
      CHECK(res.error().err == EIO);
      CHECK_THAT(res.error().advice, Catch::Contains("every device was put back"));
      CHECK(diff(before, r.fx.deviceState()) == "");
      CHECK_FALSE(r.kernel.exists("run/hostprep/journal.json"));
    }
  }
}

TEST_CASE("a crash after any step of a vGPU plan is resolved by the next run", "[vgpu][crash]") {
  for (auto [scenario, from, to] :
       {std::tuple{"vgpu-two-a10", Mode::kContainer, Mode::kVmVgpu},
        std::tuple{"vgpu-two-a10", Mode::kVmVgpu, Mode::kContainer},
        std::tuple{"vgpu-h100-pervf", Mode::kContainer, Mode::kVmVgpu},
        std::tuple{"vgpu-two-t4", Mode::kVmVgpu, Mode::kVmPassthrough}}) {
    size_t steps = 0;
    {
      VRig probe(scenario);
      if (from == Mode::kVmVgpu) probe.apply(from);
      steps = probe.plan(to).steps.size();
    }
    for (size_t k = 0; k < steps; ++k) {
      INFO(scenario << " -> " << toString(to) << ": crash after step " << k << " of " << steps);
      VRig r(scenario);
      if (from == Mode::kVmVgpu) r.apply(from);
      auto before = r.fx.deviceState();
      r.opt.afterStep = [k](size_t i) { return i != k; };
      REQUIRE_FALSE(applyPlan(r.k, r.plan(to), r.opt));
      REQUIRE(r.kernel.exists("run/hostprep/journal.json"));
      r.opt.afterStep = nullptr;
      auto rec = recoverJournal(r.k, r.opt);
      if (!rec) FAIL(rec.error().describe());
      REQUIRE(*rec);
      CHECK(diff(before, r.fx.deviceState()) == "");
      CHECK_FALSE(r.kernel.exists("run/hostprep/journal.json"));
      r.apply(to);  // and the run after that completes
    }
  }
}

TEST_CASE("each device of a vGPU plan is reported once, after its last step", "[vgpu]") {
  // A device's steps are not contiguous: entering vm-vgpu parks the PF on pci-pf-stub and
  // returns; leaving it disables every PF's VFs before any PF moves. A user sees one line each.
  VRig r("vgpu-two-a10");
  std::map<std::string, int> reports;
  r.opt.onDevice = [&](const DeviceMove& mv, const Status& s) {
    CHECK(s.ok());
    ++reports[mv.bdf.str()];
  };
  auto once = [&] {
    REQUIRE_FALSE(reports.empty());
    for (const auto& [bdf, n] : reports) {
      INFO(bdf);
      CHECK(n == 1);
    }
    CHECK(reports.count("0000:3b:00.0") == 1);
    reports.clear();
  };
  r.apply(Mode::kVmVgpu);
  once();
  r.apply(Mode::kVmPassthrough);
  once();
}

namespace {

// Applies `p` in lanes or one step at a time and returns the steps' descriptions in the order
// they completed. In lanes, the unbind of `slow` is a remove() that lasts until every step that
// starts with one of `others` has completed (at most 10 s): as long as the other lanes need, on
// any machine (under ASan too). One step at a time it is quick, and plan order holds.
std::vector<std::string> completionOrder(VRig& r, const Plan& p, const std::string& slow,
                                         bool parallel, const std::vector<std::string>& others) {
  std::mutex mu;
  std::vector<std::string> order;
  auto isOther = [&](const std::string& d) {
    return std::any_of(others.begin(), others.end(),
                       [&](const std::string& o) { return d.starts_with(o); });
  };
  const auto want = std::count_if(p.steps.begin(), p.steps.end(),
                                  [&](const Step& st) { return isOther(st.describe()); });
  auto othersDone = [&] {
    std::lock_guard<std::mutex> g(mu);
    return std::count_if(order.begin(), order.end(), isOther) == want;
  };
  DelayedHost host(r.kernel, [&](std::string_view path, std::string_view data) {
    if (parallel && path.ends_with("/unbind") && data == slow) {
      for (int i = 0; i < 2000 && !othersDone(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return std::chrono::milliseconds(0);
  });
  Kernel k{host, r.modules};
  r.opt.parallel = parallel;
  r.opt.afterStep = [&](size_t i) {
    std::lock_guard<std::mutex> g(mu);
    order.push_back(p.steps[i].describe());
    return true;
  };
  auto res = applyPlan(k, p, r.opt);
  r.opt.afterStep = nullptr;
  if (!res) FAIL(res.error().describe());
  REQUIRE(order.size() == p.steps.size());
  return order;
}

// Where in `order` the first (last) step that starts with `prefix` is; order.size() if none.
long firstOf(const std::vector<std::string>& order, std::string_view prefix) {
  return std::find_if(order.begin(), order.end(),
                      [&](const std::string& d) { return d.starts_with(prefix); }) -
         order.begin();
}
long lastOf(const std::vector<std::string>& order, std::string_view prefix) {
  auto it = std::find_if(order.rbegin(), order.rend(),
                         [&](const std::string& d) { return d.starts_with(prefix); });
  return it == order.rend() ? static_cast<long>(order.size()) : order.rend() - 1 - it;
}

}  // namespace

TEST_CASE("the GPUs of a vGPU plan move in lanes of their own, each with its VFs and vGPUs",
          "[vgpu]") {
  // 0000:3b:00.0's remove() (off nvidia, and off pci-pf-stub) lasts until the other A10 is done:
  // in lanes that happens, VFs and vGPU devices included; one step at a time, the plan's order
  // holds (every step of 3b's PF before the first of 86's). The end state is the same.
  for (bool parallel : {true, false}) {
    for (auto [from, to] :
         {std::pair{Mode::kContainer, Mode::kVmVgpu}, std::pair{Mode::kVmVgpu, Mode::kContainer}}) {
      INFO((parallel ? "lanes, " : "serial, ") << toString(from) << " -> " << toString(to));
      VRig r("vgpu-two-a10");
      if (from == Mode::kVmVgpu) r.apply(from);
      Plan p = r.plan(to);
      CHECK(p.vfGpu.at(*parseBdf("0000:86:00.5")) == *parseBdf("0000:86:00.0"));
      const auto order = completionOrder(r, p, "0000:3b:00.0", parallel, {"0000:86:"});
      if (parallel) {
        CHECK(lastOf(order, "0000:86:") < lastOf(order, "0000:3b:00.0"));
      } else {
        CHECK(lastOf(order, "0000:3b:00.0") < firstOf(order, "0000:86:00.0"));
      }
      CHECK(r.vgpus().size() == (to == Mode::kVmVgpu ? 4 : 0));
      CHECK(r.plan(to).noop());
    }
  }
}

TEST_CASE("a mixed plan runs its vGPU GPU and its passthrough GPU in lanes of their own",
          "[vgpu]") {
  // 0000:3b:00.0 to vm-vgpu, 0000:86:00.0 and its audio function to vm-passthrough, whose GPU's
  // remove() lasts until the others are done: in lanes the vGPU GPU gets its VFs and vGPU
  // devices, and the audio function is on vfio-pci, before that remove() is over. The end state
  // is the same one step at a time.
  for (bool parallel : {true, false}) {
    INFO((parallel ? "lanes" : "serial"));
    VRig r("vgpu-two-a10");
    for (const char* b : {"0000:3b:00.0", "0000:3b:00.1"}) r.modes[*parseBdf(b)] = Mode::kVmVgpu;
    for (const char* b : {"0000:86:00.0", "0000:86:00.1"})
      r.modes[*parseBdf(b)] = Mode::kVmPassthrough;
    Plan p = r.plan(Mode::kVmVgpu);
    REQUIRE(p.split() == std::map<Mode, int>{{Mode::kVmPassthrough, 1}, {Mode::kVmVgpu, 1}});
    const auto order =
        completionOrder(r, p, "0000:86:00.0", parallel, {"0000:3b:", "0000:86:00.1"});
    const auto gpuOnVfio = firstOf(order, "0000:86:00.0: verify it is bound to vfio-pci");
    const auto audioOnVfio = firstOf(order, "0000:86:00.1: verify it is bound to vfio-pci");
    // The last step of 0000:3b:00.0's lane: its PF's, its VFs' and its vGPU devices'.
    const auto vgpuGpuDone = lastOf(order, "0000:3b:");
    REQUIRE(static_cast<size_t>(gpuOnVfio) < order.size());
    REQUIRE(static_cast<size_t>(vgpuGpuDone) < order.size());
    CHECK_THAT(order[static_cast<size_t>(vgpuGpuDone)], Catch::Contains("create vGPU"));
    CHECK((audioOnVfio < gpuOnVfio) == parallel);
    CHECK((vgpuGpuDone < gpuOnVfio) == parallel);
    CHECK(r.vgpus().size() == 2);
    CHECK(r.driver("0000:86:00.0") == std::optional<std::string>("vfio-pci"));
    CHECK(r.driver("0000:86:00.1") == std::optional<std::string>("vfio-pci"));
    CHECK(r.kernel.exists("dev/vfio/60"));
    CHECK(r.plan(Mode::kVmVgpu).noop());
  }
}

// A VF that was handed to vfio-pci by hand (a VM's passthrough VF): driver_override names
// vfio-pci, so a probe alone binds it to vfio-pci again.
void vfToVfio(VRig& r, const char* vf) {
  REQUIRE(r.kernel.loadModule("vfio_pci"));
  const std::string dev = std::string("sys/bus/pci/devices/") + vf;
  REQUIRE(r.kernel.writeAttr(dev + "/driver_override", "vfio-pci"));
  if (auto d = r.driver(vf)) {  // none where sriov_drivers_autoprobe is off
    REQUIRE(r.kernel.writeAttr("sys/bus/pci/drivers/" + *d + "/unbind", vf));
  }
  REQUIRE(r.kernel.writeAttr("sys/bus/pci/drivers_probe", vf));
  REQUIRE(r.driver(vf) == std::optional<std::string>("vfio-pci"));
}

// Two A10s in vm-vgpu, then one VF that carries no vGPU handed to vfio-pci by hand.
void vgpuWithVfOnVfio(VRig& r) {
  r.apply(Mode::kVmVgpu);
  vfToVfio(r, "0000:3b:00.6");
}

TEST_CASE("a VF on vfio-pci whose override names vfio-pci is moved to the host driver", "[vgpu]") {
  VRig r("vgpu-two-a10");
  vgpuWithVfOnVfio(r);
  Plan p = r.plan(Mode::kVmVgpu, "A10-4Q");
  auto steps = describe(p);
  CHECK(std::find(steps.begin(), steps.end(), "0000:3b:00.6: set driver_override to nvidia") !=
        steps.end());
  auto res = applyPlan(r.k, p, r.opt);
  if (!res) FAIL(res.error().describe());
  CHECK(r.driver("0000:3b:00.6") == std::optional<std::string>("nvidia"));
  CHECK(r.vgpus().size() == 12);
}

TEST_CASE("a VF moved to the host driver is put back on its driver by a rollback and a recovery",
          "[vgpu][faults][crash]") {
  size_t writes = 0, steps = 0;
  {
    VRig probe("vgpu-two-a10");
    vgpuWithVfOnVfio(probe);
    const size_t first = probe.kernel.writeCount();
    steps = probe.plan(Mode::kVmVgpu, "A10-4Q").steps.size();
    probe.apply(Mode::kVmVgpu, "A10-4Q");
    writes = probe.kernel.writeCount() - first;
  }
  REQUIRE(writes > 2);
  for (size_t k = 0; k < writes; ++k) {
    INFO("failure at write " << k << " of " << writes);
    VRig r("vgpu-two-a10");
    vgpuWithVfOnVfio(r);
    auto before = r.fx.deviceState();
    Plan p = r.plan(Mode::kVmVgpu, "A10-4Q");
    r.kernel.failWrite(r.kernel.writeCount() + k, EIO);
    auto res = applyPlan(r.k, p, r.opt);
    REQUIRE_FALSE(res);
    CHECK_THAT(res.error().advice, Catch::Contains("every device was put back"));
    CHECK(diff(before, r.fx.deviceState()) == "");
  }
  for (size_t k = 0; k < steps; ++k) {
    INFO("crash after step " << k << " of " << steps);
    VRig r("vgpu-two-a10");
    vgpuWithVfOnVfio(r);
    auto before = r.fx.deviceState();
    r.opt.afterStep = [k](size_t i) { return i != k; };
    REQUIRE_FALSE(applyPlan(r.k, r.plan(Mode::kVmVgpu, "A10-4Q"), r.opt));
    r.opt.afterStep = nullptr;
    auto rec = recoverJournal(r.k, r.opt);
    if (!rec) FAIL(rec.error().describe());
    CHECK(diff(before, r.fx.deviceState()) == "");
  }
}

// Leaving vm-vgpu disables the VFs: the kernel removes them, with their drivers and overrides. A
// rollback enables them again, and the kernel then binds each VF as it binds a new device (its
// default driver, or none with sriov_drivers_autoprobe off), not as it was: the rollback must put
// each VF back on the driver and override it had.
TEST_CASE("a rollback that enables VFs again puts each VF back on its driver and override",
          "[vgpu][faults][crash]") {
  struct Case {
    const char* what;
    bool autoprobe;
    Mode to;
  };
  for (const Case& c : {Case{"a VF on vfio-pci, container", true, Mode::kContainer},
                        Case{"autoprobe off, vm-passthrough", false, Mode::kVmPassthrough},
                        Case{"autoprobe off, container", false, Mode::kContainer}}) {
    auto setUp = [&](VRig& r) {
      if (!c.autoprobe) {
        for (const char* pf : {"0000:3b:00.0", "0000:86:00.0"}) {
          r.fx.write(std::string("sys/bus/pci/devices/") + pf + "/sriov_drivers_autoprobe", "0\n");
        }
      }
      vgpuWithVfOnVfio(r);
    };
    size_t writes = 0, steps = 0;
    {
      VRig probe("vgpu-two-a10");
      setUp(probe);
      const size_t first = probe.kernel.writeCount();
      steps = probe.plan(c.to).steps.size();
      probe.apply(c.to);
      writes = probe.kernel.writeCount() - first;
    }
    REQUIRE(writes > 2);
    // The case from its start state, broken and resolved by `run`: everything as it was.
    auto restored = [&](const std::function<void(VRig&)>& run) {
      VRig r("vgpu-two-a10");
      setUp(r);
      auto before = r.fx.deviceState();
      const size_t vgpusBefore = r.vgpus().size();
      run(r);
      CHECK(diff(before, r.fx.deviceState()) == "");
      CHECK(r.vgpus().size() == vgpusBefore);
    };
    for (size_t k = 0; k < writes; ++k) {
      INFO(c.what << ": failure at write " << k << " of " << writes);
      restored([&](VRig& r) {
        Plan p = r.plan(c.to);
        r.kernel.failWrite(r.kernel.writeCount() + k, EIO);
        auto res = applyPlan(r.k, p, r.opt);
        REQUIRE_FALSE(res);
        CHECK_THAT(res.error().advice, Catch::Contains("every device was put back"));
      });
    }
    for (size_t k = 0; k < steps; ++k) {
      INFO(c.what << ": crash after step " << k << " of " << steps);
      restored([&](VRig& r) {
        r.opt.afterStep = [k](size_t i) { return i != k; };
        REQUIRE_FALSE(applyPlan(r.k, r.plan(c.to), r.opt));
        r.opt.afterStep = nullptr;
        auto rec = recoverJournal(r.k, r.opt);
        if (!rec) FAIL(rec.error().describe());
      });
    }
  }
}

TEST_CASE("a VM holding a VF on vfio-pci blocks the plan that moves the VF", "[vgpu]") {
  VRig r("vgpu-two-a10");
  vgpuWithVfOnVfio(r);
  auto f = readPciFunction(r.kernel, *parseBdf("0000:3b:00.6"));
  REQUIRE(f);
  REQUIRE(f->iommuGroup);
  const std::string node = "/dev/vfio/" + std::to_string(*f->iommuGroup);
  r.fx.write("proc/778/comm", "qemu-system-x86\n");
  r.fx.symlink("proc/778/fd/9", node);
  auto holders = planHolders(r.kernel, r.plan(Mode::kVmVgpu, "A10-4Q"), r.opt);
  REQUIRE(holders.size() == 1);
  CHECK(holders[0].describe() == "pid 778 (qemu-system-x86) holds " + node);
}

namespace {

// The journal a failed run left behind, and what it says is still pending.
struct LeftJournal {
  Journal j;
  bool numVfsPending(const Bdf& pf) const {
    return std::any_of(j.sriov.begin(), j.sriov.end(),
                       [&](const JournalSriov& sv) { return sv.pf == pf && sv.pendingWrite; });
  }
  bool probePending(const Bdf& b) const {
    return std::any_of(j.devices.begin(), j.devices.end(),
                       [&](const JournalDevice& d) { return d.bdf == b && d.pendingProbe; });
  }
};
LeftJournal leftJournal(const Host& h) {
  auto jr = readJournal(h);
  REQUIRE(jr);
  REQUIRE(*jr);
  return {**jr};
}

// The stuck write returns (the holder lets go of `b`): the next run resolves the journal, and the
// host is as it was before the run.
template <class AnyRig>
void releaseAndRecover(AnyRig& r, const Bdf& b, const std::map<std::string, std::string>& before) {
  r.kernel.releaseDevice(b);
  auto rec = recoverJournal(r.k, r.opt);
  if (!rec) FAIL(rec.error().describe());
  CHECK(diff(before, r.fx.deviceState()) == "");
  CHECK(r.kernel.blockedAccesses().empty());
}

}  // namespace

TEST_CASE("a VF whose probe does not return while the rollback puts it back is journalled",
          "[vgpu]") {
  // Leaving vm-vgpu with sriov_drivers_autoprobe off, a VF on vfio-pci: 0000:86:00.0's unbindLock
  // fails after 0000:3b:00.0's VFs went, and the rollback's bind of the re-created VF to
  // vfio-pci hangs in probe(): the VF must join the journal's devices as pending.
  VRig r("vgpu-two-a10");
  for (const char* pf : {"0000:3b:00.0", "0000:86:00.0"})
    r.fx.write(std::string("sys/bus/pci/devices/") + pf + "/sriov_drivers_autoprobe", "0\n");
  vgpuWithVfOnVfio(r);
  auto before = r.fx.deviceState();
  r.opt.parallel = false;  // plan order: 0000:3b:00.0's VFs are gone before 86's unbindLock fails
  const Bdf vf = *parseBdf("0000:3b:00.6");
  r.kernel.stallProbe(vf);
  r.kernel.failWritesTo("0000:86:00.0/unbindLock", EIO);
  auto res = applyPlan(r.k, r.plan(Mode::kContainer), r.opt);
  REQUIRE_FALSE(res);
  CHECK_THAT(res.error().describe(),
             Catch::Contains("ROLLBACK FAILED: 0000:3b:00.6: cannot restore it to vfio-pci: bind"));
  CHECK(leftJournal(r.kernel).probePending(vf));
  CHECK(r.kernel.blockedAccesses().empty());
  auto held = recoverJournal(r.k, r.opt);  // refused while the probe runs
  REQUIRE_FALSE(held);
  CHECK_THAT(held.error().describe(), Catch::Contains("0000:3b:00.6: left as it is"));
  CHECK(r.kernel.blockedAccesses().empty());
  releaseAndRecover(r, vf, before);
}

TEST_CASE(
    "an sriov_numvfs write that never returns is reported and journalled, and the PF read around",
    "[vgpu]") {
  // A VM holds a VF on vfio-pci; leaving vm-vgpu disables the VFs, and the kernel's removal of
  // that VF waits in vfio-pci's remove() with the PF's device lock taken (sriov_numvfs_store).
  VRig r("vgpu-two-a10");
  vgpuWithVfOnVfio(r);
  const Bdf pf = *parseBdf("0000:3b:00.0"), vf = *parseBdf("0000:3b:00.6");
  r.kernel.holdDevice(vf);
  auto res = applyPlan(r.k, r.plan(Mode::kContainer), r.opt);
  REQUIRE_FALSE(res);
  CHECK(res.error().err == ETIMEDOUT);
  CHECK_THAT(res.error().describe(), Catch::Contains("0000:3b:00.0: set sriov_numvfs to 0"));
  CHECK_THAT(res.error().describe(), Catch::Contains("holds a VF"));
  CHECK_THAT(res.error().describe(),
             Catch::Contains("ROLLBACK FAILED: 0000:3b:00.0: left as it is: its sriov_numvfs "
                             "write is still pending"));
  // The other GPU is back as it was.
  CHECK(r.read("sys/bus/pci/devices/0000:86:00.0/sriov_numvfs") == "16");
  CHECK(r.driver("0000:86:00.0") == std::optional<std::string>("nvidia"));
  CHECK(leftJournal(r.kernel).numVfsPending(pf));
  CHECK(r.kernel.blockedAccesses().empty());

  SECTION("while the holder stays, the next run refuses to touch it") {
    auto rec = recoverJournal(r.k, r.opt);
    REQUIRE_FALSE(rec);
    CHECK_THAT(rec.error().describe(), Catch::Contains("sriov_numvfs write is still pending"));
    CHECK(r.kernel.exists("run/hostprep/journal.json"));
    CHECK(r.kernel.blockedAccesses().empty());
  }
  SECTION("while the holder stays, a snapshot and a status read around the locked PF") {
    auto s = readSnapshot(r.kernel);
    REQUIRE(s);
    REQUIRE(s->find(pf));
    CHECK(s->find(pf)->unbindPending);
    CHECK_FALSE(s->find(pf)->sriovNumVfs);
    CHECK_FALSE(s->find(*parseBdf("0000:86:00.0"))->unbindPending);
    // The VF whose remove() waits is linked to the PF no more (pci_iov_remove_virtfn() removed
    // its links first), yet it is read around too: a VF slot of the PF.
    CHECK_FALSE(readLinkName(r.kernel, "sys/bus/pci/devices/0000:3b:00.6/physfn"));
    REQUIRE(s->find(vf));
    CHECK(s->find(vf)->unbindPending);
    auto scoped = readSnapshot(r.kernel, [](const PciFunction&) { return true; });
    REQUIRE(scoped);
    CHECK(readVgpuHost(r.kernel, *scoped).devices.size() == 2);  // the other A10's
    CHECK(r.kernel.blockedAccesses().empty());
  }
  SECTION("once the holder goes, the next run puts the VFs and vGPUs back") {
    r.kernel.releaseDevice(vf);  // remove() returns; the write disables the rest of the VFs
    CHECK(r.read("sys/bus/pci/devices/0000:3b:00.0/sriov_numvfs") == "0");
    auto rec = recoverJournal(r.k, r.opt);
    if (!rec) FAIL(rec.error().describe());
    CHECK(r.read("sys/bus/pci/devices/0000:3b:00.0/sriov_numvfs") == "16");
    CHECK(r.driver("0000:3b:00.0") == std::optional<std::string>("nvidia"));
    CHECK(r.vgpus().size() == 4);
    CHECK_FALSE(r.kernel.exists("run/hostprep/journal.json"));
    CHECK(r.kernel.blockedAccesses().empty());
  }
}

TEST_CASE("an sriov_numvfs write of the rollback that never returns is journalled as pending",
          "[vgpu]") {
  // The run enables the VFs, a VM takes one, and a vGPU creation fails: the rollback's disable
  // waits in that VF's remove().
  VRig r("vgpu-two-a10");
  auto before = r.fx.deviceState();
  const Bdf pf = *parseBdf("0000:3b:00.0"), vf = *parseBdf("0000:3b:00.6");
  r.opt.parallel = false;  // plan order: every PF's VFs are on before the first creation fails
  r.kernel.holdDevice(vf);
  r.kernel.failWritesTo("/create", EIO);
  auto res = applyPlan(r.k, r.plan(Mode::kVmVgpu), r.opt);
  REQUIRE_FALSE(res);
  CHECK_THAT(res.error().describe(),
             Catch::Contains("ROLLBACK FAILED: 0000:3b:00.0: cannot put sriov_numvfs back to 0"));
  CHECK(r.read("sys/bus/pci/devices/0000:86:00.0/sriov_numvfs") == "0");  // the other is back
  CHECK(r.driver("0000:86:00.0") == std::optional<std::string>("nvidia"));
  CHECK(leftJournal(r.kernel).numVfsPending(pf));
  CHECK(r.kernel.blockedAccesses().empty());

  releaseAndRecover(r, vf, before);
}

TEST_CASE("an sriov_numvfs write whose VF probe never returns is journalled, the PF read around",
          "[vgpu]") {
  // Entering vm-vgpu enables the VFs; the kernel adds and probes them one by one inside the
  // sriov_numvfs write, with the PF's device lock taken (sriov_add_vfs()). The host driver's
  // probe() of the first VF does not return: the write does not either.
  VRig r("vgpu-two-a10");
  auto before = r.fx.deviceState();
  const Bdf pf = *parseBdf("0000:3b:00.0"), vf = *parseBdf("0000:3b:00.4");
  r.kernel.stallProbe(vf);
  auto res = applyPlan(r.k, r.plan(Mode::kVmVgpu), r.opt);
  REQUIRE_FALSE(res);
  CHECK(res.error().err == ETIMEDOUT);
  CHECK_THAT(res.error().describe(), Catch::Contains("0000:3b:00.0: set sriov_numvfs to 16"));
  CHECK_THAT(res.error().describe(),
             Catch::Contains("ROLLBACK FAILED: 0000:3b:00.0: left as it is: its sriov_numvfs "
                             "write is still pending"));
  CHECK(r.read("sys/bus/pci/devices/0000:86:00.0/sriov_numvfs") == "0");  // the other is back
  CHECK(r.driver("0000:86:00.0") == std::optional<std::string>("nvidia"));
  CHECK(leftJournal(r.kernel).numVfsPending(pf));
  CHECK(r.kernel.blockedAccesses().empty());

  auto held = recoverJournal(r.k, r.opt);  // refused while the probe runs
  REQUIRE_FALSE(held);
  CHECK_THAT(held.error().describe(), Catch::Contains("probe() is blocked"));
  auto s = readSnapshot(r.kernel);  // what status reads: around the PF and its VF slots
  REQUIRE(s);
  REQUIRE(s->find(pf));
  CHECK(s->find(pf)->unbindPending);
  CHECK_FALSE(s->find(pf)->sriovNumVfs);
  CHECK(r.kernel.blockedAccesses().empty());
  // The probe returns, the write adds the other VFs, and the next run disables them again.
  releaseAndRecover(r, vf, before);
  CHECK(r.vgpus().empty());
  CHECK_FALSE(r.kernel.exists("run/hostprep/journal.json"));
}

TEST_CASE("a probe that never returns is reported and journalled, and the device read around",
          "[switcher]") {
  // Back to the host driver, whose probe() hangs (a GPU that does not come up): the drivers_probe
  // write does not return, and the probe holds the device lock.
  Rig r("two-a10");
  r.opt.parallel = false;
  REQUIRE(applyPlan(r.k, r.plan(Mode::kVmPassthrough), r.opt));
  auto before = r.fx.deviceState();
  const Bdf gpu = *parseBdf("0000:3b:00.0");
  r.kernel.stallProbe(gpu);
  auto res = applyPlan(r.k, r.plan(Mode::kContainer), r.opt);
  REQUIRE_FALSE(res);
  CHECK(res.error().err == ETIMEDOUT);
  CHECK_THAT(res.error().describe(), Catch::Contains("0000:3b:00.0: probe drivers"));
  CHECK_THAT(res.error().describe(), Catch::Contains("probe() of it has not returned"));
  CHECK_THAT(res.error().describe(),
             Catch::Contains("ROLLBACK FAILED: 0000:3b:00.0: left as it is: a driver's probe() of "
                             "it is still running"));
  CHECK(leftJournal(r.kernel).probePending(gpu));
  CHECK(r.kernel.blockedAccesses().empty());

  SECTION("while it runs, the next run refuses to touch it and a snapshot reads around it") {
    auto rec = recoverJournal(r.k, r.opt);
    REQUIRE_FALSE(rec);
    CHECK_THAT(rec.error().describe(), Catch::Contains("probe() of it is still running"));
    auto s = readSnapshot(r.kernel);
    REQUIRE(s);
    REQUIRE(s->find(gpu));
    CHECK(s->find(gpu)->unbindPending);
    CHECK(r.kernel.blockedAccesses().empty());
  }
  SECTION("once it returns, the next run restores everything") {
    r.kernel.releaseDevice(gpu);
    auto rec = recoverJournal(r.k, r.opt);
    if (!rec) FAIL(rec.error().describe());
    CHECK(r.fx.deviceState() == before);
    CHECK_FALSE(r.kernel.exists("run/hostprep/journal.json"));
    CHECK(r.kernel.blockedAccesses().empty());
  }
}

TEST_CASE("a bind of the rollback that never returns is journalled as pending", "[switcher]") {
  // To vm-passthrough; a companion's move fails, and the rollback's bind of the GPU back to its
  // driver hangs in probe().
  Rig r("two-a10");
  r.opt.parallel = false;  // GPUs first, then companions
  auto before = r.fx.deviceState();
  const Bdf gpu = *parseBdf("0000:3b:00.0");
  r.kernel.failWritesTo("0000:86:00.1", EIO);
  bool armed = false;
  r.opt.afterStep = [&](size_t) {  // once the GPU is on vfio-pci, its next probe hangs
    if (!armed && r.driver("0000:3b:00.0") == std::optional<std::string>("vfio-pci")) {
      r.kernel.stallProbe(gpu);
      armed = true;
    }
    return true;
  };
  auto res = applyPlan(r.k, r.plan(Mode::kVmPassthrough), r.opt);
  REQUIRE_FALSE(res);
  REQUIRE(armed);
  CHECK_THAT(res.error().describe(),
             Catch::Contains("ROLLBACK FAILED: 0000:3b:00.0: cannot restore it to nvidia: bind"));
  CHECK(leftJournal(r.kernel).probePending(gpu));
  CHECK(r.kernel.blockedAccesses().empty());
  releaseAndRecover(r, gpu, before);
}

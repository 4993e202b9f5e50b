// hostprep recover's ladder (drivers/switch/recover.hpp) on the fake kernel, rung by rung, and the
// command's refusals and dry run on fixture roots.
#include "drivers/switch/recover.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "agent/converge.hpp"
#include "tests/drivers/switch_rig.hpp"
#include "tests/support/run.hpp"

using namespace hostprep;
using namespace hostprep::test::rig;

namespace {

// A GPU and its audio function on bus 3b behind root port 00:01.0, both silent after a VM; a
// NIC joins them on the bus when `nic` is set. `gpu` and `audio` are the rest of each line
// (reset_methods, recovers_by).
std::string host(const std::string& gpu, const std::string& audio, bool nic = false) {
  std::string y = R"(
kernel: 6.1.0-test-amd64
cmdline: intel_iommu=on
modules: [snd_hda_intel, ixgbe, vfio, vfio_pci]
available_modules: [nvidia]
devices:
  - {bdf: "0000:00:01.0", id: "8086:2030", class: "060400", group: 1, secondary_bus: 59, reset_subordinate: true}
  - {bdf: "0000:3b:00.0", id: "10de:2236", class: "030200", group: 30, responsive: false, power_state: D3cold)" +
                  gpu + R"(}
  - {bdf: "0000:3b:00.1", id: "10de:1aef", class: "040300", group: 30, responsive: false)" +
                  audio + "}\n";
  if (nic)
    y += R"(  - {bdf: "0000:3b:01.0", id: "8086:10fb", class: "020000", driver: ixgbe, group: 31})"
         "\n";
  return y;
}

struct Run {
  Rig r;
  RecoverUnit unit;
  explicit Run(const std::string& yaml) : r(test::Fixture::HostYaml{yaml}) {
    auto s = readSnapshot(r.kernel);
    REQUIRE(s);
    auto u = recoverUnit(*s, {*parseBdf("0000:3b:00.0")});
    REQUIRE(u);
    unit = *u;
  }
  RecoverOutcome climb(bool probeGpus = false) {
    auto o = climbRecoverLadder(r.k, unit, r.opt, probeGpus);
    REQUIRE(o);
    return *o;
  }
  bool answers(const char* b) { return readResponsive(r.kernel, *parseBdf(b)) == true; }
  bool wrote(const std::string& needle) {
    for (const auto& w : r.kernel.writes())
      if (w.find(needle) != std::string::npos) return true;
    return false;
  }
};

}  // namespace

TEST_CASE("recover: the unit is the GPU's slot, and the ladder says what it would try",
          "[recover]") {
  Run run(host(", reset_methods: flr", "", true));
  CHECK(run.unit.functions ==
        std::vector<Bdf>{*parseBdf("0000:3b:00.0"), *parseBdf("0000:3b:00.1")});
  CHECK(run.unit.othersOnBus == std::vector<Bdf>{*parseBdf("0000:3b:01.0")});
  CHECK(run.unit.bridge == parseBdf("0000:00:01.0"));
  auto s = readSnapshot(run.r.kernel);
  auto ladder = recoverLadder(*s, run.unit);
  REQUIRE(ladder.size() == 3);
  CHECK(ladder[0] == "reset 0000:3b:00.0 (flr)");
  CHECK(ladder[1] == "no bus reset: bus 0000:3b also carries 0000:3b:01.0");
  CHECK_THAT(ladder[2], Catch::StartsWith("remove 0000:3b:00.0, 0000:3b:00.1 and rescan bus"));
}

TEST_CASE("recover: each rung, tried only when the one before did not do it", "[recover]") {
  SECTION("a function reset") {
    Run run(host(", reset_methods: flr, recovers_by: function",
                 ", reset_methods: flr, recovers_by: function"));
    auto o = run.climb();
    CHECK(o.answers);
    CHECK(o.by == "a function reset");
    CHECK(run.answers("0000:3b:00.0"));
    CHECK_FALSE(run.wrote("reset_subordinate"));
    CHECK_FALSE(run.wrote("/remove"));
  }
  SECTION("a bus reset, when the bus is the GPU's alone") {
    Run run(host(", recovers_by: bus", ", recovers_by: bus"));
    auto o = run.climb();
    CHECK(o.answers);
    CHECK(o.by == "a bus reset through 0000:00:01.0");
    CHECK_FALSE(run.wrote("/remove"));
  }
  SECTION("never a bus reset with a NIC on the bus: remove and rescan instead") {
    Run run(host(", recovers_by: bus", ", recovers_by: bus", true));
    auto o = run.climb();
    CHECK_FALSE(run.wrote("reset_subordinate"));
    CHECK(o.answers);
    CHECK(o.by == "a remove and rescan");
    CHECK(run.r.driver("0000:3b:01.0") == std::optional<std::string>("ixgbe"));  // untouched
    CHECK_FALSE(run.r.kernel.exists("run/hostprep/rescan"));
  }
  SECTION("remove and rescan brings a function back, with the kernel's driver") {
    Run run(host(", recovers_by: rescan", ", recovers_by: rescan"));
    auto o = run.climb();
    CHECK(o.answers);
    CHECK(o.by == "a remove and rescan");
    CHECK(run.answers("0000:3b:00.1"));
    CHECK(run.r.driver("0000:3b:00.1") == std::optional<std::string>("snd_hda_intel"));
  }
  SECTION("nothing works: the outcome says so, every function is still there") {
    Run run(host(", reset_methods: flr", ""));
    auto o = run.climb();
    CHECK_FALSE(o.answers);
    CHECK_THAT(o.tried.back(), Catch::Contains("still silent: 0000:3b:00.0, 0000:3b:00.1"));
    CHECK(run.r.kernel.exists("sys/bus/pci/devices/0000:3b:00.0"));
  }
  SECTION("a function bound to vfio-pci is unbound first") {
    Run run(host(", driver: vfio-pci, reset_methods: flr, recovers_by: function",
                 ", reset_methods: flr, recovers_by: function"));
    auto o = run.climb();
    CHECK(o.answers);
    CHECK(o.tried.front() == "unbound 0000:3b:00.0 from vfio-pci");
  }
}

TEST_CASE("recover: a run killed between the remove and the rescan loses no device", "[recover]") {
  Run run(host(", recovers_by: rescan", ", recovers_by: rescan", true));
  // The mark, then the removes: the crash comes before the rescan's write.
  size_t rescanAt = 0;
  {
    Run probe(host(", recovers_by: rescan", ", recovers_by: rescan", true));
    (void)probe.climb();
    for (size_t i = 0; i < probe.r.kernel.writes().size(); ++i) {
      if (probe.r.kernel.writes()[i].find("/rescan") != std::string::npos) rescanAt = i;
    }
    REQUIRE(rescanAt > 0);
  }
  run.r.kernel.crashAt(run.r.kernel.mutationCount() + rescanAt + 1);  // + the mark's file write
  CHECK_THROWS_AS(climbRecoverLadder(run.r.k, run.unit, run.r.opt), test::FakeKernel::Crash);
  run.r.kernel.noCrash();
  CHECK_FALSE(run.r.kernel.exists("sys/bus/pci/devices/0000:3b:00.0"));
  REQUIRE(run.r.kernel.exists("run/hostprep/rescan"));
  // The next run that takes the lock (prepare, the agent, recover) rescans first.
  ConvergeOptions co;
  co.mode = Mode::kContainer;
  co.selection.devices = {};
  co.lockTimeout = std::chrono::milliseconds(1000);
  auto c = converge(run.r.k, co);
  CHECK(run.r.kernel.exists("sys/bus/pci/devices/0000:3b:00.0"));
  CHECK(run.r.kernel.exists("sys/bus/pci/devices/0000:3b:00.1"));
  CHECK_FALSE(run.r.kernel.exists("run/hostprep/rescan"));
}

TEST_CASE("recover on the command line: bad input, refusals, dry run", "[recover][cli]") {
  SECTION("--devices is required, and names a GPU") {
    test::Fixture fx(test::Fixture::HostYaml{host("", "", true)});
    auto none = test::runHostprep({"--root", fx.root().string(), "recover"});
    CHECK(none.exitCode == 2);
    CHECK_THAT(none.err, Catch::Contains("--devices is required"));
    auto nic = test::runHostprep(
        {"--root", fx.root().string(), "recover", "--devices", "0000:3b:01.0", "--dry-run"});
    CHECK(nic.exitCode == 2);
  }
  SECTION("the dry run lists the ladder and changes nothing") {
    test::Fixture fx(test::Fixture::HostYaml{host(", reset_methods: flr", "", true)});
    auto before = fx.deviceState();
    auto r = test::runHostprep({"--root", fx.root().string(), "--output", "json", "recover",
                                "--devices", "0000:3b:00.0", "--dry-run", "--mode", "container"});
    REQUIRE(r.exitCode == 0);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["ladder"].size() == 3);
    CHECK(j["functions"].size() == 2);
    CHECK_THAT(j["then"].get<std::string>(), Catch::Contains("container"));
    CHECK(fx.deviceState() == before);
    auto text = test::runHostprep(
        {"--root", fx.root().string(), "recover", "--devices", "0000:3b:00.0", "--dry-run"});
    CHECK_THAT(text.out, Catch::Contains("no bus reset: bus 0000:3b also carries 0000:3b:01.0"));
  }
  SECTION("a process holding the GPU's group: refused (exit 3), nothing touched") {
    test::Fixture fx(test::Fixture::HostYaml{
        host(", driver: vfio-pci", "") +
        "holders:\n  - {pid: 4242, comm: qemu-system-x86, node: /dev/vfio/30}\n"});
    auto before = fx.deviceState();
    auto r =
        test::runHostprep({"--root", fx.root().string(), "recover", "--devices", "0000:3b:00.0"});
    CHECK(r.exitCode == 3);
    CHECK_THAT(r.err, Catch::Contains("qemu-system-x86"));
    CHECK(fx.deviceState() == before);
  }
  SECTION("a group with the root disk: refused (exit 3)") {
    test::Fixture fx(test::Fixture::HostYaml{
        host("", "") +
        "  - {bdf: \"0000:3b:00.3\", id: \"144d:a80a\", class: \"010802\", driver: nvme, group: "
        "30}\nroot_disk: \"0000:3b:00.3\"\n"});
    auto r =
        test::runHostprep({"--root", fx.root().string(), "recover", "--devices", "0000:3b:00.0"});
    CHECK(r.exitCode == 3);
    CHECK_THAT(r.err, Catch::Contains("root disk"));
  }
}

// What the VM suite's hostprep.recover_real_kernel found on Debian's 6.1 (tests/vm/README.md,
// "Resets"): a GPU left without a driver after a failed probe, its audio function still on
// snd_hda_intel, both answering; the kernel lists "bus" for the GPU (function 0, probed before
// function 1 was on the bus), whose reset fails with ENOTTY beside the audio function.
std::string driverless(const std::string& gpuMethods) {
  return R"(
kernel: 6.1.0-test-amd64
cmdline: intel_iommu=on
modules: [snd_hda_intel, vfio, vfio_pci]
available_modules: [nvidia]
devices:
  - {bdf: "0000:00:01.0", id: "8086:2030", class: "060400", group: 1, secondary_bus: 59, reset_subordinate: true}
  - {bdf: "0000:3b:00.0", id: "10de:2236", class: "030200", group: 30, reset_methods: ")" +
         gpuMethods + R"("}
  - {bdf: "0000:3b:00.1", id: "10de:1aef", class: "040300", driver: snd_hda_intel, group: 30}
)";
}

TEST_CASE("recover: the functions it unbound get a driver again once they answer", "[recover]") {
  Run run(driverless("flr"));
  auto o = run.climb();
  CHECK(o.answers);
  CHECK(o.by == "a function reset");
  CHECK(run.r.driver("0000:3b:00.1") == std::optional<std::string>("snd_hda_intel"));
  CHECK_FALSE(run.r.driver("0000:3b:00.0"));  // the GPU: the mode's driver is the caller's
}

TEST_CASE("recover without a mode probes the GPUs too: their override, else the kernel's driver",
          "[recover]") {
  // The GPU left on vfio-pci by a VM: the probe follows its driver_override.
  Run pinned(driverless("flr\", driver: vfio-pci, driver_override: \"vfio-pci"));
  auto o = pinned.climb(/*probeGpus=*/true);
  CHECK(o.answers);
  CHECK(pinned.r.driver("0000:3b:00.0") == std::optional<std::string>("vfio-pci"));
  CHECK(pinned.r.driver("0000:3b:00.1") == std::optional<std::string>("snd_hda_intel"));
  CHECK_THAT(o.tried, Catch::VectorContains(std::string("probed 0000:3b:00.0: on vfio-pci")));
  // No override: what the kernel's probe takes it with (nvidia is not loaded: no driver, said so).
  Run bare(driverless("flr"));
  o = bare.climb(/*probeGpus=*/true);
  CHECK(o.answers);
  CHECK_FALSE(bare.r.driver("0000:3b:00.0"));
  CHECK_THAT(o.tried,
             Catch::VectorContains(std::string("probed 0000:3b:00.0: no driver takes it")));
}

TEST_CASE("recover's mode: --mode, else the config's, else the last prepare's", "[recover][cli]") {
  test::Fixture fx(test::Fixture::HostYaml{driverless("flr")});
  auto then = [&](std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"--root",  fx.root().string(), "--output",     "json",
                                  "recover", "--devices",        "0000:3b:00.0", "--dry-run"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = test::runHostprep(args);
    REQUIRE(r.exitCode == 0);
    return nlohmann::json::parse(r.out)["then"].get<std::string>();
  };
  CHECK_THAT(then(), Catch::StartsWith("then probe them"));
  fx.write("run/hostprep/last-mode", "vm-passthrough\n");
  CHECK(then() ==
        "then move them to vm-passthrough's driver (the last prepare's mode), as "
        "prepare does");
  fx.write("etc/hostprep/config.yaml", "mode: container\n");
  CHECK_THAT(then(), Catch::StartsWith("then move them to container's driver (the config's mode)"));
  CHECK_THAT(then({"--mode", "vm-vgpu"}),
             Catch::StartsWith("then move them to vm-vgpu's driver (--mode)"));
}

TEST_CASE("recover: a reset that fails is no rung that worked", "[recover]") {
  Run run(driverless("bus"));
  auto s = readSnapshot(run.r.kernel);
  REQUIRE(s);
  auto ladder = recoverLadder(*s, run.unit);
  CHECK(ladder[1] == "reset bus 0000:3b through 0000:00:01.0 (reset_subordinate)");
  auto o = run.climb();
  CHECK(o.answers);
  CHECK(o.by == "a bus reset through 0000:00:01.0");
  CHECK_FALSE(run.wrote("0000:3b:00.0/reset"));
  CHECK(run.r.driver("0000:3b:00.1") == std::optional<std::string>("snd_hda_intel"));
}

TEST_CASE("recover: a function in the GPU's slot that is not the GPU's is refused (exit 3)",
          "[recover][cli]") {
  // As the VM's edu D with its e1000e at 02:00.1: unbinding, resetting or removing the GPU's
  // slot would take the NIC with it.
  test::Fixture fx(test::Fixture::HostYaml{R"(
kernel: 6.1.0-test-amd64
cmdline: intel_iommu=on
modules: [ixgbe, vfio, vfio_pci]
available_modules: [nvidia]
devices:
  - {bdf: "0000:00:01.0", id: "8086:2030", class: "060400", group: 1, secondary_bus: 59, reset_subordinate: true}
  - {bdf: "0000:3b:00.0", id: "10de:2236", class: "030200", group: 30}
  - {bdf: "0000:3b:00.1", id: "8086:10fb", class: "020000", driver: ixgbe, group: 30}
)"});
  auto before = fx.deviceState();
  auto r = test::runHostprep({"--root", fx.root().string(), "recover", "--devices", "0000:3b:00.0",
                              "--mode", "container"});
  CHECK(r.exitCode == 3);
  CHECK_THAT(r.err, Catch::Contains("0000:3b:00.1"));
  CHECK(fx.deviceState() == before);
  auto dry = test::runHostprep(
      {"--root", fx.root().string(), "recover", "--devices", "0000:3b:00.0", "--dry-run"});
  CHECK(dry.exitCode == 3);
}

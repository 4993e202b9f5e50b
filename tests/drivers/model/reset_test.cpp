// The way back from a VM (drivers/model/reset.hpp, the plan's reset steps, the executor's resets)
// on the fake kernel: a function with a reset method is reset between its unbind and its probe; the
// functions of a bus that moves whole are reset together through their bridge; a bus that also
// carries a device hostprep does not move is never reset; a function that no longer answers is
// never probed.
#include "drivers/model/reset.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "drivers/switch/executor.hpp"
#include "tests/drivers/switch_rig.hpp"
#include "tests/support/run.hpp"

using namespace hostprep;
using namespace hostprep::test::rig;

namespace {

int resets(Rig& r, const char* bdf) {
  auto t = readTrimmed(r.kernel, std::string("fake/reset/") + bdf);
  return t ? std::stoi(*t) : 0;
}

// The step kinds of one device, in plan order.
std::vector<std::string> stepsOf(const Plan& p, const char* bdf) {
  std::vector<std::string> out;
  for (const auto& st : p.steps) {
    if (st.bdf && st.bdf->str() == bdf) out.emplace_back(toString(st.kind));
  }
  return out;
}

size_t indexOf(const Plan& p, StepKind k, const char* bdf) {
  for (size_t i = 0; i < p.steps.size(); ++i) {
    if (p.steps[i].kind == k && p.steps[i].bdf && p.steps[i].bdf->str() == bdf) return i;
  }
  return p.steps.size();
}

}  // namespace

TEST_CASE("the snapshot reads reset methods, bridges and whether a function answers", "[reset]") {
  Rig r("return-from-vm");
  auto s = readSnapshot(r.kernel);
  REQUIRE(s);
  const PciFunction* flr = s->find(*parseBdf("0000:86:00.0"));
  REQUIRE(flr);
  CHECK(flr->resetFile);
  CHECK(flr->resetMethods == std::vector<std::string>{"flr"});
  CHECK(flr->responsive == true);
  const PciFunction* none = s->find(*parseBdf("0000:3b:00.0"));
  CHECK_FALSE(none->resetFile);
  CHECK_FALSE(none->resetMethods);
  CHECK(none->powerState == std::optional<std::string>("D0"));
  CHECK(none->d3coldAllowed == true);
  const PciFunction* port = s->find(*parseBdf("0000:00:01.0"));
  CHECK(port->secondaryBus == 0x3b);
  CHECK(port->resetSubordinate);
  CHECK(bridgeOf(*s, busOf(none->bdf)) == port);
}

TEST_CASE("how each function can be reset", "[reset]") {
  Rig r("return-from-vm");
  auto s = readSnapshot(r.kernel);
  REQUIRE(s);
  auto bdfs = [](std::initializer_list<const char*> l) {
    std::vector<Bdf> v;
    for (const char* b : l) v.push_back(*parseBdf(b));
    return v;
  };
  auto of = [&](const char* b, const std::vector<Bdf>& moving) {
    return resetOptionOf(*s, *s->find(*parseBdf(b)), moving);
  };
  CHECK(of("0000:86:00.0", bdfs({"0000:86:00.0"})).way == ResetWay::kFunction);
  auto bus = of("0000:3b:00.0", bdfs({"0000:3b:00.0", "0000:3b:00.1"}));
  CHECK(bus.way == ResetWay::kBus);
  CHECK(bus.bridge == parseBdf("0000:00:01.0"));
  // Without its audio function moving too, the bus is not the GPU's alone.
  auto alone = of("0000:3b:00.0", bdfs({"0000:3b:00.0"}));
  CHECK(alone.way == ResetWay::kNone);
  CHECK_THAT(alone.why, Catch::Contains("0000:3b:00.1"));
  auto nic = of("0000:af:00.0", bdfs({"0000:af:00.0"}));
  CHECK(nic.way == ResetWay::kNone);
  CHECK_THAT(nic.why, Catch::Contains("0000:af:00.1"));
}

TEST_CASE("back from a VM: each function is reset between its unbind and its probe", "[reset]") {
  Rig r("return-from-vm");
  Plan p = r.plan(Mode::kContainer);
  // FLR, one by one.
  CHECK(stepsOf(p, "0000:86:00.0") ==
        std::vector<std::string>{"set-override", "unbind", "reset", "probe", "verify-module"});
  CHECK(stepsOf(p, "0000:86:00.1") ==
        std::vector<std::string>{"set-override", "unbind", "reset", "probe", "verify-driver"});
  // The bus of 3b: both unbound, one bus reset, then both probed.
  const size_t busReset = indexOf(p, StepKind::kResetBus, "0000:3b:00.0");
  REQUIRE(busReset < p.steps.size());
  CHECK(p.steps[busReset].arg == "0000:00:01.0");
  CHECK(indexOf(p, StepKind::kUnbind, "0000:3b:00.1") < busReset);
  CHECK(indexOf(p, StepKind::kUnbind, "0000:3b:00.0") < busReset);
  CHECK(indexOf(p, StepKind::kProbe, "0000:3b:00.0") > busReset);
  CHECK(indexOf(p, StepKind::kProbe, "0000:3b:00.1") > busReset);
  // af shares its bus with a NIC: no reset, and the plan says why.
  CHECK(stepsOf(p, "0000:af:00.0") ==
        std::vector<std::string>{"set-override", "unbind", "probe", "verify-module"});
  REQUIRE(p.notReset.size() == 1);
  CHECK(p.notReset[0].first.str() == "0000:af:00.0");
  CHECK_THAT(p.notReset[0].second, Catch::Contains("0000:af:00.1"));

  for (bool parallel : {true, false}) {
    INFO("parallel " << parallel);
    Rig run("return-from-vm");
    run.opt.parallel = parallel;
    REQUIRE(applyPlan(run.k, run.plan(Mode::kContainer), run.opt));
    CHECK(resets(run, "0000:86:00.0") == 1);
    CHECK(resets(run, "0000:86:00.1") == 1);
    CHECK(resets(run, "0000:3b:00.0") == 1);  // the bus reset, once
    CHECK(resets(run, "0000:3b:00.1") == 1);
    CHECK(resets(run, "0000:af:00.0") == 0);
    CHECK(resets(run, "0000:af:00.1") == 0);  // the NIC: never
    CHECK(run.driver("0000:3b:00.0") == std::optional<std::string>("nvidia"));
    CHECK(run.driver("0000:86:00.1") == std::optional<std::string>("snd_hda_intel"));
    CHECK(run.driver("0000:af:00.1") == std::optional<std::string>("ixgbe"));
  }
}

TEST_CASE("asked not to reset (--no-reset), a run returns devices without one", "[reset]") {
  Rig r("return-from-vm");
  auto s = readPlanSnapshot(r.kernel, {});
  REQUIRE(s);
  auto sel = selectDevices(*s, {});
  REQUIRE(sel);
  PlanInputs in{Mode::kContainer, "nvidia", ""};
  in.resetOnReturn = false;
  auto p = makePlan(*s, *sel, in);
  REQUIRE(p);
  for (const auto& st : p->steps) {
    CHECK(st.kind != StepKind::kReset);
    CHECK(st.kind != StepKind::kResetBus);
  }
  CHECK(p->notReset.size() == 5);
  REQUIRE(applyPlan(r.k, *p, r.opt));
  CHECK(resets(r, "0000:86:00.0") == 0);
}

TEST_CASE("vm-passthrough never resets on the way to vfio", "[reset]") {
  Rig r("two-a10");
  for (const auto& st : r.plan(Mode::kVmPassthrough).steps) {
    CHECK(st.kind != StepKind::kReset);
    CHECK(st.kind != StepKind::kResetBus);
  }
}

TEST_CASE("a reset that fails rolls every device back", "[reset]") {
  SECTION("a function reset") {
    Rig r("return-from-vm");
    auto before = r.fx.deviceState();
    r.kernel.failWritesTo("0000:86:00.1/reset", EIO);
    auto res = applyPlan(r.k, r.plan(Mode::kContainer), r.opt);
    REQUIRE_FALSE(res);
    CHECK_THAT(res.error().describe(), Catch::Contains("0000:86:00.1"));
    CHECK(r.fx.deviceState() == before);
    CHECK_FALSE(r.kernel.exists("run/hostprep/journal.json"));
  }
  SECTION("a bus reset") {
    Rig r("return-from-vm");
    auto before = r.fx.deviceState();
    r.kernel.failWritesTo("0000:00:01.0/reset_subordinate", EAGAIN);
    auto res = applyPlan(r.k, r.plan(Mode::kContainer), r.opt);
    REQUIRE_FALSE(res);
    CHECK_THAT(res.error().describe(), Catch::Contains("reset_subordinate"));
    CHECK(r.fx.deviceState() == before);
  }
}

TEST_CASE("a function that does not answer is never probed", "[reset]") {
  SECTION("the plan refuses it up front, touching nothing") {
    Rig r(test::Fixture::HostYaml{R"(
kernel: 6.1.0-test-amd64
cmdline: intel_iommu=on
modules: [vfio, vfio_pci]
available_modules: [nvidia]
devices:
  - {bdf: "0000:3b:00.0", id: "10de:2236", class: "030200", driver: vfio-pci, driver_override: vfio-pci, group: 30, responsive: false, power_state: D3cold}
)"});
    auto s = readPlanSnapshot(r.kernel, {});
    REQUIRE(s);
    auto sel = selectDevices(*s, {});
    REQUIRE(sel);
    auto p = makePlan(*s, *sel, {Mode::kContainer, "nvidia", ""});
    REQUIRE_FALSE(p);
    CHECK_THAT(p.error().describe(), Catch::Contains("does not answer"));
    CHECK_THAT(p.error().describe(), Catch::Contains("D3cold"));
    CHECK_THAT(p.error().advice, Catch::Contains("hostprep recover --devices 0000:3b:00.0"));
  }
  SECTION("a reset after which it does not answer fails the step and rolls back") {
    Rig r("return-from-vm");
    auto before = r.fx.deviceState();
    Plan p = r.plan(Mode::kContainer);
    // The GPU falls off the bus while the run is under way.
    r.kernel.stopAnswering(*parseBdf("0000:86:00.0"));
    auto res = applyPlan(r.k, p, r.opt);
    REQUIRE_FALSE(res);
    CHECK_THAT(res.error().describe(), Catch::Contains("does not answer after its reset"));
    CHECK(r.driver("0000:86:00.0") == std::optional<std::string>("vfio-pci"));
    CHECK(r.fx.deviceState() == before);
  }
}

// What Debian's 6.1 and 6.12 show in the VM suite (tests/vm/README.md, "Resets"): the kernel
// lists its "bus" method for function 0 of a multi-function device behind a bridge, because it
// probes the methods before the device's other functions are on the bus, and writing that
// function's `reset` then fails with ENOTTY (pci_parent_bus_reset finds them there). Such a GPU
// is reset with its bus, or not at all; a GPU alone on its bus is reset by that same method.
TEST_CASE("a 'bus' method listed for a function that shares its bus is no method of its own",
          "[reset]") {
  const test::Fixture::HostYaml host{R"(
kernel: 6.1.0-test-amd64
cmdline: intel_iommu=on
modules: [snd_hda_intel, ixgbe, vfio, vfio_iommu_type1, vfio_pci_core, vfio_pci]
available_modules: [vfio, vfio_pci, nvidia]
devices:
  - {bdf: "0000:00:06.0", id: "1b36:000c", class: "060400", group: 5, secondary_bus: 1, reset_subordinate: true}
  - {bdf: "0000:00:07.0", id: "1b36:000c", class: "060400", group: 6, secondary_bus: 2, reset_subordinate: true}
  - {bdf: "0000:00:08.0", id: "1b36:000c", class: "060400", group: 7, secondary_bus: 3, reset_subordinate: true}
  - {bdf: "0000:01:00.0", id: "10de:2236", class: "030200", driver: vfio-pci, driver_override: vfio-pci, group: 11, reset_methods: "bus"}
  - {bdf: "0000:01:00.1", id: "10de:1aef", class: "040300", driver: vfio-pci, driver_override: vfio-pci, group: 11}
  - {bdf: "0000:02:00.0", id: "10de:2236", class: "030200", driver: vfio-pci, driver_override: vfio-pci, group: 12, reset_methods: "bus"}
  - {bdf: "0000:02:00.1", id: "8086:10fb", class: "020000", driver: ixgbe, group: 13}
  - {bdf: "0000:03:00.0", id: "10de:2236", class: "030200", driver: vfio-pci, driver_override: vfio-pci, group: 14, reset_methods: "bus"}
)"};
  Rig r(host);
  auto s = readSnapshot(r.kernel);
  REQUIRE(s);
  auto of = [&](const char* b, std::initializer_list<const char*> l) {
    std::vector<Bdf> moving;
    for (const char* m : l) moving.push_back(*parseBdf(m));
    return resetOptionOf(*s, *s->find(*parseBdf(b)), moving);
  };
  auto withAudio = of("0000:01:00.0", {"0000:01:00.0", "0000:01:00.1"});
  CHECK(withAudio.way == ResetWay::kBus);
  CHECK(withAudio.bridge == parseBdf("0000:00:06.0"));
  auto besideNic = of("0000:02:00.0", {"0000:02:00.0"});
  CHECK(besideNic.way == ResetWay::kNone);
  CHECK_THAT(besideNic.why, Catch::Contains("0000:02:00.1"));
  CHECK(of("0000:03:00.0", {"0000:03:00.0"}).way == ResetWay::kFunction);

  Plan p = r.plan(Mode::kContainer);
  CHECK(stepsOf(p, "0000:01:00.0") ==
        std::vector<std::string>{"set-override", "unbind", "reset-bus", "probe", "verify-module"});
  CHECK(p.steps[indexOf(p, StepKind::kResetBus, "0000:01:00.0")].arg == "0000:00:06.0");
  CHECK(stepsOf(p, "0000:02:00.0") ==
        std::vector<std::string>{"set-override", "unbind", "probe", "verify-module"});
  CHECK(stepsOf(p, "0000:03:00.0") ==
        std::vector<std::string>{"set-override", "unbind", "reset", "probe", "verify-module"});

  REQUIRE(applyPlan(r.k, p, r.opt));
  CHECK(resets(r, "0000:01:00.0") == 1);
  CHECK(resets(r, "0000:01:00.1") == 1);
  CHECK(resets(r, "0000:02:00.0") == 0);
  CHECK(resets(r, "0000:02:00.1") == 0);
  CHECK(resets(r, "0000:03:00.0") == 1);
  CHECK(r.driver("0000:01:00.0") == std::optional<std::string>("nvidia"));
  CHECK(r.driver("0000:01:00.1") == std::optional<std::string>("snd_hda_intel"));
  CHECK(r.driver("0000:02:00.0") == std::optional<std::string>("nvidia"));
  CHECK(r.driver("0000:02:00.1") == std::optional<std::string>("ixgbe"));
}

TEST_CASE("prepare --dry-run shows the resets, which --no-reset and the config drop",
          "[reset][cli]") {
  test::Fixture fx("return-from-vm");
  auto kinds = [](const std::string& out) {
    auto j = nlohmann::json::parse(out);
    std::vector<std::string> k;
    for (const auto& st : j["steps"]) k.push_back(st["kind"].get<std::string>());
    return std::make_pair(k, j.value("not_reset", nlohmann::json::array()).size());
  };
  auto has = [](const std::vector<std::string>& v, const char* k) {
    return std::count(v.begin(), v.end(), k);
  };
  auto r = test::runHostprep({"--root", fx.root().string(), "--output", "json", "prepare", "--mode",
                              "container", "--dry-run"});
  REQUIRE(r.exitCode == 0);
  auto [steps, notReset] = kinds(r.out);
  CHECK(has(steps, "reset") == 2);
  CHECK(has(steps, "reset-bus") == 1);
  CHECK(notReset == 1);
  auto text = test::runHostprep(
      {"--root", fx.root().string(), "prepare", "--mode", "container", "--dry-run"});
  CHECK_THAT(text.out, Catch::Contains("reset bus 0000:3b with every function on it"));
  CHECK_THAT(text.out, Catch::Contains("note: 0000:af:00.0 returns from vfio without a reset"));

  auto off = test::runHostprep({"--root", fx.root().string(), "--output", "json", "prepare",
                                "--mode", "container", "--dry-run", "--no-reset"});
  REQUIRE(off.exitCode == 0);
  auto [offSteps, offNot] = kinds(off.out);
  CHECK(has(offSteps, "reset") == 0);
  CHECK(has(offSteps, "reset-bus") == 0);
  CHECK(offNot == 5);

  fx.write("etc/hostprep/config.yaml", "mode: container\nreset-on-return: false\n");
  auto cfg =
      test::runHostprep({"--root", fx.root().string(), "--output", "json", "prepare", "--dry-run"});
  REQUIRE(cfg.exitCode == 0);
  CHECK(has(kinds(cfg.out).first, "reset") == 0);
}

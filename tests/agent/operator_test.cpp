// Beside NVIDIA's GPU Operator (issue 45): a host driver its driver container provides
// (host-driver-provider), and its own agents (vfio-manager, vgpu-device-manager) on the node. On
// fixture hosts with the fake kernel; FakeKernel::insmod stands in for the driver container
// loading its nvidia.ko from outside the host's module tree.
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "agent/converge.hpp"
#include "agent/daemon.hpp"
#include "agent/status_writer.hpp"
#include "drivers/model/operator_driver.hpp"
#include "drivers/published/status.hpp"
#include "tests/agent/converge_rig.hpp"
#include "tests/checks/preflight_support.hpp"
#include "tests/support/fake_kernel.hpp"
#include "tests/support/fixture.hpp"

using namespace hostprep;
using namespace std::string_literals;
using hostprep::test::Fixture;

namespace {

constexpr const char* kGpus[] = {"0000:3b:00.0", "0000:86:00.0"};
constexpr const char* kAudio[] = {"0000:3b:00.1", "0000:86:00.1"};
constexpr const char* kWaiting =
    "waiting for the host driver from the GPU Operator's driver container (module nvidia not "
    "loaded yet)";

using Rig = hostprep::test::FakeHost;

ConvergeOptions containerWith(DriverProvider p) {
  ConvergeOptions co = hostprep::test::quickConverge(Mode::kContainer);
  co.selection.hostDriverProvider = p;
  return co;
}

StatusDocument statusOf(const Host& host, DriverProvider p) {
  StatusRequest req;
  req.config.mode = Mode::kContainer;
  req.config.selection.hostDriverProvider = p;
  req.preflight = [](const Host&, const Snapshot&, Mode, const SelectionOptions&,
                     const std::vector<DeviceRule>&) { return std::optional<PreflightOutcome>(); };
  auto o = observe(host, req);
  REQUIRE(o);
  return std::move((*o)->doc);
}

}  // namespace

TEST_CASE(
    "auto is the operator only where the host's module tree lacks the module and the "
    "operator's marks are there",
    "[operator]") {
  Rig r("operator-passthrough");
  const std::string rel = "6.1.0-test-amd64";
  CHECK_FALSE(operatorProvidesDriver(r.kernel, DriverProvider::kAuto, rel, "nvidia"));
  CHECK(operatorProvidesDriver(r.kernel, DriverProvider::kOperator, rel, "nvidia"));
  CHECK_FALSE(operatorProvidesDriver(r.kernel, DriverProvider::kHost, rel, "nvidia"));
  r.fx.write("run/nvidia/validations/.driver-ctr-ready", "");
  CHECK(operatorProvidesDriver(r.kernel, DriverProvider::kAuto, rel, "nvidia"));
  // A host that has the module in its tree loads its own, operator marks or not.
  Rig host("passthrough-done");
  host.fx.write("run/nvidia/driver/README", "");
  CHECK(operatorDriverPresent(host.kernel));
  CHECK_FALSE(operatorProvidesDriver(host.kernel, DriverProvider::kAuto, rel, "vfio_pci"));
}

TEST_CASE(
    "container mode with the operator's driver not loaded yet: the GPUs wait off vfio, "
    "without override or driver, and the run succeeds",
    "[operator]") {
  Rig r("operator-passthrough");
  // host: the module is missing from the host's tree, the run fails at its first step and
  // changes nothing (no override is re-set: none was cleared).
  auto failed = converge(r.k, containerWith(DriverProvider::kHost));
  REQUIRE_FALSE(failed.status);
  CHECK_THAT(failed.status.error().describe(),
             Catch::Contains("cannot load module nvidia: not found for kernel"));
  for (const char* b : kGpus)
    CHECK(r.fn(b).driverOverride == std::optional<std::string>("vfio-pci"));

  // operator (auto, with the validator's mark): no load-module step, overrides cleared, vfio
  // unbound, no probe of a GPU while its module is missing.
  r.fx.write("run/nvidia/validations/.driver-ctr-ready", "");
  auto c = converge(r.k, containerWith(DriverProvider::kAuto));
  REQUIRE(c.status);
  REQUIRE(c.plan);
  CHECK(c.operatorDriver);
  for (const auto& st : c.plan->steps) CHECK(st.kind != StepKind::kLoadModule);
  CHECK(c.plan->awaitingDriver() ==
        std::vector<Bdf>{*parseBdf("0000:3b:00.0"), *parseBdf("0000:86:00.0")});
  CHECK(waitingText(*c.plan) == std::string(kWaiting) + ": 0000:3b:00.0, 0000:86:00.0");
  for (const char* b : kGpus) {
    CHECK_FALSE(r.fn(b).driver);
    CHECK_FALSE(r.fn(b).driverOverride);
  }
  for (const char* b : kAudio) {
    CHECK(r.fn(b).driver == std::optional<std::string>("snd_hda_intel"));
    CHECK_FALSE(r.fn(b).driverOverride);
  }
  CHECK_FALSE(r.kernel.exists("run/hostprep/journal"));

  // The status says it waits: a condition, not a failure; not converged yet.
  auto d = statusOf(r.kernel, DriverProvider::kAuto);
  CHECK_FALSE(d.converged);
  CHECK(d.drift().empty());
  const Condition* provided = d.condition("HostDriverProvided");
  REQUIRE(provided);
  CHECK(provided->status == ConditionStatus::kFalse);
  CHECK(provided->reason == "WaitingForOperatorDriver");
  CHECK(provided->message == kWaiting);
  const Condition* wanted = d.condition("DevicesOnWantedDriver");
  REQUIRE(wanted);
  CHECK(wanted->status == ConditionStatus::kUnknown);
  CHECK(wanted->reason == "WaitingForHostDriver");

  // A second run waits the same way, with nothing to do.
  auto again = converge(r.k, containerWith(DriverProvider::kOperator));
  REQUIRE(again.status);
  CHECK(again.plan->noop());
  CHECK(waitingText(*again.plan));

  // The driver container loads its nvidia.ko: the kernel binds the GPUs (driver_register), the
  // next run has nothing to do and the status converges.
  REQUIRE(r.kernel.insmod("nvidia"));
  auto after = converge(r.k, containerWith(DriverProvider::kOperator));
  REQUIRE(after.status);
  CHECK(after.plan->noop());
  CHECK_FALSE(waitingText(*after.plan));
  for (const char* b : kGpus) CHECK(r.fn(b).driver == std::optional<std::string>("nvidia"));
  auto done = statusOf(r.kernel, DriverProvider::kOperator);
  CHECK(done.converged);
  REQUIRE(done.condition("HostDriverProvided"));
  CHECK(done.condition("HostDriverProvided")->status == ConditionStatus::kTrue);
  CHECK(done.condition("DevicesOnWantedDriver")->status == ConditionStatus::kTrue);
}

TEST_CASE(
    "container mode with the operator's driver already loaded probes and verifies, and "
    "never loads it, and leaving container mode unbinds it and unloads nothing",
    "[operator]") {
  Rig r("operator-passthrough");
  REQUIRE(r.kernel.insmod("nvidia"));  // no GPU bound: each has its vfio-pci override
  auto c = converge(r.k, containerWith(DriverProvider::kOperator));
  REQUIRE(c.status);
  bool probed = false;
  for (const auto& st : c.plan->steps) {
    CHECK(st.kind != StepKind::kLoadModule);
    probed = probed || st.kind == StepKind::kVerifyModule;
  }
  CHECK(probed);
  CHECK(c.plan->awaitingDriver().empty());
  for (const char* b : kGpus) CHECK(r.fn(b).driver == std::optional<std::string>("nvidia"));

  ConvergeOptions back = containerWith(DriverProvider::kOperator);
  back.mode = Mode::kVmPassthrough;
  auto p = converge(r.k, back);
  REQUIRE(p.status);
  for (const char* b : kGpus) CHECK(r.fn(b).driver == std::optional<std::string>("vfio-pci"));
  CHECK(r.kernel.exists("sys/module/nvidia"));  // the operator's module stays loaded
}

TEST_CASE("the agent finishes the convergence when the operator's module appears",
          "[operator][agent]") {
  Rig r("operator-passthrough");
  r.fx.write("etc/hostprep/config.yaml", "mode: container\nhost-driver-provider: operator\n");
  AgentOptions opt;
  opt.unbindTimeout = std::chrono::milliseconds(500);
  opt.lockTimeout = std::chrono::milliseconds(500);
  Agent agent(r.k, opt, [](const std::string&) {});
  CHECK(agent.start() == 0);
  CHECK(agent.awaitingDriver().size() == 2);
  REQUIRE(agent.status());
  CHECK_FALSE(agent.status()->converged);
  REQUIRE(agent.status()->condition("HostDriverProvided"));
  CHECK(agent.status()->condition("HostDriverProvided")->reason == "WaitingForOperatorDriver");
  // An unrelated event changes nothing.
  const size_t before = agent.convergences();
  agent.handleEvents({{"bind", "pci", "0000:5e:00.0", "nvme"}});
  CHECK(agent.convergences() == before);
  // The module appears (the driver container's insmod): the agent converges and publishes,
  // without reconcile.
  REQUIRE(r.kernel.insmod("nvidia"));
  agent.handleEvents({{"add", "module", "nvidia", ""},
                      {"bind", "pci", "0000:3b:00.0", "nvidia"},
                      {"bind", "pci", "0000:86:00.0", "nvidia"}});
  CHECK(agent.awaitingDriver().empty());
  REQUIRE(agent.status());
  CHECK(agent.status()->converged);
  CHECK(agent.status()->condition("HostDriverProvided")->status == ConditionStatus::kTrue);
  CHECK(hostDriverArrived({{"add", "module", "nvidia", ""}}, "nvidia", {}));
  CHECK_FALSE(hostDriverArrived({{"add", "module", "nvme", ""}}, "nvidia", {}));
  CHECK(hostDriverArrived({{"bind", "pci", "0000:3b:00.0", "nvidia"}}, "nvidia",
                          {*parseBdf("0000:3b:00.0")}));
}

TEST_CASE(
    "the status read from the GPUs' bind events alone, before the module's own event, sees the "
    "operator's module",
    "[operator][agent]") {
  // A real kernel sends a module's add event after its init, which is where driver_register()
  // binds the waiting GPUs (kernel/module/main.c, do_init_module): the agent can hear the binds
  // without the module's event and refresh only those functions. Found on 6.1 in the VM suite
  // (hostprep.operator_driver_agent_converges_on_insmod): the status said converged, with
  // HostDriverProvided False "module standin not loaded yet".
  Rig r("operator-passthrough");
  REQUIRE(converge(r.k, containerWith(DriverProvider::kOperator)).status);
  StatusRequest req;
  req.config.mode = Mode::kContainer;
  req.config.selection.hostDriverProvider = DriverProvider::kOperator;
  req.preflight = [](const Host&, const Snapshot&, Mode, const SelectionOptions&,
                     const std::vector<DeviceRule>&) { return std::optional<PreflightOutcome>(); };
  auto waiting = observe(r.kernel, req);
  REQUIRE(waiting);
  REQUIRE((*waiting)->doc.condition("HostDriverProvided"));
  CHECK((*waiting)->doc.condition("HostDriverProvided")->status == ConditionStatus::kFalse);
  REQUIRE(r.kernel.insmod("nvidia"));
  req.previous = waiting->get();
  req.changed = req.rebound = {*parseBdf(kGpus[0]), *parseBdf(kGpus[1])};
  auto bound = observe(r.kernel, req);
  REQUIRE(bound);
  const StatusDocument& d = (*bound)->doc;
  CHECK((*bound)->snapshot.moduleLoaded("nvidia"));
  CHECK((*bound)->snapshot.pciDrivers.count("nvidia-nvswitch"));
  CHECK(d.converged);
  REQUIRE(d.condition("HostDriverProvided"));
  CHECK(d.condition("HostDriverProvided")->status == ConditionStatus::kTrue);
  CHECK(d.condition("HostDriverProvided")->reason == "OperatorDriverLoaded");
  CHECK(d.condition("DevicesOnWantedDriver")->status == ConditionStatus::kTrue);
}

TEST_CASE("the operator's vfio-manager and vgpu-device-manager are seen in the host's proc",
          "[operator][owner]") {
  Rig r("operator-passthrough");
  CHECK(operatorAgents(r.kernel).empty());
  r.fx.write("proc/812/comm", "vfio-manage\n");
  r.fx.write("proc/812/cmdline", "/bin/sh\0/usr/bin/vfio-manage\0bind\0--all\0"s);
  r.fx.write("proc/901/comm", "nvidia-vgpu-dm\n");
  r.fx.write("proc/901/cmdline", "nvidia-vgpu-dm\0"s);
  r.fx.write("proc/950/comm", "sh\n");
  r.fx.write("proc/950/cmdline", "sh\0-c\0sleep 1\0"s);
  CHECK(operatorAgents(r.kernel) ==
        std::vector<std::string>{"vfio-manager (pid 812: /bin/sh /usr/bin/vfio-manage bind --all)",
                                 "vgpu-device-manager (pid 901: nvidia-vgpu-dm)"});
  auto d = statusOf(r.kernel, DriverProvider::kHost);
  const Condition* owner = d.condition("SingleOwner");
  REQUIRE(owner);
  CHECK(owner->status == ConditionStatus::kFalse);
  CHECK(owner->reason == "OperatorAgentActive");
  CHECK_THAT(owner->message, Catch::StartsWith("the GPU Operator's agents move this node's GPUs "
                                               "too: vfio-manager (pid 812"));
}

TEST_CASE(
    "preflight: gpu.owner warns about the operator's agents, and modules.host-driver is INFO "
    "when the operator provides the module",
    "[operator][owner][preflight]") {
  Fixture fx("operator-passthrough");
  auto quiet =
      hostprep::test::check(hostprep::test::preflightOn(fx, Mode::kContainer), "gpu.owner");
  CHECK(quiet.status == CheckStatus::kPass);
  // Without a provider that provides it, the missing module is a WARN as before.
  CHECK(hostprep::test::check(hostprep::test::preflightOn(fx, Mode::kContainer),
                              "modules.host-driver")
            .status == CheckStatus::kWarn);
  SelectionOptions op;
  op.hostDriverProvider = DriverProvider::kOperator;
  auto info = hostprep::test::check(hostprep::test::preflightOn(fx, Mode::kContainer, op),
                                    "modules.host-driver");
  CHECK(info.status == CheckStatus::kInfo);
  CHECK(info.detail ==
        "nvidia is provided by the GPU Operator's driver container (host-driver-provider): not "
        "loaded yet, hostprep waits for it");

  fx.write("proc/812/comm", "vfio-manage\n");
  fx.write("proc/812/cmdline", "/bin/sh\0/usr/bin/vfio-manage\0bind\0--all\0"s);
  auto warn =
      hostprep::test::check(hostprep::test::preflightOn(fx, Mode::kVmPassthrough), "gpu.owner");
  CHECK(warn.status == CheckStatus::kWarn);
  CHECK(warn.detail ==
        "the GPU Operator's agents move this node's GPUs too: vfio-manager (pid 812: /bin/sh "
        "/usr/bin/vfio-manage bind --all)");
  CHECK_THAT(warn.remedy,
             Catch::StartsWith("set vfioManager.enabled=false and "
                               "vgpuDeviceManager.enabled=false in the ClusterPolicy"));
}

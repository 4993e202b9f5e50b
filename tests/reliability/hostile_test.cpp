// Hostile and broken input: names that would leave their directory, journals that would steer
// recovery elsewhere, sysfs and procfs files that are huge, truncated, binary or missing.
#include <catch2/catch.hpp>
#include <filesystem>

#include "drivers/common/parsers.hpp"
#include "drivers/common/validate.hpp"
#include "drivers/model/journal.hpp"
#include "drivers/model/selection.hpp"
#include "drivers/model/snapshot.hpp"
#include "drivers/switch/executor.hpp"
#include "tests/support/fake_kernel.hpp"
#include "tests/support/fixture.hpp"
#include "tests/support/run.hpp"

using namespace hostprep;
using hostprep::test::FakeKernel;
using hostprep::test::FakeModules;
using hostprep::test::Fixture;
using hostprep::test::runHostprep;

TEST_CASE("names that would leave their directory are errors that name the input", "[hostile]") {
  CHECK(pathComponentProblem("..") == "is a relative directory");
  CHECK(pathComponentProblem("a/b") == "contains '/'");
  CHECK(pathComponentProblem(std::string("nv\0idia", 7)) == "contains a NUL byte");
  CHECK(pathComponentProblem(std::string(256, 'a')) == "is longer than 255 bytes");
  CHECK(pathComponentProblem("") == "is empty");
  CHECK(pathComponentProblem("a\nb") == "contains a control character");
  CHECK(pathComponentProblem("nvidia-558") == "");
  CHECK(hostPathProblem("sys/bus/pci/drivers/../../../etc/passwd") == "contains a '..' component");
  CHECK(hostPathProblem("sys/bus/pci/drivers/..foo/bind") == "");

  auto s = checkDriverName("--host-driver", std::string("nv\0x", 4));
  REQUIRE_FALSE(s);
  CHECK(s.error().exit == Exit::kUsage);
  CHECK(s.error().message == "--host-driver: 'nv\\x00x' is not a driver name: contains a NUL byte");
  s = checkPathComponent("vGPU type", "../nvidia-558");
  REQUIRE_FALSE(s);
  CHECK(s.error().message == "vGPU type: '../nvidia-558' is not a safe name: contains '/'");
  s = checkConfigPath("--config", "/etc/hostprep/../../root/x.yaml");
  REQUIRE_FALSE(s);
  CHECK(s.error().message ==
        "--config: '/etc/hostprep/../../root/x.yaml' is not a usable path: contains a '..' "
        "component");
  CHECK(checkConfigPath("--config", "/etc/hostprep/config.yaml"));
  CHECK(isValidKernelRelease("6.1.0-18-amd64"));
  CHECK_FALSE(isValidKernelRelease("../../etc"));
}

TEST_CASE("the host seam refuses a path with '..' or NUL, whatever built it", "[hostile]") {
  Fixture fx("two-a10");
  RootHost host(fx.root());
  auto w = host.writeAttr("sys/bus/pci/drivers/../../../../escape", "x");
  REQUIRE_FALSE(w);
  CHECK(w.error().err == EINVAL);
  CHECK_THAT(w.error().message, Catch::Contains("contains a '..' component"));
  CHECK_FALSE(std::filesystem::exists(fx.root().parent_path() / "escape"));
  CHECK_FALSE(host.writeFileAtomic(std::string("run/a\0b", 7), "x"));
  CHECK_FALSE(host.read("proc/../proc/cmdline"));
  CHECK_FALSE(host.exists("sys/.."));
  CHECK(host.read("proc/cmdline"));
}

TEST_CASE("a hostile journal is refused before recovery writes anything", "[hostile]") {
  const std::string head = R"({"version":1,"mode":"vm-passthrough","pid":1,"next":0,)";
  struct Row {
    std::string body;
    const char* error;
  };
  const Row rows[] = {
      {R"("devices":[{"bdf":"0000:3b:00.0","driver":"../../../../tmp/x","driver_override":null}],"steps":[]})",
       "journal: devices[0]: 0000:3b:00.0: driver: '../../../../tmp/x' is not a driver name: "
       "contains '/'"},
      {R"("devices":[{"bdf":"0000:3b:00.0/../..","driver":null,"driver_override":null}],"steps":[]})",
       "journal: devices[0]: '0000:3b:00.0/../..' is not a PCI address"},
      {R"("devices":[{"bdf":"0000:3b:00.0","driver":"..","driver_override":null}],"steps":[]})",
       "journal: devices[0]: 0000:3b:00.0: driver: '..' is not a driver name: is a relative "
       "directory"},
      {R"("devices":[{"bdf":"0000:3b:00.0","driver":null,"driver_override":"a\nb"}],"steps":[]})",
       "journal: devices[0]: 0000:3b:00.0: driver_override: 'a\\x0ab' is not a safe name: contains "
       "a control character"},
      {R"("devices":[],"steps":[{"kind":"unbind","arg":"../x","bdf":"0000:3b:00.0","group":null}]})",
       "journal: steps[0]: step 'unbind' of 0000:3b:00.0: '../x' is not a driver name: contains "
       "'/'"},
      {R"("devices":[],"steps":[{"kind":"probe","arg":"","bdf":null,"group":null}]})",
       "journal: steps[0]: step 'probe': has no device"},
      {R"("devices":[],"steps":[{"kind":"verify-vfio-group","arg":"","bdf":null,"group":1e300}]})",
       "journal: steps[0]: \"group\" is not an IOMMU group number"},
      {R"("devices":[],"steps":[]})", nullptr},
  };
  for (const auto& r : rows) {
    INFO(r.body);
    auto j = parseJournal(head + r.body);
    if (!r.error) {
      CHECK(j);
      continue;
    }
    REQUIRE_FALSE(j);
    CHECK(j.error().message == r.error);
  }
  CHECK(parseJournal(R"({"version":1,"mode":"container","next":5,"steps":[]})").error().message ==
        "journal: \"next\" is not a step index 0..0");
  CHECK(parseJournal(std::string(1 << 20, '[')).error().message == "journal: nested too deeply");
  CHECK(parseJournal("{\"version\":1,\"mode\":\"contai\xff\"}").error().message ==
        "journal: not valid JSON");

  // And recovery from such a journal refuses, touching nothing.
  Fixture fx("two-a10");
  FakeKernel kernel(fx.root());
  FakeModules modules(kernel);
  Kernel k{kernel, modules};
  auto before = fx.deviceState();
  fx.write("run/hostprep/journal.json", head + rows[0].body);
  auto rec = recoverJournal(k, {});
  REQUIRE_FALSE(rec);
  CHECK_THAT(rec.error().describe(), Catch::Contains("is not a driver name"));
  CHECK_THAT(rec.error().describe(), Catch::Contains("check every GPU's driver by hand"));
  CHECK(kernel.writeCount() == 0);
  CHECK(fx.deviceState() == before);
}

TEST_CASE("a driver link or modules.alias naming '..' never reaches a path", "[hostile]") {
  Fixture fx("two-a10");
  FakeKernel kernel(fx.root());
  // A driver link whose last component is "..": the plan refuses the device by name.
  std::filesystem::remove(fx.path("sys/devices/pci0000:3b/0000:3b:00.0/driver"));
  fx.symlink("sys/devices/pci0000:3b/0000:3b:00.0/driver", "../../../bus/pci/drivers/..");
  auto s = readSnapshot(kernel);
  REQUIRE(s);
  CHECK(s->find(*parseBdf("0000:3b:00.0"))->driver == std::optional<std::string>(".."));
  auto sel = selectDevices(*s, {});
  auto p = makePlan(*s, *sel, {Mode::kVmPassthrough, "nvidia", ""});
  REQUIRE_FALSE(p);
  CHECK(p.error().message ==
        "0000:3b:00.0: driver: '..' is not a driver name: is a relative directory");

  // A hostile modules.alias line is skipped: the default vfio_pci is used.
  CHECK(bestVfioModule("alias vfio_pci:v*d*sv*sd*bc*sc*i* ../../evil\n",
                       "pci:v000010DEd00002236sv000010DEsd00001482bc03sc02i00") == "vfio_pci");
  // And a pattern built to make fnmatch backtrack forever is not tried.
  std::string bomb = "alias vfio_pci:";
  for (int i = 0; i < 40; ++i) bomb += "*a";
  CHECK(bestVfioModule(bomb + "b evil\n", "pci:" + std::string(200, 'a')) == "vfio_pci");
}

TEST_CASE("the executor refuses a step whose name would leave sysfs", "[hostile]") {
  Fixture fx("two-a10");
  FakeKernel kernel(fx.root());
  FakeModules modules(kernel);
  Kernel k{kernel, modules};
  Plan plan;
  plan.moves.push_back(
      {*parseBdf("0000:3b:00.0"), Role::kGpu, 30, {"nvidia", std::nullopt}, "vfio-pci", true});
  plan.steps.push_back(
      {StepKind::kUnbind, *parseBdf("0000:3b:00.0"), "../../../../tmp", std::nullopt});
  auto res = applyPlan(k, plan, {});
  REQUIRE_FALSE(res);
  CHECK_THAT(res.error().message, Catch::Contains("'../../../../tmp' is not a driver name"));
  CHECK(kernel.writeCount() == 0);
}

TEST_CASE("huge, truncated, binary and missing sysfs files are states, not crashes", "[hostile]") {
  Fixture fx("two-a10");
  const std::string gpu = "sys/devices/pci0000:3b/0000:3b:00.0/";
  const std::string audio = "sys/devices/pci0000:3b/0000:3b:00.1/";
  fx.write(gpu + "vendor", std::string(2 << 20, '1'));              // larger than any read cap
  fx.write(gpu + "class", "0x03");                                  // truncated
  fx.write(gpu + "modalias", std::string("pci:\xff\xfe\x00v", 8));  // binary, not UTF-8
  fx.write(gpu + "driver_override", std::string(5000, 'x'));        // over its read cap
  fx.write(gpu + "numa_node", "-99999999999999999999999\n");        // out of range
  fx.write(gpu + "sriov_totalvfs", "\xff\xff");
  std::filesystem::remove(fx.path(audio + "device"));  // missing, with the modalias that
  std::filesystem::remove(fx.path(audio + "class"));   // would have said them
  std::filesystem::remove(fx.path(audio + "modalias"));
  fx.write("proc/modules", std::string(2 << 20, 'm'));        // huge: over the 1 MiB cap
  fx.write("proc/cmdline", "intel_iommu=on \"unterminated");  // truncated mid-quote
  fx.write("proc/sys/kernel/osrelease", "../../../etc\n");    // would name lib/modules/../../..
  std::filesystem::remove(fx.path("proc/self/mountinfo"));

  RootHost host(fx.root());
  auto s = readSnapshot(host);
  REQUIRE(s);
  const auto* g = s->find(*parseBdf("0000:3b:00.0"));
  REQUIRE(g);
  CHECK(g->id.vendor == 0);  // unreadable: unknown, so not an NVIDIA GPU
  CHECK(g->classCode == 0x03);
  CHECK(g->modalias == std::string("pci:\xff\xfe\x00v", 8));
  CHECK_FALSE(g->driverOverride);
  CHECK_FALSE(g->numaNode);
  CHECK_FALSE(g->sriovTotalVfs);
  const auto* a = s->find(*parseBdf("0000:3b:00.1"));
  REQUIRE(a);
  CHECK(a->id.device == 0);
  CHECK(a->classCode == 0);
  CHECK(s->loadedModules.empty());
  CHECK(s->cmdline.value("intel_iommu") == std::optional<std::string>("on"));
  CHECK(s->kernelRelease.empty());
  CHECK_FALSE(s->rootDiskPci);
  // The GPU with an unreadable vendor is no longer selected; the other one still is.
  auto sel = selectDevices(*s, {});
  REQUIRE(sel);
  CHECK(sel->gpus() == std::vector<Bdf>{*parseBdf("0000:86:00.0")});
}

TEST_CASE("the command line refuses hostile names with exit 2", "[hostile][cli]") {
  auto r = runHostprep({"prepare", "--mode", "container", "--host-driver", std::string(65, 'a')});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("is not a driver name: is longer than 64 bytes"));
  r = runHostprep({"prepare", "--mode", "container", "--host-driver", ".."});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err,
             Catch::Contains("--host-driver: '..' is not a driver name: is a relative directory"));
  r = runHostprep({"prepare", "--mode", "container", "--holder-nodes", "/dev/../etc/*"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("--holder-nodes: '/dev/../etc/*' is not a /dev pattern"));
  r = runHostprep({"prepare", "--mode", "container", "--devices", "0000:3b:00.0,../../x"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("'../../x' is not a PCI address"));
}

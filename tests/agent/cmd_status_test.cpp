// hostprep status as users run it: read-only, on fixture roots.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "agent/converge.hpp"
#include "tests/support/fake_kernel.hpp"
#include "tests/support/fixture.hpp"
#include "tests/support/run.hpp"

using namespace hostprep;
using hostprep::test::FakeKernel;
using hostprep::test::FakeModules;
using hostprep::test::Fixture;
using hostprep::test::runHostprep;

TEST_CASE("status prints the document and writes it only with --write", "[cli][status]") {
  Fixture fx("status-passthrough-done");
  auto r = runHostprep({"--root", fx.root().string(), "--output", "json", "status"});
  REQUIRE(r.exitCode == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["actualMode"] == "vm-passthrough");
  CHECK(j["nodeName"] == "gpu-node-1");
  CHECK_FALSE(std::filesystem::exists(fx.path("run/hostprep/status.json")));

  r = runHostprep({"--root", fx.root().string(), "status", "--write"});
  REQUIRE(r.exitCode == 0);
  CHECK_THAT(r.out,
             Catch::StartsWith("node gpu-node-1: vm-passthrough (desired vm-passthrough), "
                               "converged, 4 device(s), advertises nvidia.com/GA102GL_A10=2\n"));
  CHECK(std::filesystem::exists(fx.path("run/hostprep/status.json")));
  CHECK(std::filesystem::exists(fx.path("var/lib/node-exporter/hostprep.prom")));

  r = runHostprep({"--root", fx.root().string(), "status", "--write", "/srv/elsewhere.json",
                   "--mode", "container"});
  REQUIRE(r.exitCode == 0);
  std::ifstream f(fx.path("srv/elsewhere.json"));
  std::stringstream ss;
  ss << f.rdbuf();
  auto w = nlohmann::json::parse(ss.str());
  CHECK(w["desiredMode"] == "container");
  CHECK(w["desiredModeSource"] == "flag");
  CHECK(w["converged"] == false);
}

TEST_CASE("status names a device that no longer answers, and what to run", "[cli][status][reset]") {
  Fixture fx("status-passthrough-done");
  fx.write("sys/devices/pci0000:86/0000:86:00.0/config", std::string(64, '\xff'));
  fx.write("sys/devices/pci0000:86/0000:86:00.0/power_state", "D3cold\n");
  auto r = runHostprep({"--root", fx.root().string(), "status"});
  REQUIRE(r.exitCode == 0);
  CHECK_THAT(r.out, Catch::Contains("\n  DevicesResponsive=False (DevicesNotAnswering): "
                                    "0000:86:00.0 (D3cold) does not answer (config space reads "
                                    "0xffff): run 'hostprep recover --devices 0000:86:00.0', else "
                                    "reboot the host\n"));
  CHECK_THAT(r.out, Catch::Contains("\n  0000:86:00.0 gpu 10de:2236 GA102GL [A10]: vfio-pci (does "
                                    "not answer, D3cold)\n"));
  CHECK_THAT(r.out, Catch::Contains("\n  0000:3b:00.0 gpu 10de:2236 GA102GL [A10]: vfio-pci\n"));
}

TEST_CASE("status --pci-ids names devices from another file", "[cli][status]") {
  Fixture fx("status-mixed");
  fx.write("elsewhere/pci.ids", "10de  NVIDIA\n\t2236  GA102GL [A10]\n");
  auto r = runHostprep({"--root", fx.root().string(), "--output", "json", "status", "--pci-ids",
                        "/elsewhere/pci.ids"});  // a host path, under --root
  REQUIRE(r.exitCode == 0);
  CHECK(nlohmann::json::parse(r.out)["advertised"] ==
        nlohmann::json{{"nvidia.com/GA102GL_A10", 1}, {"nvidia.com/gpu", 1}});
  r = runHostprep({"--root", fx.root().string(), "status", "--pci-ids", "/nonexistent/pci.ids"});
  CHECK(r.exitCode == 2);
  const std::string root = fx.root().string();
  CHECK(r.err == "hostprep status: --pci-ids: cannot read /nonexistent/pci.ids under --root " +
                     root + " (read as " + root +
                     "/nonexistent/pci.ids): No such file or directory (check the path: a file "
                     "option names a host path, under --root)\n");
  r = runHostprep({"--root", fx.root().string(), "--output", "json", "status", "--pci-ids",
                   "/nonexistent/pci.ids"});
  CHECK(r.exitCode == 2);
  auto e = nlohmann::json::parse(r.out);  // --output json: the error as a document
  CHECK(e["ok"] == false);
  CHECK(e["error"]["message"] == "--pci-ids: cannot read /nonexistent/pci.ids under --root " +
                                     root + " (read as " + root + "/nonexistent/pci.ids)");
  CHECK(e["error"]["errno"] == ENOENT);
  r = runHostprep({"--root", fx.root().string(), "status", "--write", "../x"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("--write: '../x' is not an absolute file path"));
}

TEST_CASE("a bad config makes status exit 2 naming the key", "[cli][config]") {
  Fixture fx("two-a10");
  fx.write("etc/hostprep/config.yaml", "mode: vm-passthrough\nstatus:\n  path: relative.json\n");
  auto before = fx.deviceState();
  auto r = runHostprep({"--root", fx.root().string(), "status"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(
      r.err,
      Catch::Contains(
          "/etc/hostprep/config.yaml: status.path: 'relative.json' is not an absolute file path"));
  CHECK(fx.deviceState() == before);
  CHECK_FALSE(std::filesystem::exists(fx.path("run/hostprep")));
}

// A status path that names a directory is bad input, said before the host is read (it was exit
// 1, "cannot write ...: Is a directory", after the work); the config's status.path the same, for
// every command that loads the config (the agent would fail each rewrite).
TEST_CASE("a status path that is a directory exits 2 naming where it was given", "[cli][config]") {
  Fixture fx("two-a10");
  std::filesystem::create_directories(fx.path("srv/status"));
  auto r = runHostprep({"--root", fx.root().string(), "status", "--write", "/srv/status"});
  CHECK(r.exitCode == 2);
  CHECK(r.err ==
        "hostprep status: --write: '/srv/status' is a directory (name the file to write in it, "
        "e.g. /srv/status/status.json)\n");
  r = runHostprep({"--root", fx.root().string(), "status", "--write", "/srv/status/s.json"});
  CHECK(r.exitCode == 0);
  CHECK(std::filesystem::is_regular_file(fx.path("srv/status/s.json")));

  fx.write("etc/hostprep/config.yaml", "status:\n  path: /srv/status\n");
  for (const char* cmd : {"status", "agent"}) {
    r = runHostprep(
        {"--root", fx.root().string(), cmd, cmd == std::string("agent") ? "--once" : "--write"});
    CHECK(r.exitCode == 2);
    CHECK_THAT(r.err, Catch::Contains("/etc/hostprep/config.yaml: status.path: '/srv/status' is a "
                                      "directory (name the file to write in it, e.g. "
                                      "/srv/status/status.json)"));
  }
  CHECK_FALSE(std::filesystem::exists(fx.path("run/hostprep/status.json")));
}

TEST_CASE("status shows the devices the last prepare moved, unless flags or the config say",
          "[cli][status]") {
  Fixture fx("two-a10");
  {  // prepare --mode vm-passthrough --devices 0000:86:00.0, through the fake kernel
    FakeKernel kernel(fx.root());
    FakeModules modules(kernel);
    Kernel k{kernel, modules};
    ConvergeOptions co;
    co.mode = Mode::kVmPassthrough;
    co.selection.devices = {*parseBdf("0000:86:00.0")};
    co.unbindTimeout = std::chrono::milliseconds(500);
    REQUIRE(converge(k, co).status);
  }
  auto bdfs = [&](std::vector<std::string> more) {
    std::vector<std::string> args{"--root", fx.root().string(), "--output", "json", "status"};
    args.insert(args.end(), more.begin(), more.end());
    auto r = runHostprep(args);
    INFO(r.err);
    REQUIRE(r.exitCode == 0);
    auto j = nlohmann::json::parse(r.out);
    std::vector<std::string> out;
    for (const auto& d : j["devices"]) out.push_back(d["bdf"]);
    return std::pair{out, j["converged"].get<bool>()};
  };
  const std::vector<std::string> moved{"0000:86:00.0", "0000:86:00.1"};
  const std::vector<std::string> other{"0000:3b:00.0", "0000:3b:00.1"};
  CHECK(bdfs({}) == std::pair{moved, true});
  // A flag wins over the last prepare.
  CHECK(bdfs({"--devices", "0000:3b:00.0"}) == std::pair{other, false});
  // A config that names no selection leaves it; one that does wins.
  fx.write("etc/hostprep/config.yaml", "host-driver: nvidia\n");
  CHECK(bdfs({}) == std::pair{moved, true});
  fx.write("etc/hostprep/config.yaml", "selection:\n  devices: [\"0000:3b:00.0\"]\n");
  CHECK(bdfs({}) == std::pair{other, false});
  // A damaged record is ignored with a warning.
  fx.write("etc/hostprep/config.yaml", "");
  fx.write("run/hostprep/last-selection", "selection: [\n");
  auto r = runHostprep({"--root", fx.root().string(), "status"});
  CHECK(r.exitCode == 0);
  CHECK_THAT(r.err, Catch::Contains("/run/hostprep/last-selection: line "));
  CHECK_THAT(r.out, Catch::Contains("4 device(s)"));
}

TEST_CASE("status's PreflightPassed checks each mode of the config's split on its own GPUs",
          "[cli][status][mixed]") {
  // preflight-mixed: the L4 at 0000:a1:00.0 shares its IOMMU group with a NIC, so the group is
  // not viable for vm-passthrough; a rule keeps that GPU in container mode.
  Fixture fx("preflight-mixed");
  auto condition = [&] {
    auto r = runHostprep({"--root", fx.root().string(), "--output", "json", "status"});
    REQUIRE(r.exitCode == 0);
    const auto doc = nlohmann::json::parse(r.out);
    for (const auto& c : doc["conditions"]) {
      if (c["type"] == "PreflightPassed") return c;
    }
    FAIL("no PreflightPassed condition in " << r.out);
    return nlohmann::json{};
  };
  fx.write("etc/hostprep/config.yaml", "mode: vm-passthrough\n");
  auto c = condition();
  CHECK(c["status"] == "False");
  CHECK_THAT(c["message"].get<std::string>(), Catch::Contains("iommu.groups"));

  fx.write("etc/hostprep/config.yaml",
           "mode: vm-passthrough\ndevices:\n  - match: {bdf: \"0000:a1:00.0\"}\n"
           "    mode: container\n");
  c = condition();
  INFO(c.dump());
  CHECK(c["status"] == "True");
  CHECK_THAT(c["message"].get<std::string>(),
             Catch::StartsWith("every mixed (container: 1, vm-passthrough: 4) check passed"));
}

// Issue 45, item 4: the KubeVirt entries are in the document, the file --write writes, and one
// line of the text; a container node has none of them.
TEST_CASE("status gives the KubeVirt permittedHostDevices entries: document, file, one line",
          "[cli][status][kubevirt]") {
  const nlohmann::json want = nlohmann::json::parse(R"({"pciHostDevices": [
      {"pciVendorSelector": "10DE:2236", "resourceName": "nvidia.com/GA102GL_A10",
       "externalResourceProvider": true}]})");
  Fixture fx("status-passthrough-done");
  auto r = runHostprep({"--root", fx.root().string(), "--output", "json", "status"});
  REQUIRE(r.exitCode == 0);
  CHECK(nlohmann::json::parse(r.out)["permittedHostDevices"] == want);

  r = runHostprep({"--root", fx.root().string(), "status", "--write"});
  REQUIRE(r.exitCode == 0);
  CHECK_THAT(r.out, Catch::EndsWith("\n  KubeVirt permittedHostDevices: 1 pci, 0 mediated (see "
                                    "--output json)\n"));
  std::ifstream f(fx.path("run/hostprep/status.json"));
  std::stringstream ss;
  ss << f.rdbuf();
  CHECK(nlohmann::json::parse(ss.str())["permittedHostDevices"] == want);

  Fixture container("status-container");
  r = runHostprep({"--root", container.root().string(), "status"});
  REQUIRE(r.exitCode == 0);
  CHECK_THAT(r.out, !Catch::Contains("permittedHostDevices"));
  r = runHostprep({"--root", container.root().string(), "--output", "json", "status"});
  REQUIRE(r.exitCode == 0);
  CHECK_FALSE(nlohmann::json::parse(r.out).contains("permittedHostDevices"));
}

// Hosts rebuilt from public captures of real machines (tests/fixtures/real/<name>/, each with a
// README naming its source and what is assumed): what a user runs on such a host, against golden
// output, and a fake-kernel round trip from the host as captured to every mode it allows and back.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "agent/converge.hpp"
#include "drivers/model/host_module.hpp"
#include "drivers/model/selection.hpp"
#include "tests/agent/converge_rig.hpp"
#include "tests/support/fake_kernel.hpp"
#include "tests/support/fixture.hpp"
#include "tests/support/run.hpp"

using namespace hostprep;
using hostprep::test::FakeKernel;
using hostprep::test::FakeModules;
using hostprep::test::Fixture;
using hostprep::test::runHostprep;

namespace fs = std::filesystem;

namespace {

const fs::path kReal = fs::path(HOSTPREP_FIXTURES_DIR) / "real";
constexpr Mode kModes[] = {Mode::kContainer, Mode::kVmPassthrough, Mode::kVmVgpu};

std::vector<std::string> realHosts() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(kReal)) {
    if (fs::exists(e.path() / "host.yaml")) out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void replaceAll(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

struct Expect {
  std::optional<Mode> mode;   // the mode the host is in as captured; nullopt: none
  std::string vgpuConfig;     // expect.yaml's vgpu_config: the config vm-vgpu runs with
  std::vector<Mode> reaches;  // the modes the host as captured can be put in
};

Expect readExpect(const std::string& name) {
  YAML::Node y = YAML::LoadFile((kReal / name / "expect.yaml").string());
  Expect e;
  e.mode = parseMode(y["mode"].as<std::string>());
  if (y["vgpu_config"]) e.vgpuConfig = y["vgpu_config"].as<std::string>();
  for (const auto& m : y["reaches"]) e.reaches.push_back(parseMode(m.as<std::string>()).value());
  return e;
}

// The arguments of `prepare --mode M` on this host: vm-vgpu with the host's own vGPU config.
std::vector<std::string> prepareArgs(const Fixture& fx, Mode m, const Expect& e) {
  std::vector<std::string> a{"--root", fx.root().string(),       "prepare",
                             "--mode", std::string(toString(m)), "--dry-run"};
  if (m == Mode::kVmVgpu && !e.vgpuConfig.empty()) {
    a.insert(a.end(), {"--vgpu-config", "/vgpu-config.yaml"});  // a host path, under --root
  }
  return a;
}

// Each command's exit code, stdout and stderr, the fixture's temporary root written as ROOT.
std::string transcript(const Fixture& fx, const std::vector<std::string>& args) {
  auto r = runHostprep(args);
  std::string cmd = "hostprep";
  for (size_t i = 2; i < args.size(); ++i) cmd += " " + args[i];
  std::string out = "$ " + cmd + "\nexit " + std::to_string(r.exitCode) + "\n" + r.out;
  if (!r.err.empty()) out += "--- stderr\n" + r.err;
  replaceAll(out, fx.root().string(), "ROOT");
  return out + "\n";
}

struct Rig : hostprep::test::FakeHost {
  explicit Rig(const std::string& name) : FakeHost("real/" + name) {}

  Status go(Mode m, const Expect& e) {
    ConvergeOptions co = hostprep::test::quickConverge(m);
    if (!e.vgpuConfig.empty()) co.vgpuConfigFile = "/vgpu-config.yaml";
    auto c = converge(k, co);
    if (!c.status) UNSCOPED_INFO(toString(m) << ": " << c.status.error().describe());
    return c.status;
  }
  // Each function's driver, and its driver_override where it is not the pin of the vfio driver
  // it is on (passthrough pins it: a host bound by vfio-pci.ids= has none, and gets one).
  std::map<std::string, std::string> drivers() const {
    std::map<std::string, std::string> out;
    for (const auto& [key, value] : fx.deviceState()) {
      if (key.find("/driver_override") != std::string::npos) continue;
      out[key] = value;
    }
    return out;
  }
};

}  // namespace

TEST_CASE("real hosts: every command, golden output", "[real]") {
  for (const auto& name : realHosts()) {
    DYNAMIC_SECTION(name) {
      Fixture fx("real/" + name);
      const Expect e = readExpect(name);
      if (!e.vgpuConfig.empty()) fx.write("vgpu-config.yaml", e.vgpuConfig);
      std::string all;
      all += transcript(fx, {"--root", fx.root().string(), "status"});
      for (Mode m : kModes) {
        all += transcript(
            fx, {"--root", fx.root().string(), "preflight", "--mode", std::string(toString(m))});
      }
      for (Mode m : kModes) all += transcript(fx, prepareArgs(fx, m, e));
      const fs::path golden = kReal / name / "expected.txt";
      if (std::getenv("HOSTPREP_UPDATE_GOLDEN")) std::ofstream(golden) << all;
      CHECK(all == slurp(golden));
    }
  }
}

TEST_CASE("real hosts: the host as captured is a no-op in its own mode", "[real]") {
  for (const auto& name : realHosts()) {
    const Expect e = readExpect(name);
    if (!e.mode) continue;
    DYNAMIC_SECTION(name) {
      Fixture fx("real/" + name);
      if (!e.vgpuConfig.empty()) fx.write("vgpu-config.yaml", e.vgpuConfig);
      auto r = runHostprep(prepareArgs(fx, *e.mode, e));
      REQUIRE(r.exitCode == 0);
      if (*e.mode == Mode::kVmPassthrough) {
        // Bound to vfio-pci with no driver_override (vfio-pci.ids=, new_id): nothing moves, the
        // plan only pins each function's override.
        std::istringstream lines(r.out);
        size_t steps = 0, pins = 0;
        for (std::string l; std::getline(lines, l);) {
          if (l.rfind("  ", 0) != 0 || l.find(". 0000:") == std::string::npos) continue;
          ++steps;
          if (l.find(": set driver_override to vfio-pci") != std::string::npos) ++pins;
        }
        CHECK(steps > 0);
        CHECK(pins == steps);
        CHECK(r.out.find(" -> vfio-pci\n") != std::string::npos);
      } else {
        CHECK(r.out.find(", 0 step(s)\n") != std::string::npos);
      }
    }
  }
}

TEST_CASE("real hosts: a fake-kernel round trip to every mode the host allows, and back",
          "[real]") {
  // Every mode is tried on the fake kernel from the host as captured (a host in no mode is first
  // put in the first mode expect.yaml says it reaches). A mode it reaches (expect.yaml `reaches`)
  // must succeed and lead back to exactly the drivers it had; any other must fail and leave
  // every function as it was.
  for (const auto& name : realHosts()) {
    const Expect e = readExpect(name);
    DYNAMIC_SECTION(name) {
      REQUIRE(!e.reaches.empty());
      const Mode home = e.mode.value_or(e.reaches.front());
      for (Mode m : kModes) {
        if (m == home) continue;
        Rig r(name);
        if (!e.vgpuConfig.empty()) r.fx.write("vgpu-config.yaml", e.vgpuConfig);
        if (!e.mode) REQUIRE(r.go(home, e));
        const auto before = r.drivers();
        const bool reaches = std::count(e.reaches.begin(), e.reaches.end(), m) > 0;
        INFO(name << ": " << toString(home) << " -> " << toString(m) << " -> " << toString(home)
                  << (reaches ? "" : " (not reached)"));
        auto there = r.go(m, e);
        CHECK(bool(there) == reaches);
        if (!there) {
          CHECK(r.drivers() == before);
          continue;
        }
        REQUIRE(r.go(home, e));
        CHECK(r.drivers() == before);
      }
    }
  }
}

TEST_CASE("HGX H200 as captured: NVSwitches back on nvidia-nvswitch after vm-passthrough",
          "[real]") {
  Rig r("hgx-h200-cubecos");
  const Expect e = readExpect("hgx-h200-cubecos");
  const char* kSwitches[] = {"0000:05:00.0", "0000:06:00.0", "0000:07:00.0", "0000:08:00.0"};
  auto driverOf = [&](const char* bdf) {
    return readPciFunction(r.kernel, *parseBdf(bdf))->driver.value_or("none");
  };
  REQUIRE(r.go(Mode::kVmPassthrough, e));  // no fabricmanager.cfg: FABRIC_MODE 0, with the GPUs
  for (const char* b : kSwitches) CHECK(driverOf(b) == "vfio-pci");
  CHECK(driverOf("0000:18:00.0") == "vfio-pci");
  REQUIRE(r.go(Mode::kContainer, e));
  for (const char* b : kSwitches) CHECK(driverOf(b) == "nvidia-nvswitch");
  CHECK(driverOf("0000:18:00.0") == "nvidia");
  // The kernel shows which module registered the driver the NVSwitches came back to.
  auto snap = readSnapshot(r.kernel);
  REQUIRE(snap);
  CHECK(snap->pciDrivers.at("nvidia-nvswitch") == "nvidia");
  CHECK(driversOfModule(*snap, "nvidia") == std::vector<std::string>{"nvidia", "nvidia-nvswitch"});
}

TEST_CASE(
    "HGX H200 as captured: the agent and a split whose container GPUs stay put are no-ops "
    "for them",
    "[real]") {
  Fixture fx("real/hgx-h200-cubecos");
  const auto before = fx.deviceState();
  SECTION("agent --once in container mode converges without a write") {
    fx.write("etc/hostprep/config.yaml", "mode: container\n");
    auto r = runHostprep({"--root", fx.root().string(), "agent", "--once"});
    INFO(r.err);
    CHECK(r.exitCode == 0);
    CHECK(fx.deviceState() == before);
  }
  SECTION("two GPUs to vm-passthrough, the NVSwitches left to the host: the rest stay put") {
    FakeKernel kernel(fx.root());
    FakeModules modules(kernel);
    Kernel k{kernel, modules};
    ConvergeOptions co;
    co.mode = Mode::kContainer;
    co.nvSwitch = NvSwitchPolicy::kLeave;
    for (const char* b : {"0000:18:00.0", "0000:2a:00.0"}) {
      DeviceRule rule;
      rule.match.bdf = parseBdf(b);
      rule.mode = Mode::kVmPassthrough;
      co.rules.push_back(rule);
    }
    auto c = converge(k, co);
    INFO((c.status ? std::string() : c.status.error().describe()));
    REQUIRE(c.status);
    REQUIRE(c.plan);
    for (const auto& mv : c.plan->moves) {
      const bool toVm = mv.bdf == *parseBdf("0000:18:00.0") || mv.bdf == *parseBdf("0000:2a:00.0");
      CHECK(mv.changes == toVm);
    }
    auto after = fx.deviceState();
    CHECK(after["0000:18:00.0/driver"] == "vfio-pci");
    CHECK(after["0000:2a:00.0/driver"] == "vfio-pci");
    for (const char* b : {"0000:3a:00.0", "0000:db:00.0", "0000:05:00.0", "0000:08:00.0"}) {
      CHECK(after[std::string(b) + "/driver"] == before.at(std::string(b) + "/driver"));
      CHECK(after[std::string(b) + "/driver_override"] ==
            before.at(std::string(b) + "/driver_override"));
    }
    // The same split again: nothing to do.
    auto again = converge(k, co);
    REQUIRE(again.status);
    CHECK(again.plan->noop());
  }
}

// The rigs of the switch tests (plan, executor, journal, fake kernel): a fixture host behind the
// fake kernel, planned and applied the way prepare does; vGPU configs for the vGPU scenarios; and
// helpers to compare device states.
#pragma once

#include <catch2/catch.hpp>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "drivers/model/selection.hpp"
#include "drivers/model/snapshot.hpp"
#include "drivers/model/vgpu.hpp"
#include "drivers/model/vgpu_config.hpp"
#include "drivers/switch/executor.hpp"
#include "tests/support/fake_host.hpp"

namespace hostprep::test::rig {

struct Rig : FakeHost {
  ApplyOptions opt;

  explicit Rig(const std::string& scenario) : FakeHost(scenario) {
    opt.unbindTimeout = std::chrono::milliseconds(200);
  }
  explicit Rig(const Fixture::HostYaml& yaml) : FakeHost(yaml) {
    opt.unbindTimeout = std::chrono::milliseconds(200);
  }

  Plan plan(Mode mode, SelectionOptions so = {}) {
    auto s = readPlanSnapshot(kernel, so);  // what prepare reads
    REQUIRE(s);
    auto sel = selectDevices(*s, so);
    REQUIRE(sel);
    auto p = makePlan(*s, *sel, {mode, "nvidia", ""});
    REQUIRE(p);
    return *p;
  }
};

inline const char* kA10[] = {"0000:3b:00.0", "0000:3b:00.1", "0000:86:00.0", "0000:86:00.1"};

inline const char* kConfig = R"(version: v1
vgpu-configs:
  A10-4Q:
    - device-filter: ["0x223610DE"]
      devices: all
      vgpu-devices:
        A10-4Q: 6
  too-many:
    - devices: all
      vgpu-devices: {A10-4Q: 7}
  wrong-family:
    - devices: all
      vgpu-devices: {T4-4Q: 1}
  t4-4q:
    - devices: all
      vgpu-devices: {T4-4Q: 4}
  t4-4q-5:
    - devices: [1]
      vgpu-devices: {T4-4Q: 5}
  t4-3q:
    - devices: all
      vgpu-devices: {T4-3Q: 1}
  h100-20c:
    - devices: all
      vgpu-devices: {H100-20C: 4}
  mtty:
    - devices: all
      vgpu-devices: {mtty-2: 2}
  serial:
    - devices: all
      vgpu-devices: {serial: 1}
)";

struct VRig : FakeHost {
  ApplyOptions opt;
  SelectionOptions so;
  std::string hostDriver = "nvidia";
  DeviceModes modes;  // a mixed node: each listed device's mode (the others: the plan's)

  explicit VRig(const std::string& scenario) : FakeHost(scenario) {
    opt.unbindTimeout = std::chrono::milliseconds(200);
  }

  // config: a name in kConfig, or "" for the embedded defaults.
  Result<Plan> tryPlan(Mode mode, const std::string& config = {}) {
    auto s = readPlanSnapshot(kernel, so);  // what prepare reads
    REQUIRE(s);
    auto sel = selectDevices(*s, so);
    REQUIRE(sel);
    PlanInputs in{mode, hostDriver, ""};
    in.modes = modes;
    in.vgpuHost = readPlanVgpuHost(kernel, *s, *sel);  // what prepare reads
    in.vgpuVfioAvailable = modules.available("nvidia_vgpu_vfio");
    if (!config.empty()) {
      auto cfg = parseVgpuConfig(kConfig, "test.yaml");
      REQUIRE(cfg);
      REQUIRE(cfg->find(config));
      in.vgpuConfig = *cfg->find(config);
      in.vgpuConfigName = config;
    }
    return makePlan(*s, *sel, in);
  }
  Plan plan(Mode mode, const std::string& config = {}) {
    auto p = tryPlan(mode, config);
    if (!p) FAIL(p.error().describe());
    return std::move(*p);
  }
  void apply(Mode mode, const std::string& config = {}) {
    auto res = applyPlan(k, plan(mode, config), opt);
    if (!res) FAIL(res.error().describe());
  }
  std::string read(const std::string& rel) { return readTrimmed(kernel, rel).value_or("<absent>"); }
  std::vector<VgpuDevice> vgpus() {
    auto s = readSnapshot(kernel);
    return readVgpuHost(kernel, *s).devices;
  }
  std::optional<std::string> driver(const std::string& bdf) {
    auto f = readPciFunction(kernel, *parseBdf(bdf));
    return f ? f->driver : std::nullopt;
  }
};

inline std::vector<std::string> describe(const Plan& p) {
  std::vector<std::string> out;
  for (const auto& st : p.steps) out.push_back(st.describe());
  return out;
}

// What differs between two deviceState()s, one "key: before -> after" per line ("" when equal).
inline std::string diff(const std::map<std::string, std::string>& a,
                        const std::map<std::string, std::string>& b) {
  std::string out;
  for (const auto& [k, v] : a) {
    auto it = b.find(k);
    if (it == b.end()) {
      out += k + ": " + v + " -> (gone)\n";
    } else if (it->second != v) {
      out += k + ": " + v + " -> " + it->second + "\n";
    }
  }
  for (const auto& [k, v] : b) {
    if (!a.count(k)) out += k + ": (new) -> " + v + "\n";
  }
  return out;
}

inline std::map<std::string, int> advertised(
    std::initializer_list<std::pair<const std::string, int>> l) {
  return l;
}

}  // namespace hostprep::test::rig

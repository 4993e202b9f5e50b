// The status document: golden documents for fixture hosts, checked against the published JSON
// Schema; conditions, NFD and Prometheus outputs (status_formats); the resources as the document
// carries them (their counting alone: advertised_test.cpp).
#include "drivers/published/status.hpp"

#include <catch2/catch.hpp>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "agent/config.hpp"
#include "agent/status_writer.hpp"
#include "drivers/published/status_formats.hpp"
#include "tests/drivers/switch_rig.hpp"
#include "tests/support/fixture.hpp"
#include "tests/support/schema.hpp"

using namespace hostprep;
using hostprep::test::Fixture;

namespace {

constexpr std::time_t kNow = 1714564800;  // 2024-05-01T12:00:00Z

std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

nlohmann::json schema() {
  return nlohmann::json::parse(
      slurp(std::filesystem::path(HOSTPREP_SOURCE_DIR) / "agent/status.schema.json"));
}

std::unique_ptr<Observation> observeScenario(const Fixture& fx, StatusRequest r = {}) {
  RootHost host(fx.root());
  auto cfg = loadConfig(host, kConfigPath, false);
  REQUIRE(cfg);
  r.config = *cfg;
  r.now = kNow;
  auto o = observe(host, r);
  REQUIRE(o);
  (*o)->doc.agentVersion = "VERSION";  // golden documents do not change with releases
  return std::move(*o);
}

// Compares with tests/fixtures/<scenario>/expected-status.json; HOSTPREP_UPDATE_GOLDEN=1 rewrites
// it.
void checkGolden(const std::string& scenario, const std::string& actual) {
  const auto path =
      std::filesystem::path(HOSTPREP_FIXTURES_DIR) / scenario / "expected-status.json";
  if (std::getenv("HOSTPREP_UPDATE_GOLDEN")) {
    std::ofstream(path) << actual;
  }
  CHECK(actual == slurp(path));
}

}  // namespace

TEST_CASE("golden status documents match and validate against the schema", "[status]") {
  const auto sch = schema();
  for (const char* scenario :
       {"status-passthrough-done", "status-container", "status-mixed", "status-drifted"}) {
    INFO(scenario);
    Fixture fx(scenario);
    auto o = observeScenario(fx);
    auto j = toJson(o->doc);
    checkGolden(scenario, j.dump(2) + "\n");
    auto errors = hostprep::test::validateSchema(sch, nlohmann::json::parse(j.dump()));
    CHECK(errors == std::vector<std::string>{});
  }
}

TEST_CASE("what each golden host is, in words", "[status]") {
  SECTION("passthrough done: converged, one A10 resource per group, audio folded into its group") {
    Fixture fx("status-passthrough-done");
    auto o = observeScenario(fx);
    const auto& d = o->doc;
    CHECK(d.nodeName == "gpu-node-1");
    CHECK(d.desiredMode == Mode::kVmPassthrough);
    CHECK(d.desiredModeSource == "config");
    CHECK(d.actualMode == ActualMode::kVmPassthrough);
    CHECK(d.converged);
    CHECK(d.advertised == std::map<std::string, int>{{"nvidia.com/GA102GL_A10", 2}});
    REQUIRE(d.devices.size() == 4);
    CHECK(d.devices[0].name == std::optional<std::string>("GA102GL [A10]"));
    CHECK(d.condition("GroupsViable")->status == ConditionStatus::kTrue);
  }
  SECTION("container: desired from the last prepare, nvidia.com/gpu per GPU, hwdata pci.ids") {
    Fixture fx("status-container");
    auto o = observeScenario(fx);
    const auto& d = o->doc;
    CHECK(d.nodeName == "gpu-node-2");
    CHECK(d.desiredModeSource == "last-prepare");
    CHECK(d.actualMode == ActualMode::kContainer);
    CHECK(d.converged);
    CHECK(d.pciIdsFound);
    CHECK(d.advertised == std::map<std::string, int>{{"nvidia.com/gpu", 2}});
  }
  SECTION("mixed: no desired mode, no pci.ids -> raw device id") {
    Fixture fx("status-mixed");
    auto o = observeScenario(fx);
    const auto& d = o->doc;
    CHECK_FALSE(d.desiredMode);
    CHECK(d.actualMode == ActualMode::kMixed);
    CHECK_FALSE(d.converged);
    CHECK_FALSE(d.pciIdsFound);
    CHECK(d.advertised ==
          std::map<std::string, int>{{"nvidia.com/2236", 1}, {"nvidia.com/gpu", 1}});
    CHECK(d.condition("DevicesOnWantedDriver")->reason == "NoDesiredMode");
  }
  SECTION("drifted: the audio function is off vfio, its group is not viable, still advertised") {
    Fixture fx("status-drifted");
    auto o = observeScenario(fx);
    const auto& d = o->doc;
    CHECK_FALSE(d.converged);
    REQUIRE(d.drift().size() == 1);
    CHECK(d.drift()[0]->fn->bdf.str() == "0000:3b:00.1");
    CHECK(d.condition("DevicesOnWantedDriver")->message ==
          "0000:3b:00.1 on snd_hda_intel, wants vfio-pci");
    CHECK(d.condition("GroupsViable")->status == ConditionStatus::kFalse);
    CHECK(d.condition("GroupsViable")->message == "IOMMU group 30: 0000:3b:00.1 on snd_hda_intel");
    CHECK(d.advertised == std::map<std::string, int>{{"nvidia.com/GA102GL_A10", 2}});
  }
}

TEST_CASE("a group is not viable while a bridge in it is on a driver other than pcieport",
          "[status]") {
  Fixture fx("bridge-on-driver");
  auto o = observeScenario(fx);
  const auto* c = o->doc.condition("GroupsViable");
  REQUIRE(c);
  CHECK(c->status == ConditionStatus::kFalse);
  CHECK(c->message == "IOMMU group 30: 0000:00:1f.0 on lpc_ich");
}

TEST_CASE("a device that no longer answers: responsive false, its power state, DevicesResponsive",
          "[status][reset]") {
  Fixture fx("status-passthrough-done");
  {
    auto o = observeScenario(fx);
    const auto* c = o->doc.condition("DevicesResponsive");
    REQUIRE(c);
    CHECK(c->status == ConditionStatus::kTrue);
    CHECK(c->message == "4 device(s) answer");
    // Devices that answer carry neither field: the documents of healthy nodes stay as they were.
    const auto healthy = toJson(o->doc);  // a range-for over a temporary's member would dangle
    for (const auto& dev : healthy["devices"]) {
      CHECK_FALSE(dev.contains("responsive"));
      CHECK_FALSE(dev.contains("powerState"));
    }
    CHECK_THAT(nfdFeatures(o->doc), Catch::Contains("hostprep.devices-responsive=true\n"));
    CHECK_THAT(prometheusText(o->doc), !Catch::Contains("hostprep_device_unresponsive"));
  }
  // The GPU at 86:00.0 reads all ones, its power cut; 3b:00.0 answers in D0.
  fx.write("sys/devices/pci0000:86/0000:86:00.0/config", std::string(64, '\xff'));
  fx.write("sys/devices/pci0000:86/0000:86:00.0/power_state", "D3cold\n");
  fx.write("sys/devices/pci0000:3b/0000:3b:00.0/power_state", "D0\n");
  auto o = observeScenario(fx);
  const auto& d = o->doc;
  const auto* c = d.condition("DevicesResponsive");
  REQUIRE(c);
  CHECK(c->status == ConditionStatus::kFalse);
  CHECK(c->reason == "DevicesNotAnswering");
  CHECK(c->message ==
        "0000:86:00.0 (D3cold) does not answer (config space reads 0xffff): run 'hostprep recover "
        "--devices 0000:86:00.0', else reboot the host");
  const auto j = toJson(d);
  for (const auto& dev : j["devices"]) {
    INFO(dev["bdf"]);
    if (dev["bdf"] == "0000:86:00.0") {
      CHECK(dev["responsive"] == false);
      CHECK(dev["powerState"] == "D3cold");
    } else {
      CHECK_FALSE(dev.contains("responsive"));
      CHECK_FALSE(dev.contains("powerState"));  // 3b:00.0 shows D0, but answers
    }
  }
  CHECK(hostprep::test::validateSchema(schema(), nlohmann::json::parse(j.dump())) ==
        std::vector<std::string>{});
  CHECK_THAT(nfdFeatures(d), Catch::Contains("hostprep.devices-responsive=false\n"));
  const std::string prom = prometheusText(d);
  CHECK_THAT(prom, Catch::Contains("hostprep_condition{type=\"DevicesResponsive\"} 0\n"));
  CHECK_THAT(prom,
             Catch::Contains(
                 "hostprep_device_unresponsive{bdf=\"0000:86:00.0\",power_state=\"D3cold\"} 1\n"));
  CHECK_THAT(prom, !Catch::Contains("bdf=\"0000:3b:00.0\""));
}

TEST_CASE("a condition keeps its lastTransitionTime until its status changes", "[status]") {
  Fixture fx("status-drifted");
  RootHost host(fx.root());
  StatusRequest r;
  r.config = *loadConfig(host, kConfigPath, false);
  r.now = kNow;
  auto first = observe(host, r);
  REQUIRE(first);
  REQUIRE(publish(host, **first, r.config, r.config.statusPath));
  // Later, nothing changed: times stay.
  r.now = kNow + 600;
  auto second = observe(host, r);
  CHECK((*second)->doc.condition("GroupsViable")->lastTransitionTime == kNow);
  CHECK((*second)->doc.observedTime == kNow + 600);
  REQUIRE(publish(host, **second, r.config, r.config.statusPath));
  // The audio function goes back to vfio: both conditions flip and get the new time.
  std::filesystem::remove(fx.path("sys/devices/pci0000:3b/0000:3b:00.1/driver"));
  fx.symlink("sys/devices/pci0000:3b/0000:3b:00.1/driver", "../../../bus/pci/drivers/vfio-pci");
  r.now = kNow + 1200;
  // On vfio but without the override, a re-probe could take it away: one step still pending.
  CHECK((*observe(host, r))->doc.condition("DevicesOnWantedDriver")->message ==
        "1 step(s) pending");
  fx.write("sys/devices/pci0000:3b/0000:3b:00.1/driver_override", "vfio-pci\n");
  auto third = observe(host, r);
  CHECK((*third)->doc.condition("GroupsViable")->status == ConditionStatus::kTrue);
  CHECK((*third)->doc.condition("GroupsViable")->lastTransitionTime == kNow + 1200);
  CHECK((*third)->doc.condition("PreflightPassed")->lastTransitionTime == kNow);
  CHECK((*third)->doc.converged);
}

TEST_CASE("vGPU devices are advertised by type name, and make the mode vm-vgpu", "[status][vgpu]") {
  Fixture fx("status-container");
  // The A10 at 3b:00.0 is a vGPU host: one mdev device of type nvidia-558 on it.
  const std::string pf = "sys/devices/pci0000:3b/0000:3b:00.0";
  const std::string uuid = "5f2a9a5e-1c39-4b8f-9a53-7d0f2c8c1a11";
  fx.write(pf + "/mdev_supported_types/nvidia-558/name", "NVIDIA A10-12Q\n");
  fx.write(pf + "/" + uuid + "/uevent", "");
  fx.symlink(pf + "/" + uuid + "/mdev_type", "../mdev_supported_types/nvidia-558");
  fx.symlink("sys/bus/mdev/devices/" + uuid, "../../../devices/pci0000:3b/0000:3b:00.0/" + uuid);
  auto o = observeScenario(fx);
  const auto& d = o->doc;
  CHECK(d.actualMode == ActualMode::kMixed);  // 86:00.0 is still a plain container GPU
  CHECK(d.advertised ==
        std::map<std::string, int>{{"nvidia.com/NVIDIA_A10-12Q", 1}, {"nvidia.com/gpu", 1}});
  REQUIRE(d.vgpu.size() == 1);
  CHECK(d.vgpu[0].device.parent->str() == "0000:3b:00.0");
  CHECK(d.vgpu[0].device.typeId == "nvidia-558");
  auto errors = hostprep::test::validateSchema(schema(), nlohmann::json::parse(toJson(d).dump()));
  CHECK(errors == std::vector<std::string>{});
}

TEST_CASE("NFD features and the Prometheus textfile", "[status]") {
  Fixture fx("status-passthrough-done");
  auto o = observeScenario(fx);
  CHECK(nfdFeatures(o->doc) ==
        "# written by hostprep; see run/hostprep/status.json\n"
        "hostprep.actual-mode=vm-passthrough\n"
        "hostprep.desired-mode=vm-passthrough\n"
        "hostprep.converged=true\n"
        "hostprep.devices-responsive=true\n"
        "hostprep.gpus.vm-passthrough=2\n");
  const std::string prom = prometheusText(o->doc);
  CHECK_THAT(prom, Catch::Contains("hostprep_devices{driver=\"vfio-pci\"} 4\n"));
  CHECK_THAT(prom, Catch::Contains("hostprep_converged 1\n"));
  CHECK_THAT(prom, Catch::Contains("hostprep_desired_gpus{mode=\"vm-passthrough\"} 2\n"));
  CHECK_THAT(prom, Catch::Contains("hostprep_last_transition_timestamp_seconds 1714564800\n"));
  CHECK_THAT(prom, Catch::Contains("hostprep_advertised{resource=\"nvidia.com/GA102GL_A10\"} 2\n"));
  CHECK_THAT(prom,
             Catch::Contains(
                 "hostprep_mode_info{desired=\"vm-passthrough\",actual=\"vm-passthrough\"} 1\n"));

  SECTION("publish writes all three where the config says") {
    RootHost host(fx.root());
    auto cfg = loadConfig(host, kConfigPath, false);
    REQUIRE(publish(host, *o, *cfg, cfg->statusPath));
    CHECK(nlohmann::json::parse(std::ifstream(fx.path("run/hostprep/status.json")))["actualMode"] ==
          "vm-passthrough");
    CHECK(std::filesystem::exists(
        fx.path("etc/kubernetes/node-feature-discovery/features.d/hostprep")));
    CHECK(std::filesystem::exists(fx.path("var/lib/node-exporter/hostprep.prom")));
  }
}

TEST_CASE("the schema validator rejects what the schema forbids", "[status][schema]") {
  const auto sch = schema();
  Fixture fx("status-passthrough-done");
  auto j = nlohmann::json::parse(toJson(observeScenario(fx)->doc).dump());
  auto bad = j;
  bad.erase("converged");
  CHECK(hostprep::test::validateSchema(sch, bad) ==
        std::vector<std::string>{"$: missing converged"});
  bad = j;
  bad["actualMode"] = "vm";
  CHECK(hostprep::test::validateSchema(sch, bad).size() == 1);
  bad = j;
  bad["devices"][0]["bdf"] = "3b:00.0";
  CHECK(hostprep::test::validateSchema(sch, bad).size() == 1);
  bad = j;
  bad["advertised"]["nvidia.com/GA102GL_A10"] = 0;
  CHECK(hostprep::test::validateSchema(sch, bad).size() == 1);
  bad = j;
  bad["extra"] = 1;
  CHECK(hostprep::test::validateSchema(sch, bad) ==
        std::vector<std::string>{"$.extra: not allowed by the schema"});
  // The KubeVirt entries: upper-case VENDOR:DEVICE, only lists with entries, external always.
  REQUIRE(j.contains("permittedHostDevices"));
  bad = j;
  bad["permittedHostDevices"]["pciHostDevices"][0]["pciVendorSelector"] = "10de:2236";
  CHECK(hostprep::test::validateSchema(sch, bad).size() == 1);
  bad = j;
  bad["permittedHostDevices"]["pciHostDevices"][0]["externalResourceProvider"] = false;
  CHECK(hostprep::test::validateSchema(sch, bad).size() == 1);
  bad = j;
  bad["permittedHostDevices"]["mediatedDevices"] = nlohmann::json::array();
  CHECK(hostprep::test::validateSchema(sch, bad) ==
        std::vector<std::string>{
            "$.permittedHostDevices.mediatedDevices: has 0 item(s), fewer than 1"});
  bad = j;
  bad["permittedHostDevices"]["usb"] = nlohmann::json::array();
  CHECK(hostprep::test::validateSchema(sch, bad).size() == 1);
  // Optional: a document of an older version, without it, is still valid.
  bad = j;
  bad.erase("permittedHostDevices");
  CHECK(hostprep::test::validateSchema(sch, bad) == std::vector<std::string>{});
}

TEST_CASE(
    "a split declared by devices rules: per-device modes, mixed, counts in NFD and Prometheus",
    "[status][mixed]") {
  Fixture fx("status-mixed");  // 3b:00.0 (NUMA 0) on vfio-pci, 86:00.0 (NUMA 1) on nvidia
  fx.write("etc/hostprep/config.yaml",
           "mode: container\ndevices:\n  - match: {numa: 0}\n    mode: vm-passthrough\n");
  auto o = observeScenario(fx);
  auto j = toJson(o->doc);
  CHECK(j["schemaVersion"] == 2);
  CHECK(j["desiredMode"] == "mixed");
  CHECK(j["desiredSplit"] == nlohmann::ordered_json{{"container", 1}, {"vm-passthrough", 1}});
  CHECK(j["actualMode"] == "mixed");
  CHECK(j["converged"] == true);
  std::map<std::string, std::string> modes;
  for (const auto& d : j["devices"]) modes[d["bdf"]] = d["desiredMode"];
  CHECK(modes == std::map<std::string, std::string>{{"0000:3b:00.0", "vm-passthrough"},
                                                    {"0000:3b:00.1", "vm-passthrough"},
                                                    {"0000:86:00.0", "container"},
                                                    {"0000:86:00.1", "container"}});
  CHECK(j["advertised"]["nvidia.com/gpu"] == 1);
  CHECK(j["advertised"].size() == 2);  // and the passthrough resource of group 30
  CHECK(hostprep::test::validateSchema(schema(), nlohmann::json::parse(j.dump())) ==
        std::vector<std::string>{});
  CHECK(nfdFeatures(o->doc) ==
        "# written by hostprep; see run/hostprep/status.json\n"
        "hostprep.actual-mode=mixed\n"
        "hostprep.desired-mode=mixed\n"
        "hostprep.converged=true\n"
        "hostprep.devices-responsive=true\n"
        "hostprep.gpus.container=1\n"
        "hostprep.gpus.vm-passthrough=1\n");
  const std::string prom = prometheusText(o->doc);
  CHECK_THAT(prom, Catch::Contains("hostprep_desired_gpus{mode=\"container\"} 1\n"
                                   "hostprep_desired_gpus{mode=\"vm-passthrough\"} 1\n"));
  CHECK_THAT(prom, Catch::Contains("hostprep_mode_info{desired=\"mixed\",actual=\"mixed\"} 1\n"));
  // --mode overrides the rules: every GPU to one mode, and the split is off that.
  StatusRequest flag;
  flag.modeOverride = Mode::kVmPassthrough;
  auto f = toJson(observeScenario(fx, flag)->doc);
  CHECK(f["desiredMode"] == "vm-passthrough");
  CHECK(f["desiredSplit"] == nlohmann::ordered_json{{"vm-passthrough", 2}});
  CHECK(f["converged"] == false);
}

TEST_CASE("each device is named after its own vendor and device in pci.ids", "[status]") {
  // Two models of one vendor and one device id under another vendor, twice each: the document
  // looks each vendor:device up once, and never gives one the name of another.
  Fixture fx;
  hostprep::test::expandHostYaml(fx.root(), R"(kernel: 6.1.0-test-amd64
cmdline: intel_iommu=on
modules: [nvidia]
devices:
  - {bdf: "0000:41:00.0", id: "10de:2236", class: "030200", driver: nvidia, group: 1}
  - {bdf: "0000:42:00.0", id: "1234:2236", class: "030200", driver: nvidia, group: 2}
  - {bdf: "0000:43:00.0", id: "10de:20b5", class: "030200", driver: nvidia, group: 3}
  - {bdf: "0000:44:00.0", id: "10de:2236", class: "030200", driver: nvidia, group: 4}
  - {bdf: "0000:45:00.0", id: "1234:2236", class: "030200", driver: nvidia, group: 5}
)");
  RootHost host(fx.root());
  auto s = readSnapshot(host);
  REQUIRE(s);
  const std::string ids =
      "10de  NVIDIA Corporation\n\t20b5  GA100 [A100 PCIe 80GB]\n\t2236  GA102GL [A10]\n"
      "1234  Technical Corp.\n\t2236  Not The A10\n";
  StatusInputs in;
  in.selection.gpuIds = {*parsePciId("10de:2236"), *parsePciId("1234:2236"),
                         *parsePciId("10de:20b5")};
  in.pciIds = ids;
  const auto d = buildStatus(*s, readVgpuHost(host, *s), in);
  std::map<std::string, std::optional<std::string>> names;
  for (const auto& dev : d.devices) names[dev.fn->bdf.str()] = dev.name;
  CHECK(names == std::map<std::string, std::optional<std::string>>{
                     {"0000:41:00.0", "GA102GL [A10]"},
                     {"0000:42:00.0", "Not The A10"},
                     {"0000:43:00.0", "GA100 [A100 PCIe 80GB]"},
                     {"0000:44:00.0", "GA102GL [A10]"},
                     {"0000:45:00.0", "Not The A10"}});
}

// Issue 45, item 4: the document carries the KubeVirt CR's permittedHostDevices entries its
// resources need, to paste into spec.configuration.permittedHostDevices.
namespace {

nlohmann::json permittedOf(const StatusDocument& d) {
  auto j = nlohmann::json::parse(toJson(d).dump());
  CHECK(hostprep::test::validateSchema(schema(), j) == std::vector<std::string>{});
  return j.contains("permittedHostDevices") ? j["permittedHostDevices"] : nlohmann::json();
}

nlohmann::json pciEntry(const std::string& selector, const std::string& resource) {
  return {{"pciVendorSelector", selector},
          {"resourceName", resource},
          {"externalResourceProvider", true}};
}

nlohmann::json mdevEntry(const std::string& selector, const std::string& resource) {
  return {{"mdevNameSelector", selector},
          {"resourceName", resource},
          {"externalResourceProvider", true}};
}

}  // namespace

TEST_CASE("status gives the KubeVirt permittedHostDevices entries of the node's resources",
          "[status][kubevirt]") {
  using hostprep::test::rig::VRig;
  using json = nlohmann::json;
  SECTION("passthrough: one pciHostDevices entry for the two A10s, named as advertised") {
    Fixture fx("status-passthrough-done");
    CHECK(permittedOf(observeScenario(fx)->doc) ==
          json{{"pciHostDevices", {pciEntry("10DE:2236", "nvidia.com/GA102GL_A10")}}});
  }
  SECTION("drifted: the GPUs are still on vfio-pci, so still advertised and still listed") {
    Fixture fx("status-drifted");
    CHECK(permittedOf(observeScenario(fx)->doc) ==
          json{{"pciHostDevices", {pciEntry("10DE:2236", "nvidia.com/GA102GL_A10")}}});
  }
  SECTION("container: nvidia.com/gpu needs no entry, and the section is absent") {
    Fixture fx("status-container");
    CHECK(permittedOf(observeScenario(fx)->doc).is_null());
  }
  SECTION("one A10 on vfio, one on nvidia, no pci.ids: the raw-id resource alone") {
    Fixture fx("status-mixed");
    CHECK(permittedOf(observeScenario(fx)->doc) ==
          json{{"pciHostDevices", {pciEntry("10DE:2236", "nvidia.com/2236")}}});
  }
  SECTION("mdev vGPUs next to a passthrough GPU: both lists, the type name as the kernel has it") {
    VRig r("vgpu-two-a10");
    for (const char* b : {"0000:3b:00.0", "0000:3b:00.1"}) r.modes[*parseBdf(b)] = Mode::kVmVgpu;
    for (const char* b : {"0000:86:00.0", "0000:86:00.1"})
      r.modes[*parseBdf(b)] = Mode::kVmPassthrough;
    r.apply(Mode::kVmVgpu);  // the default config: A10-12Q x 2 on 3b:00.0's VFs
    REQUIRE(r.vgpus().size() == 2);
    auto o = observeScenario(r.fx);
    CHECK(o->doc.advertised ==
          std::map<std::string, int>{{"nvidia.com/2236", 1}, {"nvidia.com/NVIDIA_A10-12Q", 2}});
    CHECK(permittedOf(o->doc) ==
          json{{"pciHostDevices", {pciEntry("10DE:2236", "nvidia.com/2236")}},
               {"mediatedDevices", {mdevEntry("NVIDIA A10-12Q", "nvidia.com/NVIDIA_A10-12Q")}}});
  }
  SECTION("per-VF vGPUs (vGPU 17+): a mediatedDevices entry, one for the two of one type") {
    VRig r("vgpu-h100-pervf");
    r.apply(Mode::kVmVgpu);  // the default config: H100-40C x 2, one per VF
    auto o = observeScenario(r.fx);
    CHECK(permittedOf(o->doc) ==
          json{{"mediatedDevices", {mdevEntry("NVIDIA H100-40C", "nvidia.com/NVIDIA_H100-40C")}}});
  }
  SECTION("two models and a companion in a group of its own: sorted by resource name") {
    Fixture fx;
    hostprep::test::expandHostYaml(fx.root(), R"(kernel: 6.1.0-test-amd64
cmdline: intel_iommu=on
modules: [nvidia, vfio_pci]
devices:
  - {bdf: "0000:41:00.0", id: "10de:2236", class: "030200", driver: vfio-pci, group: 1}
  - {bdf: "0000:41:00.1", id: "10de:1aef", class: "040300", driver: vfio-pci, group: 9}
  - {bdf: "0000:42:00.0", id: "10de:20b5", class: "030200", driver: vfio-pci, group: 2}
  - {bdf: "0000:43:00.0", id: "10de:2236", class: "030200", driver: vfio-pci, group: 3}
  - {bdf: "0000:44:00.0", id: "10de:2236", class: "030200", driver: nvidia, group: 4}
)");
    fx.write("usr/share/misc/pci.ids",
             "10de  NVIDIA Corporation\n\t1aef  GA102 High Definition Audio Controller\n"
             "\t20b5  GA100 [A100 PCIe 80GB]\n\t2236  GA102GL [A10]\n");
    auto o = observeScenario(fx);
    CHECK(o->doc.advertised ==
          std::map<std::string, int>{{"nvidia.com/GA100_A100_PCIE_80GB", 1},
                                     {"nvidia.com/GA102GL_A10", 2},
                                     {"nvidia.com/GA102_HIGH_DEFINITION_AUDIO_CONTROLLER", 1},
                                     {"nvidia.com/gpu", 1}});
    CHECK(permittedOf(o->doc) ==
          json{{"pciHostDevices",
                {pciEntry("10DE:20B5", "nvidia.com/GA100_A100_PCIE_80GB"),
                 pciEntry("10DE:2236", "nvidia.com/GA102GL_A10"),
                 pciEntry("10DE:1AEF", "nvidia.com/GA102_HIGH_DEFINITION_AUDIO_CONTROLLER")}}});
  }
}

TEST_CASE("on every captured real host, one KubeVirt entry per sandbox resource advertised",
          "[status][kubevirt][real]") {
  const auto real = std::filesystem::path(HOSTPREP_FIXTURES_DIR) / "real";
  int hosts = 0, withEntries = 0;
  for (const auto& dir : std::filesystem::directory_iterator(real)) {
    if (!dir.is_directory()) continue;
    const std::string name = dir.path().filename().string();
    INFO(name);
    ++hosts;
    Fixture fx("real/" + name);
    auto o = observeScenario(fx);
    const auto p = permittedOf(o->doc);
    std::set<std::string> sandbox, listed;
    for (const auto& [resource, n] : o->doc.advertised) {
      if (resource != "nvidia.com/gpu") sandbox.insert(resource);
    }
    for (const char* list : {"pciHostDevices", "mediatedDevices"}) {
      if (p.is_null() || !p.contains(list)) continue;
      for (const auto& e : p[list]) CHECK(listed.insert(e["resourceName"]).second);
    }
    CHECK(listed == sandbox);
    // Each PCI selector is the id of a vfio-bound function of the host.
    for (const auto& e : p.is_null() || !p.contains("pciHostDevices") ? nlohmann::json::array()
                                                                      : p["pciHostDevices"]) {
      bool found = false;
      for (const auto& f : o->snapshot.pci) {
        std::string id = toString(f.id);
        for (char& c : id) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        found = found || (id == e["pciVendorSelector"] && f.driver &&
                          f.driver->find("vfio") != std::string::npos);
      }
      CHECK(found);
    }
    if (!listed.empty()) ++withEntries;
  }
  CHECK(hosts >= 9);
  CHECK(withEntries >= 1);
}

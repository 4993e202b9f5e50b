// Observing and publishing: where the desired mode comes from, the one-line summary, and what
// publish writes (the documents themselves: tests/drivers/published/status_test.cpp).
#include "agent/status_writer.hpp"

#include <catch2/catch.hpp>

#include "tests/support/fixture.hpp"

using namespace hostprep;
using hostprep::test::Fixture;

TEST_CASE("the desired mode: --mode, else the config, else the last prepare", "[status]") {
  Fixture fx;
  RootHost host(fx.root());
  StatusRequest r;
  CHECK(desiredMode(host, r) == std::pair<std::optional<Mode>, std::string>{std::nullopt, ""});
  fx.write("run/hostprep/last-mode", "vm-vgpu\n");
  CHECK(desiredMode(host, r) ==
        std::pair<std::optional<Mode>, std::string>{Mode::kVmVgpu, "last-prepare"});
  r.config.mode = Mode::kContainer;
  CHECK(desiredMode(host, r) ==
        std::pair<std::optional<Mode>, std::string>{Mode::kContainer, "config"});
  r.modeOverride = Mode::kVmPassthrough;
  CHECK(desiredMode(host, r) ==
        std::pair<std::optional<Mode>, std::string>{Mode::kVmPassthrough, "flag"});
}

TEST_CASE("the last prepare's split is the desired mode, over its mode, until the config says",
          "[status][mixed]") {
  Fixture fx;
  RootHost host(fx.root());
  fx.write("run/hostprep/last-mode",
           "container\n0000:41:00.0 vm-passthrough\n0000:42:00.0 container\n");
  std::vector<DeviceRule> rules;
  StatusRequest r;
  CHECK(desiredMode(host, r, &rules) ==
        std::pair<std::optional<Mode>, std::string>{Mode::kContainer, "last-prepare"});
  REQUIRE(rules.size() == 2);
  CHECK(rules[0].match.bdf == parseBdf("0000:41:00.0"));
  CHECK(rules[0].mode == Mode::kVmPassthrough);
  // The config's mode wins, with its own rules (none here).
  r.config.mode = Mode::kVmPassthrough;
  CHECK(desiredMode(host, r, &rules).second == "config");
  CHECK(rules.empty());
}

TEST_CASE("a last-mode file of one line (as before splits) gives the mode and no rules",
          "[status][mixed]") {
  Fixture fx;
  RootHost host(fx.root());
  fx.write("run/hostprep/last-mode", "vm-passthrough\n");
  std::vector<DeviceRule> rules{DeviceRule{}};
  CHECK(desiredMode(host, StatusRequest{}, &rules).first == Mode::kVmPassthrough);
  CHECK(rules.empty());
}

TEST_CASE("a corrupt last-mode file: no desired mode in status", "[status][mixed]") {
  Fixture fx;
  RootHost host(fx.root());
  fx.write("run/hostprep/last-mode", "container\nnot an address\n");
  // The status goes on without a desired mode (a warning says why).
  CHECK(desiredMode(host, StatusRequest{}) ==
        std::pair<std::optional<Mode>, std::string>{std::nullopt, ""});
}

TEST_CASE("observe, summarize, publish: the NFD and Prometheus files only where the config says",
          "[status]") {
  Fixture fx("status-passthrough-done");
  RootHost host(fx.root());
  StatusRequest r;
  r.config.mode = Mode::kVmPassthrough;
  r.now = 1714564800;
  auto o = observe(host, r);
  REQUIRE(o);
  CHECK(summary((*o)->doc) ==
        "vm-passthrough (desired vm-passthrough), converged, 4 device(s), advertises "
        "nvidia.com/GA102GL_A10=2");
  // The parent directory is made when missing; no NFD or Prometheus path, no such file.
  REQUIRE(publish(host, **o, r.config, "/srv/status/now.json"));
  CHECK(std::filesystem::exists(fx.path("srv/status/now.json")));
  CHECK_FALSE(std::filesystem::exists(fx.path("etc/kubernetes")));
  r.config.prometheusPath = "/srv/metrics/hostprep.prom";
  REQUIRE(publish(host, **o, r.config, "/srv/status/now.json"));
  CHECK(std::filesystem::exists(fx.path("srv/metrics/hostprep.prom")));
}

TEST_CASE("observe names the VFIO variant driver that modules.alias gives a device", "[status]") {
  // An A10 variant driver among other aliases, the file's last line without its newline. The
  // agent keeps only modules.alias's vfio_pci: lines between events, and looks devices up there.
  Fixture fx("status-passthrough-done");
  fx.write("lib/modules/6.1.0-test-amd64/modules.alias",
           "alias pci:v000010DEd*sv*sd*bc03sc*i* nvidia\n"
           "alias vfio_pci:v*d*sv*sd*bc*sc*i* vfio_pci\n"
           "alias usb:v0BDAp8153d*dc*dsc*dp*ic*isc*ip*in* r8152\n"
           "alias vfio_pci:v000010DEd00002236sv*sd*bc*sc*i* a10_vfio_pci");
  RootHost host(fx.root());
  StaticInputs statics;
  StatusRequest r;
  r.config.mode = Mode::kVmPassthrough;
  r.statics = &statics;
  for (int event = 0; event < 2; ++event) {  // the first reads the file, the second the lines
    CAPTURE(event);
    auto o = observe(host, r);
    REQUIRE(o);
    const StatusDocument& d = (*o)->doc;
    int gpus = 0;
    for (const auto& dev : d.devices) {
      if (dev.fn->id.device == 0x2236) {
        ++gpus;
        CHECK(dev.wantedDriver == std::optional<std::string>("a10-vfio-pci"));
      } else if (dev.fn->id.device == 0x1aef) {
        CHECK(dev.wantedDriver == std::optional<std::string>("vfio-pci"));
      }
    }
    CHECK(gpus == 2);
    CHECK(d.drift().size() == 2);  // both A10s are on vfio-pci, not on their variant driver
    CHECK_FALSE(d.converged);
    CHECK(d.advertised == std::map<std::string, int>{{"nvidia.com/GA102GL_A10", 2}});
  }
  REQUIRE(statics.modulesAlias);
  CHECK(statics.modulesAlias->second ==
        "alias vfio_pci:v*d*sv*sd*bc*sc*i* vfio_pci\n"
        "alias vfio_pci:v000010DEd00002236sv*sd*bc*sc*i* a10_vfio_pci\n");
}

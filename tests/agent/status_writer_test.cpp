// Observing and publishing: where the desired mode comes from, the one-line summary, and what
// publish writes (the documents themselves: tests/drivers/status_test.cpp).
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

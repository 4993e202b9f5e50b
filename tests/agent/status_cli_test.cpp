// status, persist and agent as users run them: read-only or dry runs, on fixture roots.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/support/fixture.hpp"
#include "tests/support/run.hpp"

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

TEST_CASE("status --pci-ids names devices from another file", "[cli][status]") {
  Fixture fx("status-mixed");
  fx.write("elsewhere/pci.ids", "10de  NVIDIA\n\t2236  GA102GL [A10]\n");
  auto r = runHostprep({"--root", fx.root().string(), "--output", "json", "status", "--pci-ids",
                        fx.path("elsewhere/pci.ids").string()});
  REQUIRE(r.exitCode == 0);
  CHECK(nlohmann::json::parse(r.out)["advertised"] ==
        nlohmann::json{{"nvidia.com/GA102GL_A10", 1}, {"nvidia.com/gpu", 1}});
  r = runHostprep({"--root", fx.root().string(), "status", "--pci-ids", "/nonexistent/pci.ids"});
  CHECK(r.exitCode == 2);
  CHECK(r.err ==
        "hostprep status: --pci-ids: cannot read /nonexistent/pci.ids: No such file or directory "
        "(name a readable pci.ids file)\n");
  r = runHostprep({"--root", fx.root().string(), "status", "--write", "../x"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("--write: '../x' is not an absolute file path"));
}

TEST_CASE("a bad config makes status and agent exit 2 naming the key", "[cli][config]") {
  Fixture fx("two-a10");
  fx.write("etc/hostprep/config.yaml", "mode: vm-passthrough\nstatus:\n  path: relative.json\n");
  auto before = fx.deviceState();
  auto r = runHostprep({"--root", fx.root().string(), "status"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(
      r.err,
      Catch::Contains(
          "/etc/hostprep/config.yaml: status.path: 'relative.json' is not an absolute file path"));
  r = runHostprep({"--root", fx.root().string(), "agent", "--once"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("status.path"));
  CHECK(fx.deviceState() == before);
  CHECK_FALSE(std::filesystem::exists(fx.path("run/hostprep")));
}

TEST_CASE("persist --dry-run shows the files and writes nothing", "[cli][persist]") {
  Fixture fx("two-a10");
  auto r = runHostprep(
      {"--root", fx.root().string(), "persist", "--mode", "vm-passthrough", "--dry-run"});
  REQUIRE(r.exitCode == 0);
  CHECK_THAT(r.out, Catch::Contains("/etc/modprobe.d/hostprep-vfio.conf: would write\n"));
  CHECK_THAT(r.out, Catch::Contains("  | options vfio-pci ids=10de:1aef,10de:2236\n"));
  CHECK_THAT(r.out, Catch::Contains("/etc/modules-load.d/hostprep-vfio.conf: would write\n"));
  CHECK_FALSE(std::filesystem::exists(fx.path("etc/modprobe.d")));
  r = runHostprep({"--root", fx.root().string(), "persist", "--mode", "vm-passthrough"});
  REQUIRE(r.exitCode == 0);
  CHECK_THAT(r.out, Catch::Contains("run 'update-initramfs -u'"));
  r = runHostprep({"--root", fx.root().string(), "persist", "--mode", "vm-passthrough"});
  CHECK_THAT(r.out, Catch::Contains("nothing to do"));
  r = runHostprep({"--root", fx.root().string(), "persist"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("--mode is required"));
}

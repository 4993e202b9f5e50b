// hostprep agent as users run it: the command line only (the loop: daemon_test.cpp).
#include <catch2/catch.hpp>

#include "tests/support/fixture.hpp"
#include "tests/support/run.hpp"

using hostprep::test::Fixture;
using hostprep::test::runHostprep;

TEST_CASE("a bad config makes agent --once exit 2 naming the key", "[cli][config]") {
  Fixture fx("two-a10");
  fx.write("etc/hostprep/config.yaml", "mode: vm-passthrough\nstatus:\n  path: relative.json\n");
  auto before = fx.deviceState();
  auto r = runHostprep({"--root", fx.root().string(), "agent", "--once"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("status.path"));
  CHECK(fx.deviceState() == before);
  CHECK_FALSE(std::filesystem::exists(fx.path("run/hostprep")));
}

TEST_CASE("prepare and agent --once on a node already in its split say there is nothing to do",
          "[cli][mixed]") {
  Fixture fx("status-mixed");  // 3b:00.0 (NUMA 0) on vfio-pci, 86:00.0 (NUMA 1) on nvidia
  fx.write("etc/hostprep/config.yaml",
           "mode: container\ndevices:\n  - match: {numa: 0}\n    mode: vm-passthrough\n");
  const auto before = fx.deviceState();
  const std::string line =
      "nothing to do: 4 device(s) already in their modes, mixed (container: 1, vm-passthrough: 1)";
  auto p = runHostprep({"--root", fx.root().string(), "prepare"});
  CHECK(p.exitCode == 0);
  CHECK(p.out == line + "\n");
  auto a = runHostprep({"--root", fx.root().string(), "agent", "--once"});
  CHECK(a.exitCode == 0);
  CHECK_THAT(a.err, Catch::Contains("info: " + line + "\n"));
  CHECK_THAT(a.err, !Catch::Contains("converged to"));
  CHECK(fx.deviceState() == before);
}

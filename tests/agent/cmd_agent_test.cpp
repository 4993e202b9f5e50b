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

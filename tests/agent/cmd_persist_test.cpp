// hostprep persist as users run it: dry runs and runs on fixture roots.
#include <catch2/catch.hpp>

#include "tests/support/fixture.hpp"
#include "tests/support/run.hpp"

using hostprep::test::Fixture;
using hostprep::test::runHostprep;

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

// The small state files under run/hostprep (last-mode, last-selection): written atomically, the
// directory created when missing, a file that already says the same left as it is.
#include "drivers/seam/state_file.hpp"

#include <sys/stat.h>

#include <catch2/catch.hpp>

#include "tests/support/fixture.hpp"

using namespace hostprep;
using hostprep::test::Fixture;

TEST_CASE("a state file is written under a new run/hostprep, and left alone when unchanged",
          "[host][state]") {
  Fixture fx;
  RootHost host(fx.root());
  REQUIRE_FALSE(host.exists(kStateDir));
  REQUIRE(writeStateFile(host, "run/hostprep/last-mode", "container\n"));
  CHECK(host.read("run/hostprep/last-mode").value_or("") == "container\n");
  struct stat dir {};
  REQUIRE(::stat(fx.path("run/hostprep").c_str(), &dir) == 0);
  CHECK((dir.st_mode & 07777) == 0755);
  auto mode = host.ownership("run/hostprep/last-mode");
  REQUIRE(mode);
  CHECK((mode->mode & 07777) == 0644);

  const auto inode = fx.inode("run/hostprep/last-mode");
  REQUIRE(writeStateFile(host, "run/hostprep/last-mode", "container\n"));
  CHECK(fx.inode("run/hostprep/last-mode") == inode);  // the same text: not rewritten
  REQUIRE(writeStateFile(host, "run/hostprep/last-mode", "vm-passthrough\n"));
  CHECK(fx.inode("run/hostprep/last-mode") != inode);
  CHECK(host.read("run/hostprep/last-mode").value_or("") == "vm-passthrough\n");
}

// The command line as users see it: exact messages, exit codes, JSON. Only read-only commands
// (and dry runs) run here, always on fixture roots.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/support/fixture.hpp"
#include "tests/support/run.hpp"

using hostprep::test::Fixture;
using hostprep::test::runHostprep;

TEST_CASE("unknown commands get a suggestion and exit 2", "[cli]") {
  auto r = runHostprep({"prepar"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("unknown command 'prepar'; did you mean 'prepare'?"));
}

TEST_CASE("bad option values name the input and the fix", "[cli]") {
  auto r = runHostprep({"prepare", "--mode", "vm"});
  CHECK(r.exitCode == 2);
  CHECK(r.err ==
        "hostprep prepare: --mode: 'vm' is not a mode (choose one of container, "
        "vm-passthrough, vm-vgpu)\n");
  r = runHostprep({"prepare", "--mode", "container", "--devices", "0000:3b:00.0/../x"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("'0000:3b:00.0/../x' is not a PCI address"));
  r = runHostprep({"prepare", "--mode", "container", "--host-driver", "../evil"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("--host-driver: '../evil' is not a driver name"));
  r = runHostprep({"--output", "yaml", "prepare", "--mode", "container"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("--output: 'yaml' is not a format"));
  r = runHostprep({"prepare"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("--mode is required"));
}

TEST_CASE("prepare --dry-run on two A10s prints the plan as JSON and touches nothing", "[cli]") {
  Fixture fx("two-a10");
  auto before = fx.deviceState();
  // Global options may follow the command.
  auto r = runHostprep({"prepare", "--mode", "vm-passthrough", "--dry-run", "--root",
                        fx.root().string(), "--output", "json"});
  REQUIRE(r.exitCode == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["mode"] == "vm-passthrough");
  CHECK(j["dry_run"] == true);
  std::vector<std::string> bdfs;
  for (const auto& d : j["devices"]) bdfs.push_back(d["bdf"]);
  CHECK(bdfs ==
        std::vector<std::string>{"0000:3b:00.0", "0000:86:00.0", "0000:3b:00.1", "0000:86:00.1"});
  CHECK(j["devices"][2]["role"] == "companion");
  CHECK(j["devices"][0]["from"]["driver"] == "nvidia");
  CHECK(j["steps"].size() == 19);
  CHECK(fx.deviceState() == before);
  CHECK_FALSE(std::filesystem::exists(fx.path("run/hostprep")));
}

TEST_CASE("prepare refuses a group holding the root disk with exit 3", "[cli]") {
  Fixture fx("nvme-shared-group");
  auto r = runHostprep(
      {"--root", fx.root().string(), "prepare", "--mode", "vm-passthrough", "--dry-run"});
  CHECK(r.exitCode == 3);
  CHECK_THAT(r.err,
             Catch::Contains("refusing to give these IOMMU groups to vfio: IOMMU group 12 of "
                             "GPU 0000:03:00.0 holds the root filesystem's disk"));
  CHECK_THAT(r.err, Catch::Contains("--force"));
}

TEST_CASE("prepare on a host with no matching GPU says what it looked for", "[cli]") {
  Fixture fx("two-a10");
  auto r = runHostprep({"--root", fx.root().string(), "prepare", "--mode", "vm-passthrough",
                        "--dry-run", "--gpu-ids", "1234:11e8"});
  CHECK(r.exitCode == 1);
  CHECK_THAT(r.err, Catch::Contains("no device with the given --gpu-ids found on this host"));
}

TEST_CASE("an already prepared node says so", "[cli]") {
  Fixture fx("passthrough-done");
  auto r = runHostprep(
      {"--root", fx.root().string(), "prepare", "--mode", "vm-passthrough", "--dry-run"});
  CHECK(r.exitCode == 0);
  CHECK_THAT(r.out, Catch::Contains("plan for vm-passthrough: 4 device(s), 0 step(s)"));
  CHECK_THAT(r.out, Catch::Contains("(already there)"));
}

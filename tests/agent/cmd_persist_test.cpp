// hostprep persist as users run it: dry runs and runs on fixture roots.
#include <catch2/catch.hpp>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

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
  CHECK(r.err ==
        "hostprep persist: no --mode, and /etc/hostprep/config.yaml names no mode (pass "
        "--mode M, or write mode: M in the config)\n");
}

TEST_CASE("persist --output json: the plan as a document, then the same files written",
          "[cli][persist]") {
  Fixture fx("two-a10");
  auto r = runHostprep({"--root", fx.root().string(), "--output", "json", "persist", "--mode",
                        "vm-passthrough", "--dry-run"});
  REQUIRE(r.exitCode == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["ok"] == true);
  CHECK(j["mode"] == "vm-passthrough");
  CHECK(j["dry_run"] == true);
  CHECK(j["noop"] == false);
  CHECK(j["initramfs_rebuild"] == true);
  nlohmann::json modprobe;
  for (const auto& f : j["files"]) {
    CHECK(f["action"] == "write");
    if (f["path"] == "/etc/modprobe.d/hostprep-vfio.conf") modprobe = f;
  }
  REQUIRE(modprobe.is_object());
  const std::string content = modprobe["content"];
  CHECK_THAT(content, Catch::Contains("options vfio-pci ids=10de:1aef,10de:2236\n"));
  CHECK_FALSE(std::filesystem::exists(fx.path("etc/modprobe.d")));

  // The run writes what the dry run showed, and says so in the same shape.
  r = runHostprep(
      {"--root", fx.root().string(), "--output", "json", "persist", "--mode", "vm-passthrough"});
  REQUIRE(r.exitCode == 0);
  j = nlohmann::json::parse(r.out);
  CHECK(j["ok"] == true);
  CHECK(j["dry_run"] == false);
  std::ifstream written(fx.path("etc/modprobe.d/hostprep-vfio.conf"));
  CHECK(std::string(std::istreambuf_iterator<char>(written), {}) == content);
  r = runHostprep({"--root", fx.root().string(), "--output", "json", "persist", "--mode",
                   "container", "--dry-run"});
  REQUIRE(r.exitCode == 0);
  j = nlohmann::json::parse(r.out);
  for (const auto& f : j["files"]) {
    INFO(f.dump());
    if (f["path"] == "/etc/initramfs-tools/modules") {  // hostprep's block taken out of it
      CHECK(f["action"] == "write");
    } else {
      CHECK(f["action"] == "remove");
      CHECK(f["content"].is_null());
    }
  }

  // An error is a document too.
  r = runHostprep({"--root", fx.root().string(), "--output", "json", "persist"});
  CHECK(r.exitCode == 2);
  j = nlohmann::json::parse(r.out);
  CHECK(j["ok"] == false);
  CHECK(j["error"]["message"] == "no --mode, and /etc/hostprep/config.yaml names no mode");
}

TEST_CASE("persist on a split leaves out the ids GPUs of two modes share",
          "[cli][persist][mixed]") {
  SECTION("a shared id: no ids= line, the unit binds them, and the output says so") {
    Fixture fx("two-a10");
    fx.write("etc/hostprep/config.yaml",
             "mode: container\n"
             "devices:\n"
             "  - match: {bdf: \"0000:3b:00.0\"}\n"
             "    mode: vm-passthrough\n");
    auto r = runHostprep({"--root", fx.root().string(), "persist", "--dry-run"});
    INFO(r.out << r.err);
    REQUIRE(r.exitCode == 0);
    CHECK_THAT(r.out,
               Catch::Contains(
                   "note: vfio-pci ids=: 10de:1aef,10de:2236 left out: GPUs in vm-passthrough and "
                   "container mode share them, and vfio-pci would claim every device with these "
                   "ids at boot; hostprep-prepare.service hands the vm-passthrough ones to "
                   "vfio-pci at boot (driver_override) instead: keep it enabled ('systemctl "
                   "enable hostprep-prepare.service')\n"));
    CHECK(r.out.find("options vfio-pci ids=") == std::string::npos);
    // two-a10 has no hostprep-prepare.service wants link: nothing would bind them at boot.
    CHECK(r.err ==
          "warning: hostprep-prepare.service is not enabled: after a reboot nothing hands the "
          "vm-passthrough GPUs whose ids were left out to vfio-pci (systemctl enable "
          "hostprep-prepare.service)\n");
    CHECK_THAT(r.out, Catch::Contains("  | softdep nvidia pre: vfio-pci\n"));
    CHECK_THAT(r.out, Catch::Contains("  | # Not in ids= (GPUs in container mode share them): "
                                      "10de:1aef,10de:2236;\n"));
    fx.symlink("etc/systemd/system/multi-user.target.wants/hostprep-prepare.service",
               "/etc/systemd/system/hostprep-prepare.service");
    r = runHostprep({"--root", fx.root().string(), "persist"});
    REQUIRE(r.exitCode == 0);
    CHECK(r.err.empty());  // the unit is enabled now
    r = runHostprep({"--root", fx.root().string(), "persist"});
    CHECK_THAT(r.out, Catch::Contains(
                          "nothing to do: boot persistence already matches mixed (container: 1, "
                          "vm-passthrough: 1)\n"));
    // --mode M still means every selected GPU in M.
    r = runHostprep(
        {"--root", fx.root().string(), "persist", "--mode", "vm-passthrough", "--dry-run"});
    CHECK_THAT(r.out, Catch::Contains("  | options vfio-pci ids=10de:1aef,10de:2236\n"));
    CHECK(r.out.find("note:") == std::string::npos);
  }
  SECTION("distinct ids: ids= names only the vm-passthrough GPUs' ids") {
    Fixture fx("preflight-mixed");
    fx.write("etc/hostprep/config.yaml",
             "mode: container\n"
             "devices:\n"
             "  - match: {model: \"10de:26b9\"}\n"
             "    mode: vm-passthrough\n");
    auto r = runHostprep({"--root", fx.root().string(), "persist", "--dry-run"});
    INFO(r.out << r.err);
    REQUIRE(r.exitCode == 0);
    CHECK_THAT(r.out, Catch::Contains("  | options vfio-pci ids=10de:26b9\n"));
    CHECK(r.out.find("note:") == std::string::npos);
  }
  SECTION("the mixes prepare refuses") {
    Fixture fx("preflight-mixed");
    fx.write("etc/hostprep/config.yaml",
             "mode: container\n"
             "devices:\n"
             "  - match: {model: \"10de:26b9\"}\n"
             "    mode: vm-vgpu\n");
    auto r = runHostprep({"--root", fx.root().string(), "persist", "--dry-run"});
    CHECK(r.exitCode == 2);
    CHECK_THAT(r.err, Catch::Contains("container and vm-vgpu cannot share a node"));
    fx.write("etc/hostprep/config.yaml",
             "mode: container\n"
             "devices:\n"
             "  - match: {bdf: \"0000:c1:00.0\"}\n"
             "    mode: vm-passthrough\n");
    r = runHostprep({"--root", fx.root().string(), "persist", "--dry-run"});
    CHECK(r.exitCode == 3);
    CHECK_THAT(r.err, Catch::Contains("share IOMMU group 80"));
    CHECK_FALSE(std::filesystem::exists(fx.path("etc/modprobe.d/hostprep-vfio.conf")));
  }
}

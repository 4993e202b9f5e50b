// Files the user names on the command line, and the one rule they follow: a host file (--config,
// --write, --pci-ids, prepare --vgpu-config) is a host path read under --root, and its error says
// where it looked; check-node's inputs are read on this machine as given.
#include "agent/local_file.hpp"

#include <catch2/catch.hpp>

#include "tests/support/fixture.hpp"
#include "tests/support/run.hpp"

using namespace hostprep;
using hostprep::test::Fixture;
using hostprep::test::runHostprep;

TEST_CASE("a local file is read whole, or its error names it", "[local-file]") {
  Fixture fx;
  fx.write("inputs/nodes.json", std::string(70'000, 'x'));  // more than one read's buffer
  const std::string path = fx.path("inputs/nodes.json").string();
  auto text = readLocalFile(path, 1u << 20);
  REQUIRE(text);
  CHECK(*text == std::string(70'000, 'x'));

  auto big = readLocalFile(path, 1024);
  REQUIRE_FALSE(big);
  CHECK(big.error().message == path + ": larger than 1024 bytes");
  CHECK(big.error().err == EFBIG);
  CHECK(big.error().exit == Exit::kUsage);
  CHECK(readLocalFile(path, 65536).error().message == path + ": larger than 65536 bytes");
  fx.write("inputs/huge", "");
  CHECK(readLocalFile(fx.path("inputs/huge").string(), size_t{1} << 30));

  auto missing = readLocalFile(fx.path("inputs/absent.json").string(), 1024);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().describe() == fx.path("inputs/absent.json").string() +
                                          ": cannot open: No such file or directory (check the "
                                          "path)");
  CHECK(missing.error().exit == Exit::kUsage);

  auto dir = readLocalFile(fx.path("inputs").string(), 1024);
  REQUIRE_FALSE(dir);
  CHECK(dir.error().describe() ==
        fx.path("inputs").string() + ": cannot read: Is a directory (pass a regular file)");
  CHECK(localFileName("-") == "standard input");
  CHECK(localFileName(path) == path);
}

TEST_CASE("a host file is read under --root, and a failed read says where it looked",
          "[local-file]") {
  Fixture fx;
  fx.write("etc/hostprep/vgpu.yaml", "version: v1\n");
  RootHost host(fx.root());
  const std::string root = fx.root().string();
  auto text = readHostFile(host, "--vgpu-config", "/etc/hostprep/vgpu.yaml", 1024);
  REQUIRE(text);
  CHECK(*text == "version: v1\n");

  auto absent = readHostFile(host, "--vgpu-config", "/etc/hostprep/absent.yaml", 1024);
  REQUIRE_FALSE(absent);
  CHECK(absent.error().describe() ==
        "--vgpu-config: cannot read /etc/hostprep/absent.yaml under --root " + root + " (read as " +
            fx.path("etc/hostprep/absent.yaml").string() +
            "): No such file or directory (check the path: a file option names a host path, "
            "under --root)");
  CHECK(absent.error().err == ENOENT);
  CHECK(absent.error().exit == Exit::kUsage);

  auto big = readHostFile(host, "--pci-ids", "/etc/hostprep/vgpu.yaml", 4);
  REQUIRE_FALSE(big);
  CHECK(big.error().message == "--pci-ids: /etc/hostprep/vgpu.yaml under --root " + root +
                                   " (read as " + fx.path("etc/hostprep/vgpu.yaml").string() +
                                   "): larger than 4 bytes");
  CHECK(big.error().exit == Exit::kUsage);

  auto dir = readHostFile(host, "--pci-ids", "/etc/hostprep", 1024);
  REQUIRE_FALSE(dir);
  CHECK_THAT(dir.error().message,
             Catch::StartsWith("--pci-ids: cannot read /etc/hostprep under --root " + root));
  CHECK(dir.error().exit == Exit::kUsage);

  // On the host itself (--root /) the path is the place: nothing to add.
  CHECK(underRoot(RootHost("/"), "/etc/hostprep/vgpu.yaml").empty());
  CHECK(underRoot(host, "/etc/x") ==
        " under --root " + root + " (read as " + fx.path("etc/x").string() + ")");
}

TEST_CASE("file options: one rule, stated in --help", "[local-file][cli]") {
  Fixture fx("vgpu-two-a10");
  const auto before = fx.deviceState();
  const std::string root = fx.root().string();
  fx.write("etc/hostprep/vgpu.yaml",
           "version: v1\nvgpu-configs:\n  A10-4Q:\n    - devices: all\n      vgpu-devices: "
           "{A10-4Q: 6}\n");

  // The host's /etc/hostprep/vgpu.yaml, as --config would find /etc/hostprep/config.yaml.
  auto r =
      runHostprep({"--root", root, "prepare", "--mode", "vm-vgpu", "--dry-run", "--vgpu-config",
                   "/etc/hostprep/vgpu.yaml", "--vgpu-config-name", "A10-4Q"});
  CHECK(r.exitCode == 0);
  CHECK_THAT(r.out, Catch::Contains("advertises nvidia.com/NVIDIA_A10-4Q: 12"));

  // Not there: the error names the path, the root and the file it read; exit 2, nothing touched.
  r = runHostprep({"--root", root, "prepare", "--mode", "vm-vgpu", "--vgpu-config",
                   "/etc/hostprep/absent.yaml"});
  CHECK(r.exitCode == 2);
  CHECK(r.err ==
        "hostprep prepare: --vgpu-config: cannot read /etc/hostprep/absent.yaml under "
        "--root " +
            root + " (read as " + root +
            "/etc/hostprep/absent.yaml): No such file or directory (check the path: a "
            "file option names a host path, under --root)\n");
  // The path of the file on this machine is not a host path: looked for under --root, not found.
  r = runHostprep({"--root", root, "prepare", "--mode", "vm-vgpu", "--dry-run", "--vgpu-config",
                   fx.path("etc/hostprep/vgpu.yaml").string()});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("under --root " + root + " (read as " + root + root));

  // A relative path is bad input (exit 2), as --config's is: the current directory is not the
  // host's.
  r = runHostprep({"--root", root, "prepare", "--mode", "vm-vgpu", "--vgpu-config", "vgpu.yaml"});
  CHECK(r.exitCode == 2);
  CHECK(r.err ==
        "hostprep prepare: --vgpu-config: 'vgpu.yaml' is not an absolute file path (write a "
        "file's absolute path under --root, without '..', e.g. /vgpu.yaml)\n");
  r = runHostprep({"--root", root, "status", "--pci-ids", "share/misc/pci.ids"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err,
             Catch::Contains("--pci-ids: 'share/misc/pci.ids' is not an absolute file path"));
  r = runHostprep({"--root", root, "status", "--pci-ids", "/usr/../etc/pci.ids"});
  CHECK(r.exitCode == 2);
  r = runHostprep({"--root", root, "status", "--pci-ids", "/nope/pci.ids"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("--pci-ids: cannot read /nope/pci.ids under --root " + root));
  CHECK(fx.deviceState() == before);

  auto help = runHostprep({"--help"});
  CHECK(help.exitCode == 0);
  CHECK_THAT(help.out, Catch::Contains("is a host path: absolute, read and written under --root"));
  CHECK_THAT(help.out, Catch::Contains("check-node's FILEs are cluster\ndocuments, read on this"));
}

TEST_CASE("check-node's files are read on this machine as given, whatever --root",
          "[local-file][cli]") {
  Fixture fx;
  const std::string nodes = std::string(HOSTPREP_FIXTURES_DIR) + "/cluster/clean/nodes.json";
  auto r = runHostprep({"--root", fx.root().string(), "check-node", nodes});
  CHECK(r.exitCode == 0);
  r = runHostprep({"--root", fx.root().string(), "check-node", fx.path("absent.json").string()});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains(fx.path("absent.json").string() + ": cannot open"));
}

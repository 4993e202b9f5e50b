// hostprep's command table as users see it: the list of commands, a typo's suggestion, and
// check-node, run as an executable of its own.
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "tests/support/run.hpp"

namespace fs = std::filesystem;
using hostprep::test::runExecutable;
using hostprep::test::runHostprep;

namespace {

// A directory the tests may execute copies of hostprep from: the build tree's (a TMPDIR or
// /dev/shm may be mounted noexec).
fs::path scratchDir() {
  std::string tmpl = (fs::path(HOSTPREP_BINARY).parent_path() / "main-test-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  return tmpl;
}

}  // namespace

TEST_CASE("unknown commands get a suggestion and exit 2", "[cli]") {
  auto r = runHostprep({"prepar"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("unknown command 'prepar'; did you mean 'prepare'?"));
}

// The option parser's own errors: one "hostprep <command>:" prefix, the help of that command.
TEST_CASE("an unknown or repeated option names it once and points at the right help", "[cli]") {
  auto r = runHostprep({"status", "--bogus"});
  CHECK(r.exitCode == 2);
  CHECK(r.err == "hostprep status: unrecognised option '--bogus' (see 'hostprep status --help')\n");
  r = runHostprep({"--root", "/", "--root", "/", "status"});
  CHECK(r.exitCode == 2);
  CHECK(r.err ==
        "hostprep: option '--root' cannot be specified more than once (see 'hostprep --help')\n");
}

// A typo in --root, or a pod without its host mount: exit 2 naming --root before the command
// reads or writes anything under it. The agent would otherwise retry for ever (and make its
// state directory under the typo), and prepare would make its lock there.
TEST_CASE("a --root that is not a directory exits 2 and creates nothing", "[cli]") {
  const fs::path dir = scratchDir();
  const fs::path missing = dir / "missing";
  const fs::path file = dir / "file";
  std::ofstream(file) << "not a root\n";
  const std::string advice =
      " (pass the root of a host (/), of a mounted image, or the host's / as a pod mounts it "
      "(e.g. /host))\n";

  auto r = runHostprep({"--root", missing.string(), "status"});
  CHECK(r.exitCode == 2);
  CHECK(r.err == "hostprep status: --root: cannot use '" + missing.string() +
                     "': No such file or directory" + advice);
  r = runHostprep({"preflight", "--root", file.string()});
  CHECK(r.exitCode == 2);
  CHECK(r.err == "hostprep preflight: --root: '" + file.string() + "' is not a directory" + advice);
  r = runHostprep({"--root", missing.string(), "prepare", "--mode", "vm-passthrough"});
  CHECK(r.exitCode == 2);
  r = runExecutable("/usr/bin/timeout",
                    {"20", HOSTPREP_BINARY, "--root", missing.string(), "agent"});
  CHECK(r.exitCode == 2);  // 124: still running after 20 s
  CHECK_THAT(r.err, Catch::StartsWith("hostprep agent: --root: cannot use"));
  CHECK_FALSE(fs::exists(missing));

  r = runHostprep({"--output", "json", "--root", missing.string(), "status"});
  CHECK(r.exitCode == 2);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["ok"] == false);
  CHECK(j["error"]["message"] == "--root: cannot use '" + missing.string() + "'");
  CHECK(j["error"]["errno"] == ENOENT);

  // Help needs no host, and check-node reads none.
  r = runHostprep({"--root", missing.string(), "status", "--help"});
  CHECK(r.exitCode == 0);
  CHECK_THAT(r.out, Catch::StartsWith("usage: hostprep status"));
  r = runHostprep({"--root", missing.string(), "check-node", "--operands"});
  CHECK(r.exitCode == 0);
  fs::remove_all(dir);
}

// A --root that is a directory but not a running host (an empty directory, a mounted image, a
// pod whose /host has no /sys under it): the commands that read or move devices exit 2 naming
// --root before they take the lock or write anything; preflight reads it, for --image.
TEST_CASE("a --root without sys/bus/pci/devices exits 2 and creates nothing", "[cli]") {
  const fs::path dir = scratchDir();
  const fs::path root = dir / "image";
  fs::create_directories(root / "etc");
  const std::string message = "--root: '" + root.string() +
                              "' is not the root of a running Linux host: it has no " +
                              (root / "sys/bus/pci/devices").string();
  const std::string advice =
      " (pass /, or the host's / as a pod mounts it with /sys under it (e.g. /host); to check an "
      "image root, use 'hostprep preflight --image')\n";

  auto r = runHostprep({"--root", root.string(), "status"});
  CHECK(r.exitCode == 2);
  CHECK(r.err == "hostprep status: " + message + advice);
  r = runHostprep({"--root", root.string(), "prepare", "--mode", "vm-passthrough"});
  CHECK(r.exitCode == 2);
  CHECK(r.err == "hostprep prepare: " + message + advice);
  r = runHostprep({"--root", root.string(), "persist", "--mode", "vm-passthrough", "--dry-run"});
  CHECK(r.exitCode == 2);
  CHECK(r.err == "hostprep persist: " + message + advice);
  r = runExecutable("/usr/bin/timeout", {"20", HOSTPREP_BINARY, "--root", root.string(), "agent"});
  CHECK(r.exitCode == 2);  // 124: still retrying after 20 s
  CHECK(r.err == "hostprep agent: " + message + advice);
  r = runHostprep({"--output", "json", "--root", root.string(), "status"});
  CHECK(r.exitCode == 2);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["ok"] == false);
  CHECK(j["error"]["message"] == message);
  // Nothing made under it: no lock, no run/hostprep.
  CHECK(std::distance(fs::recursive_directory_iterator(root), {}) == 1);

  // preflight reads such a root: as an image with --image, and as a host that lacks everything
  // without it (its checks say what is missing).
  r = runHostprep({"--root", root.string(), "preflight", "--image", "--mode", "vm-passthrough"});
  CHECK(r.exitCode == 1);
  CHECK_THAT(r.out, Catch::Contains("NOT READY for vm-passthrough"));
  r = runHostprep({"--root", root.string(), "preflight", "--mode", "vm-passthrough"});
  CHECK(r.exitCode == 1);
  CHECK_THAT(r.out, Catch::Contains("cannot read the PCI devices and IOMMU groups"));
  fs::remove_all(dir);
}

// check-node is an executable of its own (hostprep-check-node) that `hostprep check-node` runs
// with the user's whole command line: global options, standard input and exit code included.
TEST_CASE("hostprep check-node runs hostprep-check-node with the whole command line", "[cli]") {
  const std::string nodes = R"({"kind": "NodeList", "items": [{"kind": "Node",
    "metadata": {"name": "n1", "labels": {"nvidia.com/gpu.workload.config": "vm-passthrough"}},
    "status": {"allocatable": {"nvidia.com/gpu": "1"}}}]})";
  const fs::path dir = scratchDir();
  const fs::path file = dir / "nodes.json";
  std::ofstream(file) << nodes;
  auto r = runHostprep({"--output", "json", "check-node", file.string()});
  CHECK(r.exitCode == 1);  // errors found
  auto doc = nlohmann::json::parse(r.out);
  CHECK(doc["schema"] == "hostprep.check-node/v1");
  CHECK(doc["summary"]["with_errors"] == 1);
  // A usage error is the helper's, with its exit code.
  r = runHostprep({"check-node", "--no-such-option"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("hostprep check-node:"));
  fs::remove_all(dir);
}

TEST_CASE("hostprep finds hostprep-check-node in an install's libexec, or says where it looked",
          "[cli]") {
  const fs::path dir = scratchDir();
  const fs::path helper = fs::path(HOSTPREP_BINARY).parent_path() / "hostprep-check-node";
  REQUIRE(fs::exists(helper));

  // A hostprep alone: exit 1, the places it looked, the fix; with --output json a document too.
  fs::create_directories(dir / "alone");
  fs::copy_file(HOSTPREP_BINARY, dir / "alone/hostprep");
  auto r = runExecutable((dir / "alone/hostprep").string(), {"check-node", "x.json"});
  CHECK(r.exitCode == 1);
  CHECK_THAT(r.err, Catch::Contains("cannot run hostprep-check-node (tried " +
                                    (dir / "alone/hostprep-check-node").string() + ", " +
                                    (dir / "libexec/hostprep/hostprep-check-node").string()));
  CHECK_THAT(r.err, Catch::Contains("No such file or directory"));
  CHECK_THAT(r.err, Catch::Contains("libexec/hostprep"));
  r = runExecutable((dir / "alone/hostprep").string(), {"--output", "json", "check-node", "x"});
  CHECK(r.exitCode == 1);
  auto doc = nlohmann::json::parse(r.out);
  CHECK(doc["ok"] == false);
  CHECK(doc["error"]["errno"] == ENOENT);
  // Every other command still runs.
  CHECK(runExecutable((dir / "alone/hostprep").string(), {"--version"}).exitCode == 0);

  // The install's layout: usr/sbin/hostprep and usr/libexec/hostprep/hostprep-check-node.
  fs::create_directories(dir / "usr/sbin");
  fs::create_directories(dir / "usr/libexec/hostprep");
  fs::copy_file(HOSTPREP_BINARY, dir / "usr/sbin/hostprep");
  fs::copy_file(helper, dir / "usr/libexec/hostprep/hostprep-check-node");
  r = runExecutable((dir / "usr/sbin/hostprep").string(), {"check-node", "--help"});
  CHECK(r.exitCode == 0);
  CHECK_THAT(r.out, Catch::StartsWith("usage: hostprep check-node FILE..."));
  fs::remove_all(dir);
}

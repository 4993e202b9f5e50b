// hostprep agent as users run it: the command line only (the loop: daemon_test.cpp).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

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

namespace {

// The "THP_enabled:" line of /proc/PID/status (proc(5), Linux 5.0): 0 once the process has
// PR_SET_THP_DISABLE; empty when the line is absent.
std::string thpEnabled(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("THP_enabled:", 0) == 0) {
      std::istringstream v(line.substr(12));
      std::string word;
      v >> word;
      return word;
    }
  }
  return {};
}

}  // namespace

TEST_CASE("the running agent takes no transparent huge pages", "[cli][agent][memory]") {
  Fixture fx("two-a10");
  // No config and no --mode: the agent observes only, and never writes to a device.
  const std::string root = fx.root().string();
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::execl(HOSTPREP_BINARY, HOSTPREP_BINARY, "--root", root.c_str(), "--log-level", "error",
            "agent", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // The agent is in its loop once it has published its first status.
  const auto status = fx.path("run/hostprep/status.json");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!std::filesystem::exists(status) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const bool published = std::filesystem::exists(status);
  const std::string thp = thpEnabled(pid);
  ::kill(pid, SIGTERM);
  int ws = 0;
  REQUIRE(::waitpid(pid, &ws, 0) == pid);
  REQUIRE(published);
  CHECK(thp == "0");
  CHECK(WIFEXITED(ws));
  CHECK(WEXITSTATUS(ws) == 0);
}

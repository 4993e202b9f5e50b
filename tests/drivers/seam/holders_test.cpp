// Holders (drivers/seam/holders.cpp): processes with a matching device node open, found by scanning
// <root>/proc/*/fd the way fuser does.
#include "drivers/seam/holders.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>

#include "tests/support/fixture.hpp"

using namespace hostprep;
using hostprep::test::Fixture;

namespace {

std::vector<std::string> described(const std::vector<Holder>& hs) {
  std::vector<std::string> out;
  for (const auto& h : hs) out.push_back(h.describe());
  return out;
}

}  // namespace

TEST_CASE("holders are the processes with a node open that a glob matches", "[holders]") {
  Fixture fx;
  fx.write("proc/4242/comm", "nvidia-persistenced\n");
  fx.symlink("proc/4242/fd/3", "/dev/nvidia0");
  fx.symlink("proc/4242/fd/4", "/dev/nvidiactl");
  fx.write("proc/777/comm", "qemu-system-x86\n");
  fx.symlink("proc/777/fd/0", "/dev/null");
  fx.symlink("proc/777/fd/9", "/dev/vfio/30");
  fx.symlink("proc/778/fd/1", "/dev/vfio/31");      // no comm: named '?'
  fx.symlink("proc/779/fd/1", "/var/dev/vfio/30");  // not a /dev node
  fx.write("proc/self/comm", "bash\n");             // not a pid
  fx.write("proc/880/comm", "gone\n");              // no fd directory: gone or not ours to see
  fx.symlink("proc/" + std::to_string(::getpid()) + "/fd/5", "/dev/nvidia0");  // ourselves
  RootHost host(fx.root());

  CHECK(described(findHolders(host, {"/dev/nvidia*"})) ==
        std::vector<std::string>{"pid 4242 (nvidia-persistenced) holds /dev/nvidia0",
                                 "pid 4242 (nvidia-persistenced) holds /dev/nvidiactl"});
  // FNM_PATHNAME: '*' does not cross a '/'.
  CHECK(findHolders(host, {"/dev/*"}).size() == 3);
  CHECK(described(findHolders(host, {"/dev/vfio/30", "/dev/vfio/31"})) ==
        std::vector<std::string>{"pid 777 (qemu-system-x86) holds /dev/vfio/30",
                                 "pid 778 (?) holds /dev/vfio/31"});
  CHECK(findHolders(host, {"/dev/vfio/60"}).empty());
  CHECK(findHolders(host, {}).empty());
}

TEST_CASE("a root without /proc has no holders", "[holders]") {
  Fixture fx;
  RootHost host(fx.root());
  CHECK(findHolders(host, {"/dev/nvidia*"}).empty());
}

TEST_CASE("the scan and the match in two halves: every /dev descriptor once, then the globs",
          "[holders]") {
  Fixture fx;
  fx.write("proc/4242/comm", "nvidia-persistenced\n");
  fx.symlink("proc/4242/fd/3", "/dev/nvidia0");
  fx.symlink("proc/4242/fd/7", "/tmp/log");  // not a device node: not kept
  fx.write("proc/777/comm", "qemu-system-x86\n");
  fx.symlink("proc/777/fd/9", "/dev/vfio/30");
  fx.symlink("proc/" + std::to_string(::getpid()) + "/fd/5", "/dev/vfio/30");  // ourselves
  RootHost host(fx.root());
  const auto open = openDeviceNodes(host);
  REQUIRE(open.size() == 2);
  for (const auto& glob : {"/dev/nvidia*", "/dev/vfio/30", "/dev/*", "/dev/vfio/31"}) {
    CHECK(described(holdersAmong(host, open, {glob})) == described(findHolders(host, {glob})));
  }
  // The comm is read at the match: a process that changed its name since the scan shows the new.
  fx.write("proc/777/comm", "qemu-kvm\n");
  CHECK(described(holdersAmong(host, open, {"/dev/vfio/30"})) ==
        std::vector<std::string>{"pid 777 (qemu-kvm) holds /dev/vfio/30"});
  // What was opened after the scan is not in it: the scan is the moment the run looked.
  fx.symlink("proc/4242/fd/8", "/dev/vfio/30");
  CHECK(holdersAmong(host, open, {"/dev/vfio/30"}).size() == 1);
  CHECK(findHolders(host, {"/dev/vfio/30"}).size() == 2);
}

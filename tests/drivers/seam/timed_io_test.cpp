// Timed reads and writes of kernel attributes (drivers/seam/timed_io.cpp, under RootHost::readAttr
// and writeAttr): each in a child that shares hostprep's memory, blocks every signal and keeps
// none of its descriptors; one the kernel does not answer is left behind and reaped later.
#include "drivers/seam/timed_io.hpp"

#include <fcntl.h>
#include <linux/kcmp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <vector>

#include "drivers/seam/host.hpp"
#include "tests/support/fixture.hpp"

using namespace hostprep;
using hostprep::test::Fixture;

TEST_CASE("a timed attribute read returns the text, or the errno of the read", "[host]") {
  Fixture fx;
  fx.write("sys/bus/pci/devices/0000:01:00.0/driver_override", "vfio-pci\n");
  RootHost host(fx.root());
  auto r = host.readAttr("sys/bus/pci/devices/0000:01:00.0/driver_override",
                         std::chrono::milliseconds(2000));
  REQUIRE(r);
  CHECK(*r == "vfio-pci\n");
  auto missing = host.readAttr("sys/bus/pci/devices/0000:01:00.0/sriov_numvfs",
                               std::chrono::milliseconds(2000));
  REQUIRE_FALSE(missing);
  CHECK(missing.error().err == ENOENT);
  CHECK_THAT(missing.error().message, Catch::Contains("sriov_numvfs"));
  fx.write("big", std::string(5000, 'x'));
  auto big = host.readAttr("big", std::chrono::milliseconds(2000));
  REQUIRE_FALSE(big);
  CHECK(big.error().err == EFBIG);
  auto bad = host.readAttr("../etc/passwd", std::chrono::milliseconds(2000));
  REQUIRE_FALSE(bad);
  CHECK(bad.error().err == EINVAL);
}

TEST_CASE("a timed write the kernel answers late is reaped, not left a zombie", "[host]") {
  // open(O_WRONLY) of a FIFO waits for a reader: a write that "does not return".
  Fixture fx;
  const auto fifo = fx.path("stuck");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  RootHost host(fx.root());
  const size_t before = reapStrayChildren();
  auto w = host.writeAttr("stuck", "1", std::chrono::milliseconds(100));
  REQUIRE_FALSE(w);
  CHECK(w.error().err == ETIMEDOUT);
  CHECK(reapStrayChildren() == before + 1);  // still waiting
  // The "kernel" lets it go: a reader appears, the child writes and exits.
  int rd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  REQUIRE(rd >= 0);
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (reapStrayChildren() != before && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::close(rd);
  CHECK(reapStrayChildren() == before);
  // No zombie left among our children.
  int status = 0;
  CHECK(::waitpid(-1, &status, WNOHANG) <= 0);
}

namespace {

// The children of the calling thread (proc(5): /proc/PID/task/TID/children).
std::vector<pid_t> myChildren() {
  std::ifstream f("/proc/self/task/" + std::to_string(::gettid()) + "/children");
  std::vector<pid_t> out;
  for (pid_t p = 0; f >> p;) out.push_back(p);
  return out;
}

// Waits until every stray child has been reaped (at most 5 s); false when one is left.
bool reapAllStrays(size_t before) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (reapStrayChildren() != before && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return reapStrayChildren() == before;
}

}  // namespace

TEST_CASE("a timed write's child shares hostprep's memory and runs with every signal blocked",
          "[host]") {
  // A fork would copy the address space for every write; the child is a clone(CLONE_VM) instead.
  Fixture fx;
  const auto fifo = fx.path("stuck");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  RootHost host(fx.root());
  const size_t before = reapStrayChildren();
  const auto others = myChildren();
  auto w = host.writeAttr("stuck", "1", std::chrono::milliseconds(100));
  REQUIRE_FALSE(w);
  CHECK(w.error().err == ETIMEDOUT);
  std::vector<pid_t> fresh;
  for (pid_t p : myChildren()) {
    if (std::find(others.begin(), others.end(), p) == others.end()) fresh.push_back(p);
  }
  REQUIRE(fresh.size() == 1);
  const pid_t child = fresh[0];
  // kcmp(2) KCMP_VM: 0 when both processes use one address space.
  long same = ::syscall(SYS_kcmp, ::getpid(), child, KCMP_VM, 0, 0);
  if (same < 0 && errno == ENOSYS) {
    WARN("kcmp(2) is not available (CONFIG_KCMP): the shared address space is not checked");
  } else {
    CHECK(same == 0);
  }
  std::ifstream st("/proc/" + std::to_string(child) + "/status");
  std::string line, blocked;
  while (std::getline(st, line)) {
    if (line.rfind("SigBlk:", 0) == 0) blocked = line.substr(7);
  }
  const unsigned long long mask = std::stoull(blocked, nullptr, 16);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGCHLD, SIGUSR1}) {
    INFO("signal " << sig << ", SigBlk " << blocked);
    CHECK((mask >> (sig - 1) & 1) == 1);
  }
  int rd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  REQUIRE(rd >= 0);
  CHECK(reapAllStrays(before));
  ::close(rd);
}

TEST_CASE("a timed write that fails after its timeout leaves the caller's errno alone", "[host]") {
  // The child shares hostprep's memory, errno included: it must not set it, not even when its
  // write fails long after hostprep stopped waiting. A FIFO that another process keeps full blocks
  // the child's write; that process's exit, the last reader gone, fails it with EPIPE. (The
  // reader lives in another process because the child inherits a copy of every descriptor open
  // here, as a forked child would.)
  Fixture fx;
  const auto fifo = fx.path("full");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  int ready[2], go[2];
  REQUIRE(::pipe(ready) == 0);
  REQUIRE(::pipe(go) == 0);
  pid_t reader = ::fork();
  REQUIRE(reader >= 0);
  if (reader == 0) {
    int rd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
    int fill = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    char chunk[4096] = {};
    while (rd >= 0 && fill >= 0 && ::write(fill, chunk, sizeof chunk) > 0) {
    }
    if (fill >= 0) ::close(fill);
    char c = rd >= 0 ? 'y' : 'n';
    (void)!::write(ready[1], &c, 1);
    (void)!::read(go[0], &c, 1);
    ::_exit(0);
  }
  char c = 0;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  REQUIRE(c == 'y');
  RootHost host(fx.root());
  const size_t before = reapStrayChildren();
  auto w = host.writeAttr("full", "1", std::chrono::milliseconds(100));
  REQUIRE_FALSE(w);
  CHECK(w.error().err == ETIMEDOUT);
  REQUIRE(reapStrayChildren() == before + 1);
  errno = 4242;
  c = 'x';
  (void)!::write(go[1], &c, 1);
  int status = 0;
  while (::waitpid(reader, &status, 0) < 0 && errno == EINTR) {
  }
  const bool reaped = reapAllStrays(before);  // the child's write failed with EPIPE meanwhile
  const int after = errno;
  for (int fd : {ready[0], ready[1], go[0], go[1]}) ::close(fd);
  CHECK(reaped);
  CHECK(after == 4242);
}

TEST_CASE("timed writes from many threads at once each land whole", "[host]") {
  // The executor's lanes write at the same time, each through a child of its own.
  Fixture fx;
  RootHost host(fx.root());
  constexpr int kThreads = 8;
  for (int t = 0; t < kThreads; ++t) fx.write("attr" + std::to_string(t), "");
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        // Longer than a page on some rounds: the child's buffer follows the data.
        const std::string data(i % 5 == 0 ? 10000 : 1, static_cast<char>('a' + t));
        if (!host.writeAttr("attr" + std::to_string(t), data, std::chrono::milliseconds(5000)))
          ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(failures.load() == 0);
  for (int t = 0; t < kThreads; ++t) {
    auto r = host.read("attr" + std::to_string(t));
    REQUIRE(r);
    // sysfs-style writes at offset 0: the 10,000-byte ones whole, the 1-byte ones over them.
    CHECK(*r == std::string(10000, static_cast<char>('a' + t)));
  }
  int status = 0;
  CHECK(::waitpid(-1, &status, WNOHANG) <= 0);  // every child reaped
}

TEST_CASE("a timed write the kernel keeps holds none of hostprep's descriptors", "[host]") {
  // The run lock, taken before a write that does not return (open(O_WRONLY) of a FIFO waits for
  // a reader), must be free once hostprep lets go of it, although the write's child is still
  // waiting; and a pipe hostprep writes to must reach its end when hostprep closes it, as
  // `$(hostprep ...)` and `hostprep ... | tee` wait for.
  Fixture fx;
  const auto fifo = fx.path("stuck");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  RootHost host(fx.root());
  REQUIRE(host.makeDirs("run/hostprep", 0700));
  int out[2];
  REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
  const size_t before = reapStrayChildren();
  {
    auto lock = host.tryLock("run/hostprep/lock");
    REQUIRE(lock);
    auto w = host.writeAttr("stuck", "1", std::chrono::milliseconds(100));
    REQUIRE_FALSE(w);
    CHECK(w.error().err == ETIMEDOUT);
  }
  ::close(out[1]);
  REQUIRE(reapStrayChildren() == before + 1);  // still waiting
  CHECK(host.tryLock("run/hostprep/lock"));
  pollfd p{out[0], POLLIN, 0};
  CHECK(::poll(&p, 1, 0) == 1);  // the end of the pipe: no writer left (POLLHUP)
  CHECK((p.revents & POLLHUP) != 0);
  ::close(out[0]);
  int rd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  REQUIRE(rd >= 0);
  CHECK(reapAllStrays(before));
  ::close(rd);
}

namespace {

// A process's state letter from /proc/PID/stat ('T': stopped, 'Z': exited, not yet reaped).
char procState(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() ? '?' : stat[close + 2];
}

}  // namespace

TEST_CASE("a timed read of an attribute an earlier read still waits on starts no second child",
          "[host]") {
  // A read that "does not return", as a read of a device's uevent does while an unbind holds its
  // lock: a timed read given up at once (timeout 0) whose child is then stopped (SIGSTOP reaches
  // it, every other signal is blocked). Reading the attribute again must not pile up children
  // (the agent re-reads at every event). Timed reads open with O_NONBLOCK, so a FIFO cannot
  // stand in for the kernel here, and the child may finish before it is stopped: tried again.
  Fixture fx;
  fx.write("uevent", "DRIVER=nvidia\n");
  fx.write("other", "x\n");
  RootHost host(fx.root());
  const size_t before = reapStrayChildren();
  pid_t stopped = -1;
  for (int attempt = 0; attempt < 200 && stopped < 0; ++attempt) {
    const auto others = myChildren();
    auto r = host.readAttr("uevent", std::chrono::milliseconds(0));
    if (r) continue;  // the child answered in time
    REQUIRE(r.error().err == ETIMEDOUT);
    for (pid_t p : myChildren()) {
      if (std::find(others.begin(), others.end(), p) != others.end()) continue;
      ::kill(p, SIGSTOP);
      for (int i = 0; i < 100 && procState(p) != 'T' && procState(p) != 'Z'; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (procState(p) == 'T') stopped = p;
    }
    if (stopped < 0) REQUIRE(reapAllStrays(before));
  }
  if (stopped < 0) {
    WARN("the timed read's child always finished before it could be stopped: not checked");
    return;
  }
  REQUIRE(reapStrayChildren() == before + 1);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i) {
    auto again = host.readAttr("uevent", std::chrono::seconds(10));
    REQUIRE_FALSE(again);
    CHECK(again.error().err == ETIMEDOUT);
    CHECK_THAT(again.error().message, Catch::Contains("an earlier read of it has not returned"));
  }
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));  // answered at once
  CHECK(reapStrayChildren() == before + 1);
  // Another attribute is read as usual.
  auto other = host.readAttr("other", std::chrono::milliseconds(2000));
  REQUIRE(other);
  CHECK(*other == "x\n");
  // The "kernel" lets go: the child reads and exits; the attribute is read again.
  ::kill(stopped, SIGCONT);
  CHECK(reapAllStrays(before));
  auto now = host.readAttr("uevent", std::chrono::milliseconds(2000));
  REQUIRE(now);
  CHECK(*now == "DRIVER=nvidia\n");
}

// Files hostprep owns are replaced atomically: a reader never sees a torn or missing file.
#include "drivers/host.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "tests/support/fixture.hpp"

using namespace hostprep;
using hostprep::test::Fixture;

TEST_CASE("a concurrent reader never sees a torn or missing status file", "[host][atomic]") {
  Fixture fx;
  RootHost host(fx.root());
  REQUIRE(host.makeDirs("run/hostprep", 0755));
  auto doc = [](int i) {
    // Sizes differ a lot between rewrites, so a torn read would show as a parse error.
    nlohmann::json j{{"n", i}, {"pad", std::string(static_cast<size_t>((i % 7) * 3000 + 1), 'x')}};
    return j.dump();
  };
  REQUIRE(host.writeFileAtomic("run/hostprep/status.json", doc(0)));
  constexpr int kRewrites = 1000;
  std::atomic<bool> done{false};
  std::atomic<int> reads{0}, bad{0};
  std::string firstBad;
  std::thread reader([&] {
    const auto path = fx.path("run/hostprep/status.json");
    while (!done.load()) {
      std::ifstream f(path);
      if (!f) {
        if (bad++ == 0) firstBad = "missing";
        continue;
      }
      std::stringstream ss;
      ss << f.rdbuf();
      auto j = nlohmann::json::parse(ss.str(), nullptr, false);
      if (j.is_discarded() || j["pad"].get<std::string>().size() % 3000 != 1) {
        if (bad++ == 0) firstBad = ss.str().substr(0, 80);
      }
      ++reads;
    }
  });
  for (int i = 1; i <= kRewrites; ++i) {
    REQUIRE(host.writeFileAtomic("run/hostprep/status.json", doc(i)));
  }
  done = true;
  reader.join();
  INFO("first bad read: " << firstBad);
  CHECK(bad.load() == 0);
  CHECK(reads.load() > 0);
  // No temporary files are left behind.
  CHECK(host.list("run/hostprep")->size() == 1);
}

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

TEST_CASE("ownership reads owner and mode through links, ENOENT when absent", "[host]") {
  Fixture fx;
  RootHost host(fx.root());
  fx.write("etc/hostprep/config.yaml", "mode: container\n");
  REQUIRE(::chmod(fx.path("etc/hostprep/config.yaml").c_str(), 0640) == 0);
  fx.symlink("etc/hostprep/link.yaml", "config.yaml");
  for (const char* p : {"etc/hostprep/config.yaml", "/etc/hostprep/link.yaml"}) {
    INFO(p);
    auto o = host.ownership(p);
    REQUIRE(o);
    CHECK(o->owner == ::geteuid());
    CHECK((o->mode & 07777) == 0640);
    CHECK(S_ISREG(o->mode));
  }
  auto none = host.ownership("etc/hostprep/absent.yaml");
  REQUIRE_FALSE(none);
  CHECK(none.error().err == ENOENT);
  CHECK(none.error().message == "cannot stat " + fx.path("etc/hostprep/absent.yaml").string());
  CHECK_FALSE(host.ownership("etc/../../x"));  // refused before it reaches the filesystem
}

TEST_CASE("tryLock creates the lock file, excludes a second holder, and lets go when destroyed",
          "[host]") {
  Fixture fx;
  RootHost host(fx.root());
  REQUIRE(host.makeDirs("run/hostprep", 0700));
  {
    auto first = host.tryLock("run/hostprep/lock");
    REQUIRE(first);
    struct stat st {};
    REQUIRE(::stat(fx.path("run/hostprep/lock").c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0600);
    auto second = host.tryLock("run/hostprep/lock");
    REQUIRE_FALSE(second);
    CHECK(second.error().err == EWOULDBLOCK);
    CHECK(second.error().message == "cannot lock " + fx.path("run/hostprep/lock").string());
  }
  CHECK(host.tryLock("run/hostprep/lock"));
  auto noDir = host.tryLock("run/absent/lock");
  REQUIRE_FALSE(noDir);
  CHECK(noDir.error().err == ENOENT);
  CHECK(noDir.error().message == "cannot open lock " + fx.path("run/absent/lock").string());
}

// Files hostprep owns are replaced atomically: a reader never sees a torn or missing file.
#include "drivers/seam/host.hpp"

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

TEST_CASE("a writer killed while it writes leaves no temporary file behind", "[host][atomic]") {
  // RLIMIT_FSIZE stops the child's write of the new status file half-way with SIGXFSZ, as a
  // SIGKILL or a crash would: the old file stays whole, and nothing else is left in its directory.
  Fixture fx;
  RootHost host(fx.root());
  REQUIRE(host.makeDirs("run/hostprep", 0755));
  REQUIRE(host.writeFileAtomic("run/hostprep/status.json", "{\"old\": true}\n"));
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    rlimit small{64 * 1024, 64 * 1024};
    rlimit noCore{0, 0};
    ::setrlimit(RLIMIT_CORE, &noCore);
    ::setrlimit(RLIMIT_FSIZE, &small);
    ::signal(SIGXFSZ, SIG_DFL);
    (void)host.writeFileAtomic("run/hostprep/status.json", std::string(1 << 20, 'x'));
    ::_exit(0);
  }
  int st = 0;
  REQUIRE(::waitpid(pid, &st, 0) == pid);
  REQUIRE(WIFSIGNALED(st));
  CHECK(WTERMSIG(st) == SIGXFSZ);
  CHECK(*host.list("run/hostprep") == std::vector<std::string>{"status.json"});
  std::ifstream f(fx.path("run/hostprep/status.json"));
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  CHECK(text == "{\"old\": true}\n");
}

TEST_CASE("list: every name of a directory, sorted, however many buffers they take", "[host]") {
  Fixture fx;
  // 3,000 names of ~60 bytes: several 32 KiB buffers of directory entries.
  std::vector<std::string> want;
  for (int i = 0; i < 3000; ++i) {
    char name[80];
    std::snprintf(name, sizeof name, "entry-%04d-%s", (i * 7919) % 3000,
                  std::string(48, static_cast<char>('a' + i % 26)).c_str());
    want.emplace_back(name);
    fx.write(std::string("many/") + name, "");
  }
  fx.write("many/.hidden", "");
  want.emplace_back(".hidden");
  std::sort(want.begin(), want.end());
  RootHost host(fx.root());
  auto names = host.list("many");
  REQUIRE(names);
  CHECK(*names == want);  // no "." or "..", nothing lost or repeated
  // listUnordered: the same names, in the order the file system gives them.
  auto unordered = host.listUnordered("many");
  REQUIRE(unordered);
  std::sort(unordered->begin(), unordered->end());
  CHECK(*unordered == want);
  CHECK(host.listUnordered("absent").error().err == ENOENT);
  fx.write("empty/x", "");
  std::filesystem::remove(fx.path("empty/x"));
  auto none = host.list("empty");
  REQUIRE(none);
  CHECK(none->empty());
  auto absent = host.list("absent");
  REQUIRE_FALSE(absent);
  CHECK(absent.error().err == ENOENT);
  auto file = host.list("many/.hidden");
  REQUIRE_FALSE(file);
  CHECK(file.error().err == ENOTDIR);
}

TEST_CASE("read: whole files up to the cap, sized or not", "[host]") {
  Fixture fx;
  std::string big(3 * 1024 * 1024 + 17, 'a');
  for (size_t i = 0; i < big.size(); i += 4093) big[i] = static_cast<char>('b' + i % 20);
  fx.write("lib/modules/r/modules.alias", big);
  fx.write("empty", "");
  fx.write("cap", std::string(100, 'c'));
  RootHost host(fx.root());
  auto r = host.read("lib/modules/r/modules.alias", 64u << 20);
  REQUIRE(r);
  CHECK(*r == big);
  auto e = host.read("empty");
  REQUIRE(e);
  CHECK(e->empty());
  CHECK(host.read("cap", 100).value_or("") == std::string(100, 'c'));  // exactly the cap
  auto over = host.read("cap", 99);
  REQUIRE_FALSE(over);
  CHECK(over.error().err == EFBIG);
  // readText: the same bytes, mapped when large; the same errors.
  auto mapped = host.readText("lib/modules/r/modules.alias", 64u << 20);
  REQUIRE(mapped);
  CHECK(mapped->view() == big);
  auto small = host.readText("cap", 100);
  REQUIRE(small);
  CHECK(small->view() == std::string(100, 'c'));
  FileText moved = std::move(*mapped);  // the mapping moves with it
  CHECK(moved.view() == big);
  moved = std::move(*small);
  CHECK(moved.view() == std::string(100, 'c'));
  auto tooBig = host.readText("lib/modules/r/modules.alias", 1u << 20);
  REQUIRE_FALSE(tooBig);
  CHECK(tooBig.error().err == EFBIG);
  auto absent = host.readText("lib/modules/r/modules.dep");
  REQUIRE_FALSE(absent);
  CHECK(absent.error().err == ENOENT);
  // Under sys/ a short read is the end: files of a page, a page and a byte, and more, whole.
  for (size_t n : {size_t{0}, size_t{5}, size_t{4096}, size_t{4097}, size_t{4098}, size_t{10000}}) {
    INFO(n);
    std::string text(n, 'x');
    for (size_t i = 0; i < n; i += 7) text[i] = static_cast<char>('0' + i % 10);
    fx.write("sys/bus/pci/devices/0000:01:00.0/attr", text);
    CHECK(host.read("sys/bus/pci/devices/0000:01:00.0/attr", 1u << 20).value_or("?") == text);
    CHECK(host.read("/sys/bus/pci/devices/0000:01:00.0/attr", 1u << 20).value_or("?") == text);
    auto capped = host.read("sys/bus/pci/devices/0000:01:00.0/attr", 4096);
    CHECK(static_cast<bool>(capped) == (n <= 4096));
  }
  // The kernel's own sysfs: an attribute ends with its newline, read in one read.
  RootHost live("/");
  if (live.exists("sys/kernel/mm/transparent_hugepage/enabled")) {
    auto a = live.read("sys/kernel/mm/transparent_hugepage/enabled");
    REQUIRE(a);
    CHECK(a->back() == '\n');
  }
  // A binary attribute (kernfs gives at most a page per read): each PCI function's config space,
  // 256 or 4096 bytes, read whole; the same bytes as a stream reads.
  if (auto fns = live.list("sys/bus/pci/devices")) {
    for (size_t i = 0; i < fns->size() && i < 8; ++i) {
      const std::string rel = "sys/bus/pci/devices/" + (*fns)[i] + "/config";
      std::ifstream in("/" + rel, std::ios::binary);
      if (!in) continue;
      const std::string want{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      INFO(rel);
      CHECK(live.read(rel, 1u << 20).value_or("?") == want);
    }
  }
  // procfs reports size 0: read until end of file all the same.
  auto maps = live.read("proc/self/maps", 16u << 20);
  REQUIRE(maps);
  CHECK(maps->size() > 4096);
  CHECK(maps->back() == '\n');
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

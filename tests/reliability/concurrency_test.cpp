// Two runs at once: the run lock serializes them (the second waits), or refuses the second with
// exit 3 once --lock-timeout has passed. Steps of two runs never interleave.
#include <catch2/catch.hpp>
#include <mutex>
#include <thread>

#include "drivers/model/selection.hpp"
#include "drivers/model/snapshot.hpp"
#include "drivers/switch/executor.hpp"
#include "drivers/switch/run_state.hpp"
#include "tests/support/fake_kernel.hpp"
#include "tests/support/fixture.hpp"
#include "tests/support/run.hpp"

using namespace hostprep;
using namespace std::chrono_literals;
using hostprep::test::FakeKernel;
using hostprep::test::FakeModules;
using hostprep::test::Fixture;

namespace {

// One prepare run as cmdPrepare does it: lock, recover, snapshot, plan, apply.
struct Run {
  FakeKernel kernel;
  FakeModules modules{kernel};
  Kernel k{kernel, modules};

  explicit Run(const std::filesystem::path& root) : kernel(root) {}

  Status prepare(Mode mode, std::chrono::milliseconds lockTimeout,
                 const std::function<void(size_t)>& onStep) {
    auto lock = RunLock::acquire(kernel, lockTimeout);
    if (!lock) return lock.error();
    ApplyOptions opt;
    opt.unbindTimeout = 200ms;
    if (auto rec = recoverJournal(k, opt); !rec) return rec.error();
    auto s = readSnapshot(kernel);
    if (!s) return s.error();
    auto sel = selectDevices(*s, {});
    if (!sel) return sel.error();
    auto plan = makePlan(*s, *sel, {mode, "nvidia", ""});
    if (!plan) return plan.error();
    opt.afterStep = [&](size_t i) {
      onStep(i);
      return true;
    };
    auto res = applyPlan(k, *plan, opt);
    if (!res) return res.error();
    return {};
  }
};

}  // namespace

TEST_CASE("two prepare runs at once are serialized by the lock", "[concurrency]") {
  Fixture fx("two-a10");
  std::mutex m;
  std::vector<std::pair<int, size_t>> log;  // (run, step) in the order they happened
  auto record = [&](int run) {
    return [&, run](size_t i) {
      std::lock_guard<std::mutex> g(m);
      log.emplace_back(run, i);
      if (run == 1) std::this_thread::sleep_for(5ms);  // keep the first run busy a while
    };
  };
  Status first, second;
  std::thread a([&] { first = Run(fx.root()).prepare(Mode::kVmPassthrough, 10s, record(1)); });
  // The second starts once the first has made a step, so it must wait for the lock.
  while (true) {
    std::lock_guard<std::mutex> g(m);
    if (!log.empty()) break;
  }
  std::thread b([&] { second = Run(fx.root()).prepare(Mode::kContainer, 10s, record(2)); });
  a.join();
  b.join();
  REQUIRE(first);
  REQUIRE(second);
  // Every step of run 1 comes before every step of run 2: no interleaving.
  REQUIRE(log.size() == 19 + 16);  // passthrough: 19 steps; back to container: 4 per device
  size_t lastOfFirst = 0, firstOfSecond = log.size();
  for (size_t i = 0; i < log.size(); ++i) {
    if (log[i].first == 1) lastOfFirst = i;
    if (log[i].first == 2 && firstOfSecond == log.size()) firstOfSecond = i;
  }
  CHECK(lastOfFirst < firstOfSecond);
  // The second run moved the host back to container mode.
  RootHost host(fx.root());
  CHECK(readPciFunction(host, *parseBdf("0000:3b:00.0"))->driver ==
        std::optional<std::string>("nvidia"));
}

TEST_CASE("a second run gives up with exit 3 after the lock timeout", "[concurrency]") {
  Fixture fx("two-a10");
  RootHost host(fx.root());
  auto held = RunLock::acquire(host, 1s);
  REQUIRE(held);
  auto before = fx.deviceState();
  auto start = std::chrono::steady_clock::now();
  Status s = Run(fx.root()).prepare(Mode::kVmPassthrough, 300ms, [](size_t) {});
  auto waited = std::chrono::steady_clock::now() - start;
  REQUIRE_FALSE(s);
  CHECK(s.error().exit == Exit::kRefused);
  CHECK_THAT(s.error().describe(), Catch::Contains("another hostprep run holds"));
  CHECK_THAT(s.error().describe(), Catch::Contains("raise --lock-timeout"));
  CHECK(waited >= 300ms);
  CHECK(fx.deviceState() == before);

  SECTION("and so does the command, in another process") {
    auto r = hostprep::test::runHostprep({"--root", fx.root().string(), "prepare", "--mode",
                                          "vm-passthrough", "--lock-timeout", "0.3"});
    CHECK(r.exitCode == 3);
    CHECK_THAT(r.err, Catch::Contains("another hostprep run holds " + fx.root().string() +
                                      "/run/hostprep/lock"));
    CHECK(fx.deviceState() == before);
  }
}

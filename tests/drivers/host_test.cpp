// Files hostprep owns are replaced atomically: a reader never sees a torn or missing file.
#include "drivers/host.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <fstream>
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

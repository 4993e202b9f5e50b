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

TEST_CASE("a timed attribute read returns the text, or the errno of the read", "[host]") {
  Fixture fx;
  fx.write("sys/bus/pci/devices/0000:01:00.0/driver_override", "vfio-pci\n");
  RootHost host(fx.root());
  auto r = host.readAttr("sys/bus/pci/devices/0000:01:00.0/driver_override", std::chrono::milliseconds(2000));
  REQUIRE(r);
  CHECK(*r == "vfio-pci\n");
  auto missing = host.readAttr("sys/bus/pci/devices/0000:01:00.0/sriov_numvfs", std::chrono::milliseconds(2000));
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

// Files the user names on the command line: read whole on this machine, errors name the file.
#include "agent/local_file.hpp"

#include <catch2/catch.hpp>

#include "agent/converge.hpp"
#include "tests/support/fake_kernel.hpp"
#include "tests/support/fixture.hpp"

using namespace hostprep;
using hostprep::test::FakeKernel;
using hostprep::test::Fixture;

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

TEST_CASE("the agent's vGPU config is a host path, read through the Host", "[local-file][vgpu]") {
  Fixture fx;
  FakeKernel host(fx.root());
  fx.write("etc/hostprep/vgpu.yaml",
           "version: v1\nvgpu-configs:\n  a10:\n    - devices: all\n      vgpu-devices: "
           "{A10-4Q: 2}\n");
  auto cfg = loadVgpuConfig("/etc/hostprep/vgpu.yaml", "a10", &host);
  REQUIRE(cfg);
  REQUIRE(*cfg);
  REQUIRE((*cfg)->size() == 1);
  auto absent = loadVgpuConfig("etc/hostprep/absent.yaml", "a10", &host);
  REQUIRE_FALSE(absent);
  CHECK(absent.error().describe() == "--vgpu-config: cannot read " +
                                         fx.path("etc/hostprep/absent.yaml").string() +
                                         ": No such file or directory (check the path)");
  CHECK(absent.error().exit == Exit::kUsage);
}

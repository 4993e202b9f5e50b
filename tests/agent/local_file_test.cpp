// Files the user names on the command line: read whole on this machine, errors name the file.
#include "agent/local_file.hpp"

#include <catch2/catch.hpp>

#include "tests/support/fixture.hpp"

using namespace hostprep;
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

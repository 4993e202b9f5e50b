// hostprep's command table as users see it: the list of commands, a typo's suggestion.
#include <catch2/catch.hpp>

#include "tests/support/run.hpp"

using hostprep::test::runHostprep;

TEST_CASE("unknown commands get a suggestion and exit 2", "[cli]") {
  auto r = runHostprep({"prepar"});
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.err, Catch::Contains("unknown command 'prepar'; did you mean 'prepare'?"));
}

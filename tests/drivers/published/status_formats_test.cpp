// The status document's renderings read back: RFC 3339 times and a previous document's conditions
// (the renderings themselves, on built documents: status_test.cpp).
#include "drivers/published/status_formats.hpp"

#include <catch2/catch.hpp>

using namespace hostprep;

TEST_CASE("times are RFC 3339 UTC both ways", "[status]") {
  constexpr std::time_t kNow = 1714564800;
  CHECK(formatTime(kNow) == "2024-05-01T12:00:00Z");
  CHECK(parseTime("2024-05-01T12:00:00Z") == std::optional<std::time_t>(kNow));
  CHECK_FALSE(parseTime("2024-05-01 12:00:00"));
  CHECK_FALSE(parseTime("2024-05-01T12:00:00+02:00"));
}

TEST_CASE("a previous document's conditions read back, what is not one skipped", "[status]") {
  CHECK(parseConditions("not json").empty());
  CHECK(parseConditions(R"({"conditions": "none"})").empty());
  const auto c = parseConditions(R"({"conditions": [
      {"type": "GroupsViable", "status": "False", "reason": "NotViable", "message": "group 30",
       "lastTransitionTime": "2024-05-01T12:00:00Z"},
      {"type": "PreflightPassed", "status": "maybe", "lastTransitionTime": "yesterday"},
      {"status": "True"}, 7]})");
  REQUIRE(c.size() == 2);
  CHECK(c[0].type == "GroupsViable");
  CHECK(c[0].status == ConditionStatus::kFalse);
  CHECK(c[0].reason == "NotViable");
  CHECK(c[0].message == "group 30");
  CHECK(c[0].lastTransitionTime == 1714564800);
  CHECK(c[1].type == "PreflightPassed");
  CHECK(c[1].status == ConditionStatus::kUnknown);  // neither True nor False
  CHECK(c[1].lastTransitionTime == 0);              // not a time: none
}

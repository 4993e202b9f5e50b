// Text helpers (drivers/common/text.cpp): splitting and number parsing, table-driven.
#include "drivers/common/text.hpp"

#include <catch2/catch.hpp>

using namespace hostprep;
using SV = std::vector<std::string_view>;

TEST_CASE("lines, words and fields split as sysfs and procfs text needs", "[text]") {
  CHECK(splitLines("a\nb\n") == SV{"a", "b"});
  CHECK(splitLines("a\n\nb") == SV{"a", "", "b"});
  CHECK(splitLines("").empty());
  CHECK(splitWords("  nvidia 16384\t0 -\n") == SV{"nvidia", "16384", "0", "-"});
  CHECK(splitWords(" \t\n").empty());
  CHECK(split("sys/bus/pci", '/') == SV{"sys", "bus", "pci"});
  CHECK(split("/a//b/", '/') == SV{"", "a", "", "b", ""});
  CHECK(split("", '/') == SV{""});
  CHECK(trim("  0x10de\n") == "0x10de");
  CHECK(startsWith("vfio_pci", "vfio"));
  CHECK_FALSE(startsWith("vf", "vfio"));
  CHECK(endsWith("sriov_numvfs", "numvfs"));
  CHECK_FALSE(endsWith("vfs", "numvfs"));
  CHECK(toLower("GA102GL") == "ga102gl");
  CHECK(join({"a", "b", "c"}, ", ") == "a, b, c");
  CHECK(join({}, ", ").empty());
}

TEST_CASE("numbers parse whole, trimmed, in range, or not at all", "[text]") {
  CHECK(parseUnsigned(" 42\n") == 42u);
  CHECK(parseUnsigned("0x10de", 16) == 0x10deu);
  CHECK(parseUnsigned("10DE", 16) == 0x10deu);
  CHECK(parseUnsigned("18446744073709551615") == UINT64_MAX);
  CHECK_FALSE(parseUnsigned("18446744073709551616"));
  CHECK_FALSE(parseUnsigned("0x10", 10));
  CHECK_FALSE(parseUnsigned("-1"));
  CHECK_FALSE(parseUnsigned("4 2"));
  CHECK_FALSE(parseUnsigned(""));
  CHECK(parseSigned("-1") == -1);
  CHECK(parseSigned(" 7 ") == 7);
  CHECK_FALSE(parseSigned("+7"));
  CHECK_FALSE(parseSigned("7a"));
  CHECK_FALSE(parseSigned("\n"));
}

TEST_CASE("jsonNesting counts arrays and objects but not brackets in strings", "[text]") {
  CHECK(jsonNesting("") == 0);
  CHECK(jsonNesting("7") == 0);
  CHECK(jsonNesting("{}") == 1);
  CHECK(jsonNesting(R"({"a": [1, {"b": []}], "c": {}})") == 4);
  CHECK(jsonNesting(R"({"a": "[[[{{{", "b": "\"[[[", "c": "\\"})") == 1);
  CHECK(jsonNesting(R"(["\\\"[["])") == 1);  // an escaped backslash, then an escaped quote
  CHECK(jsonNesting(std::string(100'000, '[')) == 100'000);
  CHECK(jsonNesting("]]]{") == 1);  // more closing than opening: never below 0
}

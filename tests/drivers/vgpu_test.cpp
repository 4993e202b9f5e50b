// The pure vGPU helpers: type-name matching, creatable_vgpu_types, UUIDs, VF addresses.
#include "drivers/vgpu.hpp"

#include <catch2/catch.hpp>
#include <set>

using namespace hostprep;

TEST_CASE("a configured type matches the last token of the name, the whole name, or the directory",
          "[vgpu]") {
  struct Row {
    const char* configured;
    const char* id;
    const char* name;
    bool match;
  };
  for (const Row& r : {Row{"T4-4Q", "nvidia-224", "GRID T4-4Q", true},
                       Row{"A10-12Q", "nvidia-594", "NVIDIA A10-12Q", true},
                       Row{"A10-12Q", "nvidia-594", "NVIDIA A10-12Q\n", true},
                       Row{"A10-12", "nvidia-594", "NVIDIA A10-12Q", false},
                       Row{"NVIDIA", "nvidia-594", "NVIDIA A10-12Q", false},
                       Row{"mtty-2", "mtty-2", "Dual port serial", true},
                       Row{"Dual port serial", "mtty-2", "Dual port serial", true},
                       Row{"serial", "mtty-2", "Dual port serial", true},
                       Row{"", "mtty-2", "Dual port serial", false},
                       Row{"nvidia-594", "nvidia-594", "NVIDIA A10-12Q", true}}) {
    INFO(r.configured << " vs " << r.id << " / " << r.name);
    CHECK(vgpuTypeMatches(r.configured, r.id, r.name) == r.match);
  }
}

TEST_CASE("matchVgpuTypes prefers an exact id or name and reports ambiguity", "[vgpu]") {
  std::vector<MdevType> mtty{{"mtty-1", "Single port serial", 24},
                             {"mtty-2", "Dual port serial", 12}};
  CHECK(matchVgpuTypes(mtty, "mtty-2") == std::vector<size_t>{1});
  CHECK(matchVgpuTypes(mtty, "Single port serial") == std::vector<size_t>{0});
  CHECK(matchVgpuTypes(mtty, "serial") == std::vector<size_t>{0, 1});
  CHECK(matchVgpuTypes(mtty, "port").empty());
  CHECK(describeVgpuTypes(mtty) == "Single port serial (mtty-1), Dual port serial (mtty-2)");
}

TEST_CASE("creatable_vgpu_types lines parse as ID : NAME", "[vgpu]") {
  CHECK(parseCreatableVgpuTypes(
            "ID    : vGPU Name\n1428  : NVIDIA H200X-141C\n1429 : NVIDIA H200X-70C\n") ==
        std::vector<VgpuTypeId>{{"1428", "NVIDIA H200X-141C"}, {"1429", "NVIDIA H200X-70C"}});
  CHECK(parseCreatableVgpuTypes("").empty());
  CHECK(parseCreatableVgpuTypes("ID    : vGPU Name\n").empty());
  CHECK(parseCreatableVgpuTypes("12 :\n : name\nx1 : y\n  7:A:B  \n") ==
        std::vector<VgpuTypeId>{{"7", "A:B"}});
}

TEST_CASE("SHA-1 matches the FIPS 180 test vectors", "[vgpu]") {
  CHECK(sha1Hex("") == "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  CHECK(sha1Hex("abc") == "a9993e364706816aba3e25717850c26c9cd0d89d");
  CHECK(sha1Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
  CHECK(sha1Hex(std::string(1000, 'a')) == "291e9a6c66994949b57ba5e650361e98fc36b1ba");
}

TEST_CASE("vGPU UUIDs are name-based: stable, version 5, distinct per parent, type and index",
          "[vgpu]") {
  const Bdf a = *parseBdf("0000:3b:00.4"), b = *parseBdf("0000:3b:00.5");
  const std::string u = vgpuUuid(a, "A10-12Q", 0);
  CHECK(u == vgpuUuid(a, "A10-12Q", 0));
  CHECK(isValidUuid(u));
  CHECK(u[14] == '5');
  CHECK(std::string("89ab").find(u[19]) != std::string::npos);
  std::set<std::string> all{u, vgpuUuid(b, "A10-12Q", 0), vgpuUuid(a, "A10-4Q", 0),
                            vgpuUuid(a, "A10-12Q", 1)};
  CHECK(all.size() == 4);
  CHECK_FALSE(isValidUuid("../../../x"));
  CHECK_FALSE(isValidUuid("6B1F3C52-9E0D-4A8B-A177-2E5CD4903F61"));
  CHECK(isValidUuid("6b1f3c52-9e0d-4a8b-a177-2e5cd4903f61"));
}

TEST_CASE("VF addresses follow the routing id, First VF Offset and VF Stride", "[vgpu]") {
  const Bdf pf = *parseBdf("0000:3b:00.0");
  CHECK(vfAddress(pf, 4, 1, 0)->str() == "0000:3b:00.4");
  CHECK(vfAddress(pf, 4, 1, 4)->str() == "0000:3b:01.0");
  CHECK(vfAddress(pf, 4, 1, 31)->str() == "0000:3b:04.3");
  CHECK(vfAddress(pf, 0x100, 2, 1)->str() == "0000:3c:00.2");
  CHECK_FALSE(vfAddress(*parseBdf("0000:ff:1f.7"), 1, 1, 0));
  CHECK_FALSE(vfAddress(pf, -1, 1, 0));
}

// The vGPU helpers (type-name matching, creatable_vgpu_types, UUIDs, VF addresses) and the one
// reader of the host's vGPU state.
#include "drivers/model/vgpu.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <set>

#include "tests/support/fixture.hpp"

using namespace hostprep;
using hostprep::test::Fixture;

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
  CHECK(
      parseCreatableVgpuTypes(
          "ID    : vGPU Name\n1428  : NVIDIA H200X-141C\n 1430 :NVIDIA H200X-70C \n\nbad line\n") ==
      std::vector<VgpuTypeId>{{"1428", "NVIDIA H200X-141C"}, {"1430", "NVIDIA H200X-70C"}});
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
  CHECK_FALSE(isValidUuid("../../etc/passwd-aaaaaaaaaaaaaaaaaaaaaaaa"));
  CHECK_FALSE(isValidUuid("5f2a9a5e1c394b8f9a537d0f2c8c1a11"));
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

TEST_CASE("per-VF vGPUs are read from current_vgpu_type", "[vgpu]") {
  Fixture fx("status-container");
  const std::string vf = "sys/devices/pci0000:86/0000:86:00.0/nvidia";
  fx.write(vf + "/creatable_vgpu_types", "ID    : vGPU Name\n558 : NVIDIA A10-12Q\n");
  fx.write(vf + "/current_vgpu_type", "558\n");
  const std::string other = "sys/devices/pci0000:3b/0000:3b:00.0/nvidia";
  fx.write(other + "/creatable_vgpu_types", "557 : NVIDIA A10-8Q\n");
  fx.write(other + "/current_vgpu_type", "0\n");
  RootHost host(fx.root());
  auto snap = readSnapshot(host);
  REQUIRE(snap);
  auto v = readVgpuHost(host, *snap);
  REQUIRE(v.devices.size() == 1);
  CHECK(v.devices[0].iface == VgpuInterface::kPerVf);
  CHECK(v.devices[0].parent.str() == "0000:86:00.0");
  CHECK(v.devices[0].typeId == "558");
  CHECK(v.devices[0].typeName == "NVIDIA A10-12Q");
  CHECK(v.parents.size() == 2);  // both offer types: the vGPU host driver
  CHECK(readVgpuDevices(host, {*parseBdf("0000:86:00.0")}) == v.devices);
  CHECK(readVgpuDevices(host, {*parseBdf("0000:3b:00.0")}).empty());

  SECTION("a type no longer listed as creatable is named from supported_vgpu_types, else not") {
    fx.write(vf + "/creatable_vgpu_types", "");
    fx.write(vf + "/supported_vgpu_types", "558 : NVIDIA A10-12Q\n");
    CHECK(readVgpuHost(host, *snap).devices[0].typeName == "NVIDIA A10-12Q");
    std::filesystem::remove(fx.path(vf + "/supported_vgpu_types"));
    CHECK(readVgpuHost(host, *snap).devices[0].typeName.empty());
  }
  SECTION("an id that is not a number, or 0, is no vGPU; a padded one is the number") {
    fx.write(vf + "/current_vgpu_type", "none\n");
    CHECK(readVgpuHost(host, *snap).devices.empty());
    fx.write(vf + "/current_vgpu_type", "0558\n");
    CHECK(readVgpuHost(host, *snap).devices.at(0).typeId == "558");
  }
}

TEST_CASE("an mdev device on a parent that is not a PCI function is kept apart", "[vgpu]") {
  Fixture fx("status-container");
  const std::string uuid = "5f2a9a5e-1c39-4b8f-9a53-7d0f2c8c1a11";
  const std::string dev = "sys/devices/virtual/mtty/mtty/" + uuid;
  fx.write("sys/devices/virtual/mtty/mtty/mdev_supported_types/mtty-2/name", "Dual port serial\n");
  fx.write(dev + "/.keep", "");
  fx.symlink(dev + "/mdev_type", "../mdev_supported_types/mtty-2");
  fx.symlink("sys/bus/mdev/devices/" + uuid, "../../../devices/virtual/mtty/mtty/" + uuid);
  RootHost host(fx.root());
  auto snap = readSnapshot(host);
  REQUIRE(snap);
  auto v = readVgpuHost(host, *snap);
  CHECK(v.devices.empty());
  CHECK(v.otherMdevs == std::vector<OtherMdev>{{uuid, std::nullopt, "mtty-2", "Dual port serial"}});
}

TEST_CASE("a refresh reads again the functions an event named and every parent, as a full read",
          "[vgpu]") {
  Fixture fx("status-container");
  const Bdf gpu = *parseBdf("0000:86:00.0"), other = *parseBdf("0000:3b:00.0");
  const std::string gpuDir = "sys/devices/pci0000:86/0000:86:00.0/nvidia";
  const std::string otherDir = "sys/devices/pci0000:3b/0000:3b:00.0/nvidia";
  fx.write(gpuDir + "/creatable_vgpu_types", "558 : NVIDIA A10-12Q\n");
  fx.write(gpuDir + "/current_vgpu_type", "0\n");
  RootHost host(fx.root());
  auto snap = readSnapshot(host);
  REQUIRE(snap);
  const VgpuHost before = readVgpuHost(host, *snap);
  REQUIRE(before.parents.size() == 1);

  SECTION("a parent's vGPU, created with no event of its own, is seen") {
    fx.write(gpuDir + "/current_vgpu_type", "558\n");
    const VgpuHost after = refreshVgpuHost(host, *snap, before, {});
    REQUIRE(after.devices.size() == 1);
    CHECK(after.devices[0].typeName == "NVIDIA A10-12Q");
    CHECK(after.devices == readVgpuHost(host, *snap).devices);
  }
  SECTION("a function that became a parent with a bind (the event names it) is seen") {
    fx.write(otherDir + "/creatable_vgpu_types", "557 : NVIDIA A10-8Q\n");
    fx.write(otherDir + "/current_vgpu_type", "557\n");
    const VgpuHost after = refreshVgpuHost(host, *snap, before, {other});
    const VgpuHost full = readVgpuHost(host, *snap);
    CHECK(after.parents.size() == 2);
    CHECK(after.parents.count(other) == 1);
    CHECK(after.devices == full.devices);
    CHECK(after.unbindLocks == full.unbindLocks);
    CHECK(after.otherMdevs == full.otherMdevs);
  }
  SECTION("a parent that lost its driver (the event names it) is no parent any more") {
    std::filesystem::remove_all(fx.path(gpuDir));
    const VgpuHost after = refreshVgpuHost(host, *snap, before, {gpu});
    CHECK(after.parents.empty());
    CHECK(after.devices.empty());
  }
  SECTION("a function no event named keeps its answer: no lookups for it") {
    fx.write(otherDir + "/creatable_vgpu_types", "557 : NVIDIA A10-8Q\n");
    CHECK(refreshVgpuHost(host, *snap, before, {}).parents.count(other) == 0);
    CHECK(readVgpuHost(host, *snap).parents.count(other) == 1);
  }
}

// The per-VF files and the unbind lock are the nvidia driver's: a function another driver holds
// has none, so none is looked for there (the look-ups were 3 of the 4 per function of the host).
TEST_CASE("the nvidia driver's vGPU files are read only on functions it holds", "[vgpu]") {
  Fixture fx("status-container");
  const Bdf audio = *parseBdf("0000:86:00.1");  // snd_hda_intel
  const std::string dir = "sys/devices/pci0000:86/0000:86:00.1/nvidia";
  fx.write(dir + "/creatable_vgpu_types", "558 : NVIDIA A10-12Q\n");
  fx.write(dir + "/current_vgpu_type", "558\n");
  fx.write("proc/driver/nvidia/gpus/0000:86:00.1/unbindLock", "0\n");
  fx.write("proc/driver/nvidia/gpus/0000:86:00.0/unbindLock", "0\n");
  RootHost host(fx.root());
  auto snap = readSnapshot(host);
  REQUIRE(snap);
  auto v = readVgpuHost(host, *snap);
  CHECK(v.parents.count(audio) == 0);
  CHECK(v.devices.empty());
  CHECK(v.unbindLocks == std::vector<Bdf>{*parseBdf("0000:86:00.0")});
  CHECK(refreshVgpuHost(host, *snap, v, {audio}).parents.count(audio) == 0);
  // An mdev parent may be any driver's.
  fx.write("sys/devices/pci0000:86/0000:86:00.1/mdev_supported_types/mtty-2/name", "mtty\n");
  CHECK(readVgpuHost(host, *snap).parents.at(audio).mdevParent);
  // The same files once nvidia holds it (a snapshot read again) are a parent and a vGPU.
  std::filesystem::remove(fx.path("sys/devices/pci0000:86/0000:86:00.1/driver"));
  fx.symlink("sys/devices/pci0000:86/0000:86:00.1/driver", "../../../bus/pci/drivers/nvidia");
  snap = readSnapshot(host);
  REQUIRE(snap);
  v = readVgpuHost(host, *snap);
  CHECK(v.parents.at(audio).perVf);
  REQUIRE(v.devices.size() == 1);
  CHECK(v.devices[0].parent == audio);
  CHECK(v.unbindLocks.size() == 2);
}

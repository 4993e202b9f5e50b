// The journal (drivers/model/journal.cpp): what a run writes before it moves anything, and what the
// next run reads back.
#include "drivers/model/journal.hpp"

#include <catch2/catch.hpp>

#include "drivers/model/snapshot.hpp"
#include "tests/drivers/switch_rig.hpp"

using namespace hostprep;
using namespace hostprep::test::rig;
using hostprep::test::FakeKernel;
using hostprep::test::FakeModules;
using hostprep::test::Fixture;

TEST_CASE("the journal keeps the vGPU state and reads version 1 journals", "[vgpu][journal]") {
  Journal j;
  j.mode = Mode::kVmVgpu;
  j.pid = 42;
  j.sriov = {{*parseBdf("0000:3b:00.0"), 0, false, {}}};
  j.vgpuGpus = {*parseBdf("0000:3b:00.0")};
  j.vgpus = {
      {VgpuInterface::kMdev, *parseBdf("0000:3b:00.4"),
       vgpuUuid(*parseBdf("0000:3b:00.4"), "A10-12Q", 0), "nvidia-594", "NVIDIA A10-12Q", 10000},
      {VgpuInterface::kPerVf, *parseBdf("0000:41:00.4"), "", "1019", "NVIDIA H100-40C", 400}};
  j.steps = {
      {StepKind::kCreateVgpu, *parseBdf("0000:3b:00.4"), "A10-12Q", std::nullopt, j.vgpus[0].uuid}};
  auto back = parseJournal(toJson(j));
  REQUIRE(back);
  CHECK(back->vgpus == j.vgpus);
  CHECK(back->sriov.size() == 1);
  CHECK(back->sriov[0].numvfs == 0);
  CHECK(back->vgpuGpus == j.vgpuGpus);
  CHECK(back->steps[0].uuid == j.vgpus[0].uuid);
  CHECK_THAT(toJson(j), Catch::Contains("\"version\": 2"));
  auto v1 = parseJournal(
      R"({"version": 1, "mode": "container", "pid": 1, "next": 0, "devices": [], "steps": []})");
  REQUIRE(v1);
  CHECK(v1->vgpus.empty());
  auto bad =
      parseJournal(R"({"version": 2, "mode": "vm-vgpu", "next": 0, "vgpus": [{"interface": "mdev",
      "parent": "0000:3b:00.4", "uuid": "../../x", "type": "nvidia-1", "group": null}]})");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message == "journal: vgpus[0]: \"uuid\" is not a UUID");
  // An interface that is no string is an error like any other, not a JSON exception.
  for (const char* iface : {"5", "null", "\"vfio\""}) {
    auto odd = parseJournal(std::string(R"({"version": 2, "mode": "vm-vgpu", "next": 0, "vgpus": [{
      "interface": )") + iface +
                            R"(, "parent": "0000:3b:00.4", "uuid":
      "6f1a2c3e-0b4d-4e5f-8a9b-0c1d2e3f4a5b", "type": "nvidia-1"}]})");
    REQUIRE_FALSE(odd);
    CHECK(odd.error().message == "journal: vgpus[0]: \"interface\" is not \"mdev\" or \"per-vf\"");
  }
}

TEST_CASE("the journal keeps each VF's driver and override, and older journals have none",
          "[vgpu][journal]") {
  Journal j;
  j.mode = Mode::kContainer;
  j.sriov = {{*parseBdf("0000:3b:00.0"),
              2,
              false,
              {{*parseBdf("0000:3b:00.4"), {std::string("nvidia"), std::string("nvidia")}},
               {*parseBdf("0000:3b:00.5"), {std::string("vfio-pci"), std::nullopt}}}}};
  auto back = parseJournal(toJson(j));
  REQUIRE(back);
  REQUIRE(back->sriov.size() == 1);
  REQUIRE(back->sriov[0].vfs.size() == 2);
  CHECK(back->sriov[0].vfs[0].bdf == *parseBdf("0000:3b:00.4"));
  CHECK(back->sriov[0].vfs[0].state == DeviceState{std::string("nvidia"), std::string("nvidia")});
  CHECK(back->sriov[0].vfs[1].state == DeviceState{std::string("vfio-pci"), std::nullopt});
  auto old = parseJournal(
      R"({"version": 2, "mode": "container", "next": 0, "sriov": [{"pf": "0000:3b:00.0", "numvfs": 4}]})");
  REQUIRE(old);
  CHECK(old->sriov[0].vfs.empty());
  // The journal drives writes: a driver name that could leave sysfs is refused like a device's.
  auto bad = parseJournal(R"({"version": 2, "mode": "container", "next": 0, "sriov": [{"pf":
      "0000:3b:00.0", "numvfs": 4, "vfs": [{"bdf": "0000:3b:00.4", "driver": "../../x", "driver_override": null}]}]})");
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error().message, Catch::StartsWith("journal: sriov[0] vfs[0]: "));
  auto missing = parseJournal(R"({"version": 2, "mode": "container", "next": 0, "sriov": [{"pf":
      "0000:3b:00.0", "numvfs": 4, "vfs": [{"bdf": "0000:3b:00.4", "driver": null}]}]})");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().message == "journal: sriov[0] vfs[0]: missing \"driver_override\"");
  auto notList = parseJournal(R"({"version": 2, "mode": "container", "next": 0, "sriov": [{"pf":
      "0000:3b:00.0", "numvfs": 4, "vfs": {}}]})");
  REQUIRE_FALSE(notList);
  CHECK(notList.error().message == "journal: sriov[0]: \"vfs\" is not an array");
}

TEST_CASE("a PF's sriov_numvfs write left pending is kept, and older journals read as not pending",
          "[vgpu][journal]") {
  Journal j;
  j.mode = Mode::kContainer;
  j.sriov = {{*parseBdf("0000:3b:00.0"), 16, true, {}}, {*parseBdf("0000:86:00.0"), 16, false, {}}};
  auto back = parseJournal(toJson(j));
  REQUIRE(back);
  REQUIRE(back->sriov.size() == 2);
  CHECK(back->sriov[0].pendingWrite);
  CHECK_FALSE(back->sriov[1].pendingWrite);
  auto old = parseJournal(
      R"({"version": 2, "mode": "container", "next": 0, "sriov": [{"pf": "0000:3b:00.0", "numvfs": 4}]})");
  REQUIRE(old);
  REQUIRE(old->sriov.size() == 1);
  CHECK_FALSE(old->sriov[0].pendingWrite);
  auto bad = parseJournal(
      R"({"version": 2, "mode": "container", "next": 0, "sriov": [{"pf": "0000:3b:00.0", "numvfs": 4, "pending_write": 1}]})");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message == "journal: sriov[0]: \"pending_write\" is not true or false");
}

TEST_CASE("a device's probe left pending is kept, and must be true or false", "[journal]") {
  Journal j;
  j.devices = {{*parseBdf("0000:3b:00.0"),
                {std::string("vfio-pci"), std::string("vfio-pci")},
                std::nullopt,
                true}};
  auto back = parseJournal(toJson(j));
  REQUIRE(back);
  REQUIRE(back->devices.size() == 1);
  CHECK(back->devices[0].pendingProbe);
  auto bad = parseJournal(
      R"({"version": 2, "mode": "container", "next": 0, "devices": [{"bdf": "0000:3b:00.0",
      "driver": null, "driver_override": null, "pending_probe": "yes"}]})");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message == "journal: devices[0]: \"pending_probe\" is not true or false");
}

// VFIO device files and iommufd (Linux 6.6+: /dev/vfio/devices/vfioN, CONFIG_VFIO_DEVICE_CDEV;
// /dev/iommu, CONFIG_IOMMUFD; Documentation/driver-api/vfio.rst "VFIO Device cdev"): what the
// snapshot reads, what prepare verifies after a bind, what status publishes, on a kernel that has
// them and on one that does not (6.1 lists vfio-dev/vfioN without a `dev` number). And how an
// unbind still running in the kernel is recognised on both 6.1 and 6.12 (the device's uevent).
#include <catch2/catch.hpp>

#include "agent/config.hpp"
#include "agent/status_writer.hpp"
#include "drivers/model/selection.hpp"
#include "drivers/model/snapshot.hpp"
#include "drivers/published/status.hpp"
#include "drivers/published/status_formats.hpp"
#include "drivers/switch/executor.hpp"
#include "tests/drivers/switch_rig.hpp"
#include "tests/support/fake_kernel.hpp"
#include "tests/support/fixture.hpp"
#include "tests/support/schema.hpp"

using namespace hostprep;
using hostprep::test::Fixture;
using hostprep::test::rig::kA10;

namespace {

// The switch tests' rig, with groups moved one after the other: vfioN numbers in plan order.
struct Rig : hostprep::test::rig::Rig {
  explicit Rig(const std::string& scenario) : hostprep::test::rig::Rig(scenario) {
    opt.parallel = false;
  }
  std::optional<std::string> vfioDevice(const char* bdf) { return fn(bdf).vfioDevice; }
};

nlohmann::json statusJson(const Fixture& fx) {
  RootHost host(fx.root());
  auto cfg = loadConfig(host, kConfigPath, false);
  REQUIRE(cfg);
  StatusRequest r;
  r.config = *cfg;
  r.now = 1714564800;
  auto o = observe(host, r);
  REQUIRE(o);
  auto j = nlohmann::json::parse(toJson((*o)->doc).dump());
  auto schema = nlohmann::json::parse(
      *RootHost(HOSTPREP_SOURCE_DIR).read("agent/status.schema.json", 1 << 20));
  CHECK(hostprep::test::validateSchema(schema, j) == std::vector<std::string>{});
  return j;
}

nlohmann::json deviceEntry(const nlohmann::json& j, const std::string& bdf) {
  for (const auto& d : j["devices"]) {
    if (d["bdf"] == bdf) return d;
  }
  FAIL("no device " << bdf << " in the status document");
  return {};
}

}  // namespace

TEST_CASE("a kernel with VFIO device files: the bind makes them, prepare checks them",
          "[vfio-cdev]") {
  Rig r("two-a10");
  r.fx.write("fake/vfio-device-cdev", "");
  REQUIRE(applyPlan(r.k, r.plan(Mode::kVmPassthrough), r.opt));
  // One device file per function on vfio-pci, numbered as the kernel hands them out.
  std::set<std::string> names;
  for (const char* b : kA10) {
    INFO(b);
    auto n = r.vfioDevice(b);
    REQUIRE(n);
    CHECK(r.kernel.exists("dev/vfio/devices/" + *n));
    names.insert(*n);
  }
  CHECK(names == std::set<std::string>{"vfio0", "vfio1", "vfio2", "vfio3"});

  SECTION("container mode takes them away with the binding") {
    REQUIRE(applyPlan(r.k, r.plan(Mode::kContainer), r.opt));
    for (const char* b : kA10) CHECK_FALSE(r.vfioDevice(b));
    CHECK(r.kernel.list("dev/vfio/devices").value_or(std::vector<std::string>{"?"}).empty());
  }
}

TEST_CASE("a kernel without VFIO device files (6.1): vfio-dev without dev, the group only",
          "[vfio-cdev]") {
  Rig r("two-a10");
  REQUIRE(applyPlan(r.k, r.plan(Mode::kVmPassthrough), r.opt));
  // 6.1 registers vfio-dev/vfioN too, but with no character device behind it.
  CHECK(r.kernel.exists("sys/bus/pci/devices/0000:3b:00.0/vfio-dev/vfio0"));
  CHECK_FALSE(r.kernel.exists("sys/bus/pci/devices/0000:3b:00.0/vfio-dev/vfio0/dev"));
  CHECK_FALSE(r.kernel.exists("dev/vfio/devices"));
  for (const char* b : kA10) CHECK_FALSE(r.vfioDevice(b));
  CHECK(r.kernel.exists("dev/vfio/30"));
}

TEST_CASE("a VFIO device file that never appears fails the bind's verification, rolled back",
          "[vfio-cdev]") {
  Rig r("two-a10");
  // The kernel made the device (vfio-dev/vfioN/dev) but no /dev node appears (no devtmpfs).
  r.fx.write("fake/vfio-device-cdev", "no-node\n");
  auto before = r.fx.deviceState();
  auto res = applyPlan(r.k, r.plan(Mode::kVmPassthrough), r.opt);
  REQUIRE_FALSE(res);
  CHECK(res.error().describe() ==
        "verify /dev/vfio/30 exists: 0000:3b:00.0: /dev/vfio/devices/vfio0 did not appear: No "
        "such file or directory (the kernel lists the VFIO device file in sysfs; is devtmpfs "
        "mounted on /dev?; every device was put back on its original driver)");
  CHECK(r.fx.deviceState() == before);
  CHECK_FALSE(r.kernel.exists("sys/bus/pci/devices/0000:3b:00.0/vfio-dev"));
}

TEST_CASE("status publishes each VFIO device file and whether iommufd is there", "[vfio-cdev]") {
  Fixture fx("status-passthrough-done");
  SECTION("6.1: no device files, no /dev/iommu") {
    auto j = statusJson(fx);
    CHECK(j["iommufd"] == false);
    CHECK_FALSE(deviceEntry(j, "0000:3b:00.0").contains("vfioDevice"));
  }
  SECTION("6.6+ with iommufd: the device file of every function that has one") {
    const std::string dev = "sys/bus/pci/devices/0000:3b:00.0/vfio-dev/vfio4";
    fx.write(dev + "/dev", "511:4\n");
    fx.write("dev/vfio/devices/vfio4", "");
    fx.write("dev/iommu", "");
    // 3b:00.1's kernel entry has no `dev` number: no file to publish.
    fx.write("sys/bus/pci/devices/0000:3b:00.1/vfio-dev/vfio5/uevent", "");
    // 86:00.0's sysfs entry has one, but its node is missing: a consumer could not open it.
    fx.write("sys/bus/pci/devices/0000:86:00.0/vfio-dev/vfio6/dev", "511:6\n");
    auto j = statusJson(fx);
    CHECK(j["iommufd"] == true);
    CHECK(deviceEntry(j, "0000:3b:00.0")["vfioDevice"] == "/dev/vfio/devices/vfio4");
    CHECK_FALSE(deviceEntry(j, "0000:3b:00.1").contains("vfioDevice"));
    CHECK_FALSE(deviceEntry(j, "0000:86:00.0").contains("vfioDevice"));
  }
}

TEST_CASE("an unbind still in the driver's remove() is recognised by the device's uevent",
          "[vfio-cdev][snapshot]") {
  // On 6.12 driver_override's show() no longer waits for the device lock, so only uevent's
  // DRIVER= (cleared after remove() returns) tells a running unbind from a finished one.
  Fixture fx("two-a10");
  RootHost host(fx.root());
  const Bdf gpu = *parseBdf("0000:3b:00.0");
  const std::string dir = pciDevicePath(gpu);  // a link to the device directory
  REQUIRE(host.exists(hostPath(dir, "driver")));
  CHECK(unbindStillPending(host, gpu, "nvidia"));  // the link is still there: not started
  std::filesystem::remove(std::filesystem::canonical(fx.path(dir)) / "driver");
  fx.write(dir + "/uevent", "DRIVER=nvidia\nPCI_CLASS=30200\nPCI_ID=10DE:2236\n");
  CHECK(unbindStillPending(host, gpu, "nvidia"));  // link gone, remove() still running
  CHECK_FALSE(unbindStillPending(host, gpu, "vfio-pci"));
  fx.write(dir + "/uevent", "PCI_CLASS=30200\nPCI_ID=10DE:2236\n");
  CHECK_FALSE(unbindStillPending(host, gpu, "nvidia"));  // remove() returned
}

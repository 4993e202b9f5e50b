// iommu.iommufd (checks/preflight_vfio_cdev.cpp) on fixture hosts: INFO on a kernel without
// iommufd and VFIO device files (Debian 12's 6.1 and 6.12), PASS where the kernel has them and
// every selected function on vfio-pci has its /dev/vfio/devices/vfioN, WARN with the remedy where
// the config has them but a file is missing; never FAIL. The kernel config is read from
// boot/config-<release>, else lib/modules/<release>/config (Debian 13), else proc/config.gz; an
// image root's from its installed kernels.
#include "checks/preflight_vfio_cdev.hpp"

#include <zlib.h>

#include <catch2/catch.hpp>

#include "checks/image.hpp"
#include "drivers/seam/kmod.hpp"
#include "tests/checks/preflight_support.hpp"
#include "tests/support/fixture.hpp"

using namespace hostprep;
using namespace hostprep::test;

namespace {

// passthrough-done: both A10s and their audio functions on vfio-pci, kernel 6.1.0-test-amd64.
constexpr const char* kConfig = "boot/config-6.1.0-test-amd64";
constexpr const char* kOnVfio[] = {"0000:3b:00.0", "0000:3b:00.1", "0000:86:00.0", "0000:86:00.1"};

// What a 6.6+ kernel shows for a function on vfio-pci: vfio-dev/vfioN with its dev number, and
// the node devtmpfs made.
void giveDeviceFile(const Fixture& fx, const char* bdf, int n, bool node = true) {
  const std::string name = "vfio" + std::to_string(n);
  fx.write(std::string("sys/bus/pci/devices/") + bdf + "/vfio-dev/" + name + "/dev",
           "510:" + std::to_string(n) + "\n");
  if (node) fx.write("dev/vfio/devices/" + name, "");
}

std::string gzip(const std::string& text) {
  z_stream zs{};
  REQUIRE(deflateInit2(&zs, Z_BEST_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8,
                       Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&zs, text.size()) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  zs.avail_in = static_cast<uInt>(text.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

const std::string kGroupInterface =
    "VMMs use the VFIO group interface (/dev/vfio/<group>), as on every kernel before 6.6";

}  // namespace

TEST_CASE("iommufd: INFO on a kernel without iommufd and VFIO device files (6.1, 6.12)",
          "[preflight][vfio-cdev]") {
  Fixture fx("passthrough-done");
  SECTION("the config says so") {
    // Debian 12's 6.1 and 6.12 configs: neither symbol set.
    fx.write(kConfig, "CONFIG_VFIO=m\n# CONFIG_IOMMUFD is not set\n");
    const auto c = check(preflightOn(fx, Mode::kVmPassthrough), "iommu.iommufd");
    CHECK(c.status == CheckStatus::kInfo);
    CHECK(c.title == "iommufd and VFIO device files");
    CHECK(c.detail ==
          "the kernel has no iommufd and no VFIO device files (CONFIG_IOMMUFD not set, "
          "CONFIG_VFIO_DEVICE_CDEV not set in boot/config-6.1.0-test-amd64); " +
              kGroupInterface);
    CHECK(c.remedy.empty());
  }
  SECTION("the config in lib/modules/<release>/ alone, as Debian 13's 7.3 ships it") {
    // linux-base-7.3.4+deb13-amd64 has usr/lib/modules/<release>/config (lib is usr/lib on
    // Debian 13's merged /usr) and no boot/config-*.
    std::filesystem::remove(fx.path(kConfig));
    fx.write("lib/modules/6.1.0-test-amd64/config", "CONFIG_VFIO=m\n# CONFIG_IOMMUFD is not set\n");
    const auto c = check(preflightOn(fx, Mode::kVmPassthrough), "iommu.iommufd");
    CHECK(c.status == CheckStatus::kInfo);
    CHECK(c.detail ==
          "the kernel has no iommufd and no VFIO device files (CONFIG_IOMMUFD not set, "
          "CONFIG_VFIO_DEVICE_CDEV not set in lib/modules/6.1.0-test-amd64/config); " +
              kGroupInterface);
  }
  SECTION("no config to read, no /dev/iommu, vfio-dev without dev numbers (6.1)") {
    for (const char* b : kOnVfio)
      fx.write(std::string("sys/bus/pci/devices/") + b + "/vfio-dev/vfio0/uevent", "");
    const auto c = check(preflightOn(fx, Mode::kVmPassthrough), "iommu.iommufd");
    CHECK(c.status == CheckStatus::kInfo);
    CHECK(c.detail ==
          "the kernel has no iommufd and no VFIO device files (no /dev/iommu, and no kernel "
          "config to read (boot/config-6.1.0-test-amd64, lib/modules/6.1.0-test-amd64/config, "
          "proc/config.gz)); " +
              kGroupInterface);
  }
  SECTION("iommufd without device files") {
    fx.write(kConfig, "CONFIG_IOMMUFD=m\n");
    const auto c = check(preflightOn(fx, Mode::kVmPassthrough), "iommu.iommufd");
    CHECK(c.status == CheckStatus::kInfo);
    CHECK(c.detail ==
          "CONFIG_IOMMUFD=m, CONFIG_VFIO_DEVICE_CDEV not set in boot/config-6.1.0-test-amd64: "
          "iommufd without VFIO device files; " +
              kGroupInterface);
  }
}

TEST_CASE("iommufd: PASS where the kernel has them and every function has its device file",
          "[preflight][vfio-cdev]") {
  Fixture fx("passthrough-done");
  fx.write(kConfig, "CONFIG_IOMMUFD=y\nCONFIG_VFIO_DEVICE_CDEV=y\n");
  fx.write("dev/iommu", "");
  int n = 0;
  for (const char* b : kOnVfio) giveDeviceFile(fx, b, n++);
  const auto r = preflightOn(fx, Mode::kVmPassthrough);
  const auto c = check(r, "iommu.iommufd");
  CHECK(c.status == CheckStatus::kPass);
  CHECK(c.detail ==
        "CONFIG_IOMMUFD=y, CONFIG_VFIO_DEVICE_CDEV=y in boot/config-6.1.0-test-amd64; /dev/iommu "
        "present; 0000:3b:00.0 /dev/vfio/devices/vfio0, 0000:86:00.0 /dev/vfio/devices/vfio2, "
        "0000:3b:00.1 /dev/vfio/devices/vfio1, 0000:86:00.1 /dev/vfio/devices/vfio3");
  CHECK(check(preflightOn(fx, Mode::kContainer), "iommu.iommufd").status == CheckStatus::kSkip);
}

TEST_CASE("iommufd: PASS before prepare, from proc/config.gz when boot/config-* is absent",
          "[preflight][vfio-cdev]") {
  Fixture fx("preflight-intel");  // GPUs still on nvidia
  std::filesystem::remove(fx.path(kConfig));
  fx.write("proc/config.gz", gzip("CONFIG_IOMMUFD=m\nCONFIG_VFIO_DEVICE_CDEV=y\n"));
  const auto c = check(preflightOn(fx, Mode::kVmPassthrough), "iommu.iommufd");
  CHECK(c.status == CheckStatus::kPass);
  CHECK(c.detail ==
        "CONFIG_IOMMUFD=m, CONFIG_VFIO_DEVICE_CDEV=y in proc/config.gz; the iommufd module loads "
        "with vfio; no selected function on vfio-pci yet (prepare verifies each device file)");

  SECTION("a proc/config.gz that is not gzip is no config") {
    fx.write("proc/config.gz", "CONFIG_IOMMUFD=m\nCONFIG_VFIO_DEVICE_CDEV=y\n");
    CHECK(check(preflightOn(fx, Mode::kVmPassthrough), "iommu.iommufd").status ==
          CheckStatus::kInfo);
  }
}

TEST_CASE("iommufd: WARN with the remedy where the config has them but a file is missing",
          "[preflight][vfio-cdev]") {
  Fixture fx("passthrough-done");
  fx.write(kConfig, "CONFIG_IOMMUFD=y\nCONFIG_VFIO_DEVICE_CDEV=y\n");
  SECTION("a device file") {
    fx.write("dev/iommu", "");
    giveDeviceFile(fx, kOnVfio[0], 0);
    giveDeviceFile(fx, kOnVfio[1], 1, false);  // sysfs has it, /dev does not
    giveDeviceFile(fx, kOnVfio[2], 2);
    giveDeviceFile(fx, kOnVfio[3], 3);
    const auto r = preflightOn(fx, Mode::kVmPassthrough);
    const auto c = check(r, "iommu.iommufd");
    CHECK(c.status == CheckStatus::kWarn);
    CHECK(c.detail ==
          "CONFIG_IOMMUFD=y, CONFIG_VFIO_DEVICE_CDEV=y in boot/config-6.1.0-test-amd64, but "
          "0000:3b:00.1 on vfio-pci has no /dev/vfio/devices/vfioN (a vfio-dev/vfioN entry with a "
          "dev number in sysfs, and its node); VMs can still use /dev/vfio/<group>");
    CHECK(c.remedy ==
          "mount devtmpfs on /dev (the kernel creates /dev/vfio/devices/vfioN there), then run "
          "'hostprep prepare --mode vm-passthrough' again; if boot/config-6.1.0-test-amd64 is not "
          "the running kernel's, ignore this");
  }
  SECTION("/dev/iommu") {
    int n = 0;
    for (const char* b : kOnVfio) giveDeviceFile(fx, b, n++);
    const auto c = check(preflightOn(fx, Mode::kVmPassthrough), "iommu.iommufd");
    CHECK(c.status == CheckStatus::kWarn);
    CHECK(c.detail ==
          "CONFIG_IOMMUFD=y, CONFIG_VFIO_DEVICE_CDEV=y in boot/config-6.1.0-test-amd64, but "
          "/dev/iommu is missing: VMMs cannot use iommufd");
    CHECK(c.remedy ==
          "modprobe iommufd, and mount devtmpfs on /dev (the kernel creates /dev/iommu there)");
  }
}

TEST_CASE("iommufd on an image root: what each installed kernel's config says",
          "[preflight][image][vfio-cdev]") {
  Fixture fx("preflight-image-ready");
  auto run = [&] {
    RootHost host(fx.root());
    const BootConfig boot = readBootConfig(host);
    const auto kernels =
        readImageKernels(host, preflightModules("nvidia"),
                         [&](const std::string& r) { return makeKmodLoader(host, r); });
    return check(preflightImage(ImageFacts{boot, kernels}, PreflightRequest{}), "iommu.iommufd");
  };
  auto c = run();
  CHECK(c.status == CheckStatus::kInfo);
  CHECK(c.detail ==
        "kernel 6.1.0-18-amd64 built without iommufd and VFIO device files (CONFIG_IOMMUFD, "
        "CONFIG_VFIO_DEVICE_CDEV); " +
            kGroupInterface);
  fx.write("boot/config-6.1.0-18-amd64", "CONFIG_IOMMUFD=y\nCONFIG_VFIO_DEVICE_CDEV=y\n");
  c = run();
  CHECK(c.status == CheckStatus::kPass);
  CHECK(c.detail ==
        "kernel 6.1.0-18-amd64 built with iommufd and VFIO device files (CONFIG_IOMMUFD, "
        "CONFIG_VFIO_DEVICE_CDEV=y); the device files need the hardware");
  // Debian 13 ships the config in lib/modules/<release>/ only: read there when boot/ has none.
  std::filesystem::remove(fx.path("boot/config-6.1.0-18-amd64"));
  fx.write("lib/modules/6.1.0-18-amd64/config", "CONFIG_VFIO=m\n# CONFIG_IOMMUFD is not set\n");
  c = run();
  CHECK(c.status == CheckStatus::kInfo);
  CHECK(c.detail ==
        "kernel 6.1.0-18-amd64 built without iommufd and VFIO device files (CONFIG_IOMMUFD, "
        "CONFIG_VFIO_DEVICE_CDEV); " +
            kGroupInterface);
}

TEST_CASE("gunzip: the content whatever the trailer's size says, nullopt when cut or too big",
          "[platform]") {
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "CONFIG_SYMBOL_" + std::to_string(i) + "=y\n";
  const std::string gz = gzip(text);
  CHECK(gunzip(gz, 16u << 20) == text);
  // ISIZE (the last 4 bytes) is only a hint for the buffer: a lying one changes nothing, but
  // inflate checks it against the content, so the stream is reported corrupt.
  std::string small = gz, huge = gz;
  small.replace(small.size() - 4, 4, std::string("\x01\0\0\0", 4));
  huge.replace(huge.size() - 4, 4, "\xff\xff\xff\xff");
  CHECK_FALSE(gunzip(small, 16u << 20));
  CHECK_FALSE(gunzip(huge, 16u << 20));
  CHECK_FALSE(gunzip(gz, text.size() - 1));                     // over the cap
  CHECK(gunzip(gz, text.size()) == text);                       // exactly the cap
  CHECK_FALSE(gunzip(gz.substr(0, gz.size() / 2), 16u << 20));  // cut
  CHECK_FALSE(gunzip("not gzip at all, but long enough", 16u << 20));
}

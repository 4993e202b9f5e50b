#include "drivers/model/pending_writes.hpp"

#include <algorithm>
#include <chrono>
#include <set>

#include "drivers/common/text.hpp"
#include "drivers/model/pci_function.hpp"
#include "drivers/model/vgpu.hpp"

namespace hostprep {
namespace {

// Does a timed read of this attribute of the device go unanswered for a second? Its show() then
// waits for the device lock that a write still running in the kernel holds.
bool readWaits(const Host& host, const Bdf& bdf, std::string_view attr) {
  auto r = host.readAttr(hostPath(pciDevicePath(bdf), attr), std::chrono::milliseconds(1000));
  return !r && r.error().err == ETIMEDOUT;
}

}  // namespace

bool unbindStillPending(const Host& host, const Bdf& bdf, std::string_view driver) {
  if (readLinkName(host, hostPath(pciDevicePath(bdf), "driver")) ==
      std::optional<std::string>(driver)) {
    return true;  // remove() has not started
  }
  // The kernel clears dev->driver only after remove() returns, and the uevent attribute names it
  // ("DRIVER=<name>", drivers/base/core.c dev_uevent). Debian's 6.1 takes the device lock in
  // uevent's show() (the read waits while remove() runs); 6.12 does not, and neither does its
  // driver_override show() (a spinlock of its own, drivers/base/bus.c), so on 6.12 only DRIVER=
  // tells. A timed read covers both: no answer, or DRIVER=<driver>, means still running.
  // driver_override's timed read stays for a root without a uevent file.
  auto u = host.readAttr(hostPath(pciDevicePath(bdf), "uevent"), std::chrono::milliseconds(1000));
  if (!u && u.error().err == ETIMEDOUT) return true;
  if (u) {
    for (const auto& line : splitLines(*u)) {
      if (line == "DRIVER=" + std::string(driver)) return true;
    }
    return false;
  }
  return readWaits(host, bdf, "driver_override");
}

bool probeStillPending(const Host& host, const Bdf& bdf) {
  const std::string dev = pciDevicePath(bdf);
  if (readWaits(host, bdf, host.exists(hostPath(dev, "uevent")) ? "uevent" : "driver_override"))
    return true;
  return host.exists(hostPath(dev, "sriov_numvfs")) && readWaits(host, bdf, "sriov_numvfs");
}

bool numVfsWriteStillPending(const Host& host, const Bdf& pf) {
  return readWaits(host, pf, "sriov_numvfs");
}

std::vector<Bdf> vfSlots(const Host& host, const Bdf& pf) {
  std::set<Bdf> out;
  const std::string dir = pciDevicePath(pf);
  auto number = [&](const char* name) {
    return parseUnsigned(readTrimmed(host, hostPath(dir, name)).value_or("")).value_or(0);
  };
  const uint64_t total = std::min<uint64_t>(number("sriov_totalvfs"), 65535);
  const uint64_t offset = number("sriov_offset"), stride = number("sriov_stride");
  for (uint64_t i = 0; i < total && offset <= 65535 && stride <= 65535; ++i) {
    auto vf =
        vfAddress(pf, static_cast<int>(offset), static_cast<int>(stride), static_cast<int>(i));
    if (!vf) break;
    out.insert(*vf);
  }
  if (auto names = host.list(dir)) {
    for (const auto& n : *names) {
      if (!startsWith(n, "virtfn")) continue;
      if (auto target = readLinkName(host, hostPath(dir, n))) {
        if (auto b = parseBdf(*target)) out.insert(*b);
      }
    }
  }
  return {out.begin(), out.end()};
}

}  // namespace hostprep

#include "drivers/switch/run_step.hpp"

#include <string>
#include <string_view>

#include "drivers/common/text.hpp"
#include "drivers/common/validate.hpp"
#include "drivers/model/reset.hpp"
#include "drivers/model/snapshot.hpp"
#include "drivers/model/vgpu.hpp"
#include "drivers/switch/vgpu_steps.hpp"

namespace hostprep {

Result<DeviceState> readState(const Host& host, const Bdf& bdf) {
  const std::string dev = pciDevicePath(bdf);
  if (!host.exists(dev)) {
    return sysError("the device is gone from /" + dev, ENODEV,
                    "it was removed or fell off the bus; see dmesg");
  }
  DeviceState s;
  s.driver = readLinkName(host, hostPath(dev, "driver"));
  if (auto o = host.read(hostPath(dev, "driver_override"), 4096)) {
    s.driverOverride = parseDriverOverride(*o);
  }
  return s;
}

namespace {

using std::chrono::milliseconds;

// sriov-manage's get_nvidia_unbind_lock: write 1, read it back; 0 means a client holds the GPU.
Status takeUnbindLock(Host& h, const Step& st) {
  const std::string lock = unbindLockPath(*st.bdf);
  if (!h.exists(lock)) return {};  // not the nvidia driver, or one without the lock
  if (auto s = h.writeAttr(lock, "1"); !s) return stepError(st, s.error());
  if (readTrimmed(h, lock) != "1") {
    return stepError(st, sysError("the nvidia driver did not grant /" + lock, EBUSY),
                     "a process uses the GPU (nvidia-smi, nvidia-persistenced, a VM); stop it and "
                     "run again");
  }
  return {};
}

// The group's members on vfio whose vfio-dev/vfioN entry says the kernel made a device file:
// /dev/vfio/devices/vfioN must appear (devtmpfs creates it with the device).
Status verifyVfioDeviceFiles(const Host& h, const Step& st) {
  auto members =
      h.list(hostPath("sys/kernel/iommu_groups", std::to_string(st.group.value_or(-1)), "devices"));
  if (!members) return {};
  for (const auto& m : *members) {
    auto b = parseBdf(m);
    if (!b) continue;
    const std::string vdir = hostPath(pciDevicePath(*b), "vfio-dev");
    auto names = h.list(vdir);
    if (!names) continue;  // not on vfio, or a kernel before vfio-dev (< 6.1)
    for (const auto& n : *names) {
      if (!startsWith(n, "vfio") || !h.exists(hostPath(vdir, n, "dev"))) continue;
      const std::string node = hostPath("dev/vfio/devices", n);
      if (!waitFor([&] { return h.exists(node); }, milliseconds(2000))) {
        return stepError(st, sysError(b->str() + ": /" + node + " did not appear", ENOENT),
                         "the kernel lists the VFIO device file in sysfs; is devtmpfs mounted on "
                         "/dev?");
      }
    }
  }
  return {};
}

// A function whose config space reads 0xffff no longer answers (reset.hpp): it must not be
// probed, and a reset that leaves it so has failed.
Status checkAnswers(const Host& h, const Step& st, const Bdf& b, std::string_view when) {
  if (readResponsive(h, b) != false) return {};
  auto power = readTrimmed(h, hostPath(pciDevicePath(b), "power_state"));
  return stepError(
      st,
      sysError(b.str() + " does not answer " + std::string(when) + " (config space reads 0xffff" +
                   (power ? ", power state " + *power : "") + ")",
               EIO),
      notAnsweringAdvice(b));
}

// Back from a VM, off its driver: the kernel resets the function with the first of its
// reset_method that works (pci_reset_function), under the device lock; a reset that does not
// return in time is reported like a blocked unbind.
Status resetFunction(Host& h, const Step& st, const ApplyOptions& opt) {
  const std::string file = hostPath(pciDevicePath(*st.bdf), "reset");
  if (!h.exists(file)) {
    return stepError(st, sysError("/" + file + " is gone", ENOENT),
                     "the kernel no longer offers a reset for it; run again with --no-reset");
  }
  if (auto s = h.writeAttr(file, "1", opt.unbindTimeout); !s) {
    return stepError(st, s.error(),
                     s.error().err == ETIMEDOUT
                         ? "the reset has not returned; see dmesg (the device is left alone until "
                           "it does, and the next run restores it)"
                         : "see dmesg; --no-reset returns devices without a reset");
  }
  return checkAnswers(h, st, *st.bdf, "after its reset");
}

// Every function on the bus is off its driver (the plan put this step after their unbinds):
// the bridge's reset_subordinate resets the bus below it, saving and restoring each function's
// state (drivers/pci/pci.c __pci_reset_bus; it fails with EAGAIN rather than wait for a device
// lock another task holds).
Status resetBus(Host& h, const Step& st, const ApplyOptions& opt) {
  const auto bridge = parseBdf(st.arg);
  const std::string file = hostPath(pciDevicePath(*bridge), "reset_subordinate");
  if (!h.exists(file)) {
    return stepError(st, sysError("/" + file + " is gone", ENOENT),
                     "the kernel no longer offers a bus reset there; run again with --no-reset");
  }
  if (auto s = h.writeAttr(file, "1", opt.unbindTimeout); !s) {
    return stepError(st, s.error(), "see dmesg; --no-reset returns devices without a reset");
  }
  return checkAnswers(h, st, *st.bdf, "after the bus reset");
}

}  // namespace

Status runStep(Kernel& k, const Step& st, const ApplyOptions& opt) {
  if (auto v = checkStep(st); !v) return stepError(st, v.error());
  Host& h = k.host;
  const std::string dev = st.bdf ? pciDevicePath(*st.bdf) : std::string();
  const std::string bdf = st.bdf ? st.bdf->str() : std::string();
  switch (st.kind) {
    case StepKind::kLoadModule: {
      if (auto s = k.modules.load(st.arg); !s) return stepError(st, s.error());
      return {};
    }
    case StepKind::kSetOverride: {
      if (auto s = h.writeAttr(hostPath(dev, "driver_override"), st.arg.empty() ? "\n" : st.arg);
          !s) {
        return stepError(st, s.error());
      }
      auto state = readState(h, *st.bdf);
      if (!state) return stepError(st, state.error());
      auto now = state->driverOverride.value_or("");
      if (now != st.arg) {
        return stepError(st, sysError("driver_override reads '" + now + "'", EIO));
      }
      return {};
    }
    case StepKind::kUnbind: {
      auto s = h.writeAttr(hostPath(pciDriverPath(st.arg), "unbind"), bdf, opt.unbindTimeout);
      if (!s && s.error().err == ETIMEDOUT) {
        // The unbind is still pending in the kernel and holds the device lock: reading this
        // device's driver_override now would block us too. Report without touching it.
        return stepError(st, s.error(),
                         "the driver's remove() is blocked, usually because a process holds the "
                         "device; find it with 'fuser -v " +
                             join(opt.holderNodes, " ") + "', stop it, and run again");
      }
      auto now = readLinkName(h, hostPath(dev, "driver"));
      if (!s) {
        // ENODEV: it was no longer bound to that driver, which is what we wanted.
        if (s.error().err == ENODEV && now != st.arg) return {};
        return stepError(st, s.error(), "see dmesg");
      }
      if (now && *now == st.arg) return stepError(st, sysError("still bound after unbind", EBUSY));
      return {};
    }
    case StepKind::kProbe: {
      if (auto a = checkAnswers(h, st, *st.bdf, "before probing"); !a) return a;
      auto s = h.writeAttr("sys/bus/pci/drivers_probe", bdf, opt.unbindTimeout);
      if (!s && s.error().err == ETIMEDOUT) {
        return stepError(st, s.error(),
                         "a driver's probe() of it has not returned; see dmesg (the device is "
                         "left alone until it does, and the next run restores it)");
      }
      if (!s) return stepError(st, s.error(), "see dmesg for the driver's probe error");
      return {};
    }
    case StepKind::kVerifyDriver: {
      auto state = readState(h, *st.bdf);
      if (!state) return stepError(st, state.error());
      auto now = state->driver.value_or("");
      const bool ok = st.arg.empty() ? (now.empty() || !isVfioDriver(now)) : now == st.arg;
      if (!ok) {
        std::string got = now.empty() ? "no driver" : now;
        return stepError(st, sysError("bound to " + got + " after probing", ENODEV),
                         "the driver refused the device; see dmesg");
      }
      return {};
    }
    case StepKind::kVerifyModule: {
      auto state = readState(h, *st.bdf);
      if (!state) return stepError(st, state.error());
      const std::string now = state->driver.value_or("");
      // The bound driver's module, as the kernel links it (host_module.hpp); a driver without the
      // link counts as its module's where it carries the module's name.
      const bool named = !now.empty() && checkDriverName("driver", now);
      auto module = named ? readLinkName(h, hostPath(pciDriverPath(now), "module")) : std::nullopt;
      const bool ok = named && normalizeModuleName(module.value_or(now)) == st.arg;
      if (!ok) {
        std::string got = now.empty() ? "no driver" : now;
        if (module) got += " (module " + *module + ")";
        return stepError(st, sysError("bound to " + got + " after probing", ENODEV),
                         "the driver refused the device; see dmesg");
      }
      return {};
    }
    case StepKind::kVerifyVfioGroup: {
      const std::string node = "dev/vfio/" + std::to_string(st.group.value_or(-1));
      if (!waitFor([&] { return h.exists(node); }, milliseconds(2000))) {
        return stepError(st, sysError("/" + node + " did not appear", ENOENT),
                         "is vfio loaded and the IOMMU on? run 'hostprep preflight'");
      }
      // Where the kernel has VFIO device files (Linux 6.6+, CONFIG_VFIO_DEVICE_CDEV), each member
      // on vfio also gets /dev/vfio/devices/vfioN: its vfio-dev/vfioN entry has a `dev` number.
      // 6.1 lists vfio-dev/vfioN without one, and then the group node is all there is.
      return verifyVfioDeviceFiles(h, st);
    }
    case StepKind::kUnbindLock:
      return takeUnbindLock(h, st);
    case StepKind::kSetNumVfs:
      return setNumVfs(h, st, opt);
    case StepKind::kCreateVgpu:
      return createVgpu(h, st);
    case StepKind::kRemoveVgpu:
      return removeVgpu(h, st);
    case StepKind::kReset:
      return resetFunction(h, st, opt);
    case StepKind::kResetBus:
      return resetBus(h, st, opt);
  }
  return {};
}

}  // namespace hostprep

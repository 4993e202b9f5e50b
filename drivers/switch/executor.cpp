#include "drivers/switch/executor.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <system_error>
#include <thread>

#include "drivers/common/text.hpp"
#include "drivers/common/validate.hpp"
#include "drivers/model/snapshot.hpp"
#include "drivers/model/vgpu.hpp"
#include "drivers/switch/vgpu_steps.hpp"

namespace hostprep {
namespace {

using std::chrono::milliseconds;

// The driver and override of a device as the kernel shows them now: its `driver` link and its
// driver_override, the two attributes a step changes (not the whole function, which is a dozen
// reads more and ran after every override write and every probe). A device that is gone is an
// error, not a device without a driver: it must not verify as having left vfio.
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
      "run 'hostprep recover --devices " + b.str() +
          "' (a reset or a remove and rescan); if that fails, reboot the host");
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

// Puts sriov_numvfs back. Writes directly where the PF's driver can configure SR-IOV; otherwise
// (ENOENT: nvidia) parks the PF on pci-pf-stub for the write, as sriov-manage does, and returns
// it to the driver and override it had.
// A write that does not return in time leaves the PF's device lock taken (see JournalSriov): it
// sets *pending and returns at once, touching the PF no further.
Status restoreNumVfs(Kernel& k, const Bdf& pf, int want, const ApplyOptions& opt, bool* pending) {
  Host& h = k.host;
  const std::string attr = hostPath(pciDevicePath(pf), "sriov_numvfs");
  auto now = [&] { return parseUnsigned(readTrimmed(h, attr).value_or("")).value_or(0); };
  auto timed = [&](const std::string& count) -> Status {
    auto s = h.writeAttr(attr, count, opt.unbindTimeout);
    if (!s && s.error().err == ETIMEDOUT) *pending = true;
    return s;
  };
  auto write = [&]() -> Status {
    if (now() == static_cast<uint64_t>(want)) return {};
    if (now() != 0 && want != 0) {
      if (auto s = timed("0"); !s) return s;
    }
    return timed(std::to_string(want));
  };
  auto fail = [&](const Error& e) {
    return sysError(
        pf.str() + ": cannot put sriov_numvfs back to " + std::to_string(want) + ": " + e.message,
        e.err,
        "echo " + std::to_string(want) + " > /sys/bus/pci/devices/" + pf.str() + "/sriov_numvfs");
  };
  if (!h.exists(attr) || now() == static_cast<uint64_t>(want)) return {};
  auto s = write();
  if (s) return {};
  if (s.error().err != ENOENT) return fail(s.error());
  const auto before = readState(h, pf);
  if (!before) return fail(before.error());
  if (h.exists(unbindLockPath(pf))) (void)h.writeAttr(unbindLockPath(pf), "1");
  if (auto r = restoreDevice(k, pf, {std::string("pci-pf-stub"), std::string("pci-pf-stub")}, opt);
      !r) {
    (void)restoreDevice(k, pf, *before, opt);
    return fail(r.error());
  }
  s = write();
  if (*pending) return fail(s.error());  // the PF is locked: it stays on pci-pf-stub for now
  auto back = restoreDevice(k, pf, *before, opt);
  if (!s) return fail(s.error());
  if (!back) return back;
  return {};
}

// A device whose unbind or probe never returned: the kernel still runs the driver's remove() or
// probe() and holds the device lock, so anything that takes it (driver_override, sriov_numvfs,
// bind) would block us as well: leave it alone. `known`: the write timed out in this very run, so
// it is pending without asking (asking costs a timed read that itself waits in the kernel).
std::optional<Error> stillLocked(const Host& h, const JournalDevice& d, bool known) {
  if (d.pendingUnbind && (known || unbindStillPending(h, d.bdf, *d.pendingUnbind))) {
    return sysError(d.bdf.str() + ": left as it is: its unbind from " + *d.pendingUnbind +
                        " is still pending (the driver's remove() is blocked)",
                    EBUSY, "stop the process holding the device; the next run restores it");
  }
  if (d.pendingProbe && (known || probeStillPending(h, d.bdf))) {
    return sysError(d.bdf.str() + ": left as it is: a driver's probe() of it is still running",
                    EBUSY, "see dmesg; the next run restores it once the probe has returned");
  }
  return std::nullopt;
}

// Writes a rollback left running in the kernel (they timed out): unbinds (device, driver),
// binds (device) and sriov_numvfs writes (PF).
struct PendingWrites {
  std::map<Bdf, std::string> unbinds;
  std::set<Bdf> probes;
  std::set<Bdf> numVfs;
};

// Rolls back everything the journal covers, in the order that keeps each write legal: new vGPU
// devices go; VFs the run enabled go (vfio refuses a PF with VFs); drivers go back; VFs the run
// disabled come back; then the vGPU devices it removed. Returns the first error, if any.
// `inRun`: the rollback of the run that wrote the journal, which knows its timed-out writes.
// A write that times out in the rollback itself is added to `pending`.
Status rollBack(Kernel& k, const Journal& jr, const std::vector<JournalDevice>& devices,
                const ApplyOptions& opt, bool inRun, PendingWrites& pending) {
  Status first;
  auto keep = [&](Status s) {
    if (!s && first.ok()) first = s;
  };
  std::set<Bdf> stuck;
  for (auto it = devices.rbegin(); it != devices.rend(); ++it) {
    if (auto still = stillLocked(k.host, *it, inRun)) {
      keep(*still);
      stuck.insert(it->bdf);
    }
  }
  // A PF whose sriov_numvfs write still runs (this run's, an earlier one's, or one of this
  // rollback's that times out): it, its VFs and their vGPU devices stay as they are.
  std::set<Bdf> stuckPfs;
  auto lockedPf = [&](const Bdf& pf) {
    stuckPfs.insert(pf);
    stuck.insert(pf);
    for (const auto& vf : vfSlots(k.host, pf)) stuck.insert(vf);
  };
  for (const auto& sv : jr.sriov) {
    if (!sv.pendingWrite || (!inRun && !numVfsWriteStillPending(k.host, sv.pf))) continue;
    keep(sysError(sv.pf.str() +
                      ": left as it is: its sriov_numvfs write is still pending (the kernel is "
                      "still removing or adding a VF whose driver's remove() or probe() is "
                      "blocked)",
                  EBUSY,
                  "stop the VM or process holding the VF, or see dmesg for the VF driver's "
                  "probe(); the next run restores it"));
    lockedPf(sv.pf);
  }
  // True when the PF has its VF count back.
  auto numVfs = [&](const JournalSriov& sv, int want) {
    if (stuck.count(sv.pf)) return false;
    bool timedOut = false;
    Status s = restoreNumVfs(k, sv.pf, want, opt, &timedOut);
    keep(s);
    if (timedOut) {
      pending.numVfs.insert(sv.pf);
      lockedPf(sv.pf);
    }
    return s.ok();
  };
  auto restore = [&](const Bdf& bdf, const DeviceState& original) {
    std::optional<std::string> unbinding;
    bool probing = false;
    keep(restoreDevice(k, bdf, original, opt, &unbinding, &probing));
    if (unbinding) pending.unbinds[bdf] = *unbinding;
    if (probing) pending.probes.insert(bdf);
  };
  auto unstuck = [&] {  // the vGPU part of the journal, less what is stuck
    Journal free = jr;
    std::erase_if(free.vgpuGpus, [&](const Bdf& g) { return stuckPfs.count(g) != 0; });
    std::erase_if(free.vgpus, [&](const VgpuDevice& d) { return stuck.count(d.parent) != 0; });
    return free;
  };
  if (Journal free = unstuck(); !free.vgpuGpus.empty()) keep(removeNewVgpus(k, free));
  for (const auto& sv : jr.sriov) {
    if (sv.numvfs == 0) numVfs(sv, 0);
  }
  for (auto it = devices.rbegin(); it != devices.rend(); ++it) {
    if (!stuck.count(it->bdf)) restore(it->bdf, it->original);
  }
  for (const auto& sv : jr.sriov) {
    if (sv.numvfs == 0 || !numVfs(sv, sv.numvfs)) continue;
    // VFs enabled again are new devices on their default driver: each goes back to its own
    // (before the vGPU devices on them come back). A VF the run never removed is as it was.
    for (const auto& vf : sv.vfs) {
      if (!stuck.count(vf.bdf)) restore(vf.bdf, vf.state);
    }
  }
  if (Journal free = unstuck(); !free.vgpus.empty()) keep(recreateVgpus(k, free));
  // An unbindLock the run took and never got to use (the PF stayed on nvidia) is given back.
  for (const auto& sv : jr.sriov) {
    if (stuckPfs.count(sv.pf)) continue;
    if (readTrimmed(k.host, unbindLockPath(sv.pf)) == "1") {
      keep(k.host.writeAttr(unbindLockPath(sv.pf), "0"));
    }
  }
  return first;
}

// After a rollback whose writes timed out: the journal says so, so that the next run and the
// status read around those devices (their device lock stays taken until the kernel is done).
void markPending(Host& host, Journal jr, const PendingWrites& pending) {
  if (pending.unbinds.empty() && pending.probes.empty() && pending.numVfs.empty()) return;
  // A VF the rollback created anew is not among the journal's devices yet: it joins them, so
  // that the next run and the status leave it alone too.
  auto entry = [&](const Bdf& b) -> JournalDevice* {
    for (auto& d : jr.devices) {
      if (d.bdf == b) return &d;
    }
    for (const auto& sv : jr.sriov) {
      for (const auto& vf : sv.vfs) {
        if (vf.bdf != b) continue;
        jr.devices.push_back({b, vf.state, std::nullopt});
        return &jr.devices.back();
      }
    }
    return nullptr;
  };
  for (const auto& [bdf, driver] : pending.unbinds) {
    if (auto* d = entry(bdf)) d->pendingUnbind = driver;
  }
  for (const auto& bdf : pending.probes) {
    if (auto* d = entry(bdf)) d->pendingProbe = true;
  }
  for (auto& sv : jr.sriov) {
    if (pending.numVfs.count(sv.pf)) sv.pendingWrite = true;
  }
  (void)writeJournal(host, jr);
}

}  // namespace

namespace {

std::vector<std::string> holderGlobs(const Plan& plan, const ApplyOptions& opt) {
  std::vector<std::string> globs;
  for (const auto& st : plan.steps) {
    if (st.kind == StepKind::kRemoveVgpu && st.group) {
      globs.push_back("/dev/vfio/" + std::to_string(*st.group));  // a VM uses this vGPU
      continue;
    }
    if (st.kind != StepKind::kUnbind) continue;
    if (st.arg == opt.hostDriver || plan.hostDrivers.count(st.arg)) {
      globs.insert(globs.end(), opt.holderNodes.begin(), opt.holderNodes.end());
    } else if (isVfioDriver(st.arg)) {
      for (const auto& mv : plan.moves) {
        if (mv.bdf == *st.bdf && mv.group)
          globs.push_back("/dev/vfio/" + std::to_string(*mv.group));
      }
      for (const auto& vm : plan.vfMoves) {  // a VF a VM was given
        if (vm.bdf == *st.bdf && vm.group)
          globs.push_back("/dev/vfio/" + std::to_string(*vm.group));
      }
    }
  }
  std::sort(globs.begin(), globs.end());
  globs.erase(std::unique(globs.begin(), globs.end()), globs.end());
  return globs;
}

}  // namespace

std::vector<Holder> planHolders(const Host& host, const Plan& plan, const ApplyOptions& opt) {
  const auto globs = holderGlobs(plan, opt);
  if (globs.empty()) return {};
  return findHolders(host, globs);
}

std::vector<Holder> planHolders(const Host& host, const Plan& plan, const ApplyOptions& opt,
                                const std::vector<OpenNode>& open) {
  const auto globs = holderGlobs(plan, opt);
  if (globs.empty()) return {};
  return holdersAmong(host, open, globs);
}

Status restoreDevice(Kernel& k, const Bdf& bdf, const DeviceState& want, const ApplyOptions& opt,
                     std::optional<std::string>* unbindPending, bool* probePending) {
  Host& h = k.host;
  const std::string dev = pciDevicePath(bdf);
  auto fail = [&](const std::string& what, const Error& e) {
    return sysError(bdf.str() + ": cannot restore it to " + want.driver.value_or("no driver") +
                        ": " + what + ": " + e.message,
                    e.err,
                    "bind it by hand: echo " + bdf.str() + " > /sys/bus/pci/drivers/" +
                        want.driver.value_or("<driver>") + "/bind");
  };
  if (auto v = checkDeviceState(bdf.str() + ": original state", want); !v) return v;
  if (!h.exists(dev)) return sysError(bdf.str() + ": the device is gone", ENODEV);
  auto read = readState(h, bdf);
  if (!read) return fail("read", read.error());
  const DeviceState cur = *read;
  if (cur == want) return {};
  if (auto v = checkDeviceState(bdf.str() + ": current state", cur); !v) return v;
  // The kernel binds a device whose driver_override names a driver to that driver only
  // (pci_match_device() in drivers/pci/pci-driver.c; a bind to another fails with ENODEV). An
  // original override that names another driver than the original one (set once, never acted
  // on) is therefore written after the bind; until then the override names the wanted driver.
  const bool rebind = want.driver && cur.driver != want.driver;
  const bool overrideLast = rebind && want.driverOverride && *want.driverOverride != *want.driver;
  const std::optional<std::string> bindOverride = overrideLast ? want.driver : want.driverOverride;
  auto writeOverride = [&](const std::optional<std::string>& o) -> Status {
    if (auto s = h.writeAttr(hostPath(dev, "driver_override"), o.value_or("\n")); !s)
      return fail("driver_override", s.error());
    return {};
  };
  if (cur.driverOverride != bindOverride) {
    if (auto s = writeOverride(bindOverride); !s) return s;
  }
  if (cur.driver && cur.driver != want.driver) {
    auto s =
        h.writeAttr(hostPath(pciDriverPath(*cur.driver), "unbind"), bdf.str(), opt.unbindTimeout);
    if (!s && s.error().err == ETIMEDOUT && unbindPending) *unbindPending = *cur.driver;
    if (!s && s.error().err != ENODEV) return fail("unbind from " + *cur.driver, s.error());
  }
  // Whether the device is on `want`'s driver now (false when it is gone).
  auto onWanted = [&] {
    auto now = readState(h, bdf);
    return now && now->driver == want.driver;
  };
  if (want.driver && !onWanted()) {
    if (!h.exists(pciDriverPath(*want.driver))) {
      if (auto s = k.modules.load(*want.driver); !s) return fail("load", s.error());
    }
    auto s =
        h.writeAttr(hostPath(pciDriverPath(*want.driver), "bind"), bdf.str(), opt.unbindTimeout);
    if (!s && s.error().err == ETIMEDOUT) {  // the probe holds the device lock: read nothing
      if (probePending) *probePending = true;
      return fail("bind", s.error());
    }
    if (!s && !onWanted()) return fail("bind", s.error());
  }
  if (overrideLast) {
    if (auto s = writeOverride(want.driverOverride); !s) return s;
  }
  auto after = readState(h, bdf);
  if (!after) return fail("read", after.error());
  const DeviceState& now = *after;
  if (now != want) {
    return sysError(bdf.str() + ": restored, but it is on " + now.driver.value_or("no driver") +
                        " with override " + now.driverOverride.value_or("(none)"),
                    EIO, "see dmesg");
  }
  return {};
}

namespace {

// The device steps of a plan, split into lanes that may run at the same time, since the slow part
// of a switch is the driver's remove() and probe() and GPUs do not wait on each other: one lane per
// GPU, with its VFs and vGPU devices (a VF appears once its PF's sriov_numvfs is written, a vGPU
// device once its VF is bound: plan order within the lane), per IOMMU group (functions of one
// group move in plan order, GPU before companions), or per function in a group whose every
// changing member goes to a VFIO driver. vfio-pci binds a device whatever its group's other
// members are bound to; the group only becomes usable once all of them are on a vfio driver or on
// none (Documentation/driver-api/vfio.rst, "Groups, Devices, and IOMMUs": a group is "viable"),
// which the group steps (verify /dev/vfio/N) check once every lane is done. So a companion's
// unbind need not wait for the GPU's remove(). Moves to host drivers keep the group's order.
std::vector<std::vector<size_t>> deviceLanes(const Plan& plan) {
  std::set<int> toHost;  // groups with a member moving to a non-VFIO driver
  for (const auto& mv : plan.moves) {
    if (mv.changes && mv.group && !isVfioDriver(mv.toDriver)) toHost.insert(*mv.group);
  }
  std::map<std::string, std::vector<size_t>> lanes;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& st = plan.steps[i];
    if (!st.bdf) continue;
    const auto vf = plan.vfGpu.find(*st.bdf);
    const Bdf unit = vf == plan.vfGpu.end() ? *st.bdf : vf->second;
    std::string key = unit.str();
    for (const auto& mv : plan.moves) {
      if (mv.bdf == unit && mv.group && toHost.count(*mv.group))
        key = "group " + std::to_string(*mv.group);
    }
    lanes[key].push_back(i);
  }
  std::vector<std::vector<size_t>> out;
  for (auto& [key, steps] : lanes) out.push_back(std::move(steps));
  std::sort(out.begin(), out.end());  // by first step: plan order
  return out;
}

}  // namespace

Result<ApplyResult> applyPlan(Kernel& k, const Plan& plan, const ApplyOptions& opt) {
  ApplyResult res;
  if (plan.noop()) return res;

  Journal jr{plan.mode, static_cast<int>(::getpid()), {}, plan.steps, 0, {}, plan.vgpuGpus, {}};
  for (const auto& mv : plan.moves) {
    if (mv.changes) jr.devices.push_back({mv.bdf, mv.from, std::nullopt});
  }
  for (const auto& vm : plan.vfMoves) jr.devices.push_back({vm.bdf, vm.from, std::nullopt});
  for (const auto& sc : plan.sriov) jr.sriov.push_back({sc.pf, sc.from, false, sc.vfs});
  if (!jr.vgpuGpus.empty()) jr.vgpus = readVgpuDevices(k.host, liveParents(k.host, jr.vgpuGpus));

  // Shared by the lanes, under one mutex: the journal, the touched set, the first error.
  std::mutex mu;
  std::set<Bdf> touched;
  std::optional<Error> failure;
  bool abandoned = false;  // the test hook stopped the run like a crash: no rollback
  std::atomic<bool> stop{false};

  auto moveOf = [&](const Bdf& b) -> const DeviceMove* {
    for (const auto& mv : plan.moves) {
      if (mv.bdf == b) return &mv;
    }
    return nullptr;
  };
  std::map<Bdf, size_t> lastStepOf;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    if (plan.steps[i].bdf) lastStepOf[*plan.steps[i].bdf] = i;
  }
  // Runs step i: journal first, then the write, then the hooks. False stops the caller's lane.
  using Clock = std::chrono::steady_clock;
  auto ms = [](Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  // The journal is written once, before the first step: it holds every device the plan may
  // touch with its original state, which is all a recovery needs (restoring a device that was
  // not reached changes nothing). It is written again only when that changes: an unbind left
  // pending. Rewriting it before every step cost more than the steps themselves.
  auto journal = [&]() -> Status {  // under mu
    const auto t0 = Clock::now();
    auto written = writeJournal(k.host, jr);
    res.journalMs += ms(Clock::now() - t0);
    ++res.journalWrites;
    return written;
  };
  auto runOne = [&](size_t i) -> bool {
    const Step& st = plan.steps[i];
    {
      std::lock_guard<std::mutex> g(mu);
      if (stop) return false;
      if (st.bdf) touched.insert(*st.bdf);
      if (res.journalWrites == 0) {
        if (auto written = journal(); !written) {
          failure = written.error();
          stop = true;
          return false;
        }
      }
    }
    const auto t0 = Clock::now();
    Status s = runStep(k, st, opt);
    const double took = ms(Clock::now() - t0);
    std::lock_guard<std::mutex> g(mu);
    res.stepMs[i] = took;
    ++res.stepsRun;
    // A device's steps need not be contiguous (a vGPU plan returns to a PF after its VFs):
    // it is reported once, after the last of them.
    const bool lastOfDevice = st.bdf && lastStepOf.at(*st.bdf) == i;
    if (st.bdf && (!s || lastOfDevice) && opt.onDevice) {
      if (const auto* mv = moveOf(*st.bdf)) opt.onDevice(*mv, s);
    }
    if (!s) {
      if (s.error().err == ETIMEDOUT &&
          (st.kind == StepKind::kUnbind || st.kind == StepKind::kProbe ||
           st.kind == StepKind::kSetNumVfs || st.kind == StepKind::kReset)) {
        for (auto& d : jr.devices) {
          if (d.bdf != *st.bdf) continue;
          if (st.kind == StepKind::kUnbind) d.pendingUnbind = st.arg;
          // A reset holds the device lock as a probe does: restoring waits for it to be done.
          if (st.kind == StepKind::kProbe || st.kind == StepKind::kReset) d.pendingProbe = true;
        }
        for (auto& sv : jr.sriov) {
          if (st.kind == StepKind::kSetNumVfs && sv.pf == *st.bdf) sv.pendingWrite = true;
        }
        jr.next = i;
        (void)journal();
      }
      if (!failure) failure = s.error();
      stop = true;
      return false;
    }
    if (opt.afterStep && !opt.afterStep(i)) {
      abandoned = true;
      if (!failure)
        failure = sysError("stopped after step " + std::to_string(i) + " (test hook)", EINTR);
      stop = true;
      return false;
    }
    return true;
  };

  if (!opt.parallel) {
    // Plan order, one step at a time.
    for (size_t i = 0; i < plan.steps.size() && !stop; ++i) runOne(i);
  } else {
    // 1. Global steps (module loads) first, 2. device lanes in parallel, 3. group checks last.
    for (size_t i = 0; i < plan.steps.size() && !stop; ++i) {
      if (!plan.steps[i].bdf && plan.steps[i].kind != StepKind::kVerifyVfioGroup) runOne(i);
    }
    auto lanes = deviceLanes(plan);
    auto runLane = [&](const std::vector<size_t>& lane) {
      for (size_t i : lane) {
        if (!runOne(i)) return;
      }
    };
    if (!stop) {
      // An exception in a lane (there should be none: steps return errors) is carried to this
      // thread and rethrown after every lane has stopped, never left to std::terminate.
      std::exception_ptr thrown;
      auto guarded = [&](const std::vector<size_t>& lane) {
        try {
          runLane(lane);
        } catch (...) {
          std::lock_guard<std::mutex> g(mu);
          if (!thrown) thrown = std::current_exception();
          stop = true;
        }
      };
      std::vector<std::thread> threads;
      for (const auto& lane : lanes) {
        try {
          std::function<void()> body = [&guarded, lanePtr = &lane] { guarded(*lanePtr); };
          threads.push_back(opt.startThread ? opt.startThread(std::move(body))
                                            : std::thread(std::move(body)));
        } catch (const std::system_error&) {
          // No thread to be had (EAGAIN: a pids limit, TasksMax): this lane runs here, after
          // the started ones began; a switch slower, not one left half-done or terminated.
          guarded(lane);
        }
      }
      for (auto& t : threads) t.join();
      if (thrown) std::rethrow_exception(thrown);
    }
    for (size_t i = 0; i < plan.steps.size() && !stop; ++i) {
      if (plan.steps[i].kind == StepKind::kVerifyVfioGroup) runOne(i);
    }
  }

  if (failure) {
    if (abandoned) return *failure;
    Error e = *failure;
    std::vector<JournalDevice> devices;
    for (const auto& d : jr.devices) {
      if (touched.count(d.bdf)) devices.push_back(d);
    }
    jr.devices = devices;  // what a later run must still restore if this rollback cannot
    (void)writeJournal(k.host, jr);
    PendingWrites pending;
    auto rb = rollBack(k, jr, devices, opt, true, pending);
    markPending(k.host, jr, pending);
    res.rolledBack = true;
    if (rb) {
      (void)removeJournal(k.host);
      e.advice += std::string(e.advice.empty() ? "" : "; ") +
                  "every device was put back on its original driver";
    } else {
      e.advice += std::string(e.advice.empty() ? "" : "; ") +
                  "ROLLBACK FAILED: " + rb.error().describe() +
                  "; the journal stays in /run/hostprep/ and the next run retries";
    }
    return e;
  }
  if (auto s = removeJournal(k.host); !s) return s.error();
  return res;
}

Result<std::optional<size_t>> recoverJournal(Kernel& k, const ApplyOptions& opt) {
  auto jr = readJournal(k.host);
  if (!jr) return jr.error();
  if (!*jr) return std::optional<size_t>{};
  const Journal& j = **jr;
  PendingWrites pending;
  if (auto s = rollBack(k, j, j.devices, opt, false, pending); !s) {
    markPending(k.host, j, pending);
    Error e = s.error();
    e.message = "resolving the journal of an interrupted run (pid " + std::to_string(j.pid) +
                "): " + e.message;
    return e;
  }
  if (auto s = removeJournal(k.host); !s) return s.error();
  return std::optional<size_t>(j.devices.size());
}

}  // namespace hostprep

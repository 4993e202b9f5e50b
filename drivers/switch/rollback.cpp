#include "drivers/switch/rollback.hpp"

#include <cstdint>

#include "drivers/common/text.hpp"
#include "drivers/model/snapshot.hpp"
#include "drivers/model/vgpu.hpp"
#include "drivers/switch/run_state.hpp"
#include "drivers/switch/run_step.hpp"
#include "drivers/switch/vgpu_steps.hpp"

namespace hostprep {
namespace {

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

}  // namespace

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

}  // namespace hostprep

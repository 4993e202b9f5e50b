#include "drivers/switch/recover.hpp"

#include <algorithm>

#include "drivers/common/text.hpp"
#include "drivers/common/validate.hpp"
#include "drivers/model/reset.hpp"
#include "drivers/switch/vgpu_steps.hpp"

namespace hostprep {
namespace {

using std::chrono::milliseconds;

constexpr std::string_view kRescanMark = "run/hostprep/rescan";

bool sameSlot(const Bdf& a, const Bdf& b) {
  return a.domain == b.domain && a.bus == b.bus && a.device == b.device;
}

bool allAnswer(const Host& h, const std::vector<Bdf>& fns) {
  return std::all_of(fns.begin(), fns.end(), [&](const Bdf& b) {
    return h.exists(pciDevicePath(b)) && readResponsive(h, b) != false;
  });
}

std::vector<std::string> silent(const Host& h, const std::vector<Bdf>& fns) {
  std::vector<std::string> out;
  for (const auto& b : fns) {
    if (!h.exists(pciDevicePath(b))) {
      out.push_back(b.str() + " (gone)");
    } else if (readResponsive(h, b) == false) {
      out.push_back(b.str());
    }
  }
  return out;
}

Error named(Error e, const Bdf& who, std::string_view what) {
  e.message = who.str() + ": " + std::string(what) + ": " + e.message;
  e.advice = e.err == ETIMEDOUT ? "the kernel has not returned; see dmesg, and reboot the host "
                                  "if the device stays stuck"
                                : "see dmesg";
  return e;
}

Status timedWrite(Host& h, const std::string& path, std::string_view value, const Bdf& who,
                  const ApplyOptions& opt, std::string_view what) {
  auto s = h.writeAttr(path, value, opt.unbindTimeout);
  if (s) return {};
  return named(s.error(), who, what);
}

}  // namespace

Result<RecoverUnit> recoverUnit(const Snapshot& s, const std::vector<Bdf>& gpus) {
  RecoverUnit u;
  u.gpus = gpus;
  if (gpus.empty()) return usageError("recover: no device", "name the GPUs with --devices BDF,...");
  const BusId bus = busOf(gpus.front());
  for (const auto& g : gpus) {
    if (busOf(g) != bus) {
      return usageError(
          "--devices: " + gpus.front().str() + " and " + g.str() + " sit on different buses",
          "recover the GPUs of one bus at a time");
    }
  }
  for (const PciFunction* f : functionsOn(s, bus)) {
    const bool ours =
        std::any_of(gpus.begin(), gpus.end(), [&](const Bdf& g) { return sameSlot(g, f->bdf); });
    (ours ? u.functions : u.othersOnBus).push_back(f->bdf);
  }
  if (const PciFunction* br = bridgeOf(s, bus)) {
    u.bridge = br->bdf;
    u.bridgeResets = br->resetSubordinate;
  }
  for (const auto& b : u.functions) {
    const PciFunction* f = s.find(b);
    if (f && resetOptionOf(s, *f, u.functions).way == ResetWay::kFunction) u.ownReset.push_back(b);
  }
  return u;
}

std::vector<Bdf> notTheGpus(const Snapshot& s, const RecoverUnit& u, const SelectionOptions& opt) {
  std::vector<Bdf> out;
  for (const auto& b : u.functions) {
    const PciFunction* f = s.find(b);
    if (!f || isSelectedGpu(*f, opt)) continue;
    const bool gpuVendor = std::any_of(u.gpus.begin(), u.gpus.end(), [&](const Bdf& g) {
      const PciFunction* gf = s.find(g);
      return gf && sameSlot(g, b) && gf->id.vendor == f->id.vendor;
    });
    if (!gpuVendor && !isCompanionClass(f->classCode)) out.push_back(b);
  }
  return out;
}

std::vector<std::string> recoverLadder(const Snapshot& s, const RecoverUnit& u) {
  std::vector<std::string> out;
  for (const auto& b : u.functions) {
    const PciFunction* f = s.find(b);
    if (f && f->driver) out.push_back("unbind " + b.str() + " from " + *f->driver);
  }
  for (const auto& b : u.ownReset) {
    if (const PciFunction* f = s.find(b))
      out.push_back("reset " + b.str() + " (" + resetOptionOf(s, *f, u.functions).describe() + ")");
  }
  const std::string bus = busOf(u.functions.front()).str();
  if (!u.bridge) {
    out.push_back("no bus reset: no bridge above bus " + bus);
  } else if (!u.bridgeResets) {
    out.push_back("no bus reset: " + u.bridge->str() + " offers no reset_subordinate");
  } else if (!u.othersOnBus.empty()) {
    out.push_back("no bus reset: bus " + bus + " also carries " + joinBdfs(u.othersOnBus));
  } else {
    out.push_back("reset bus " + bus + " through " + u.bridge->str() + " (reset_subordinate)");
  }
  out.push_back("remove " + joinBdfs(u.functions) + " and rescan " +
                (u.bridge ? "bus " + bus + " through " + u.bridge->str() : "the PCI tree"));
  return out;
}

Result<bool> resolveInterruptedRescan(Host& host) {
  auto mark = readTrimmed(host, kRescanMark);
  if (!mark) return false;
  const auto bridge = parseBdf(*mark);
  std::string file = "sys/bus/pci/rescan";
  if (bridge && host.exists(hostPath(pciDevicePath(*bridge), "rescan")))
    file = hostPath(pciDevicePath(*bridge), "rescan");
  if (auto s = host.writeAttr(file, "1", milliseconds(30'000)); !s) {
    Error e = s.error();
    e.message = "rescanning the PCI bus a recover left removed: " + e.message;
    e.advice = "echo 1 > /sys/bus/pci/rescan by hand, or reboot the host";
    return e;
  }
  if (auto s = host.removeFile(kRescanMark); !s) return s.error();
  return true;
}

Result<RecoverOutcome> climbRecoverLadder(Kernel& k, const RecoverUnit& u, const ApplyOptions& opt,
                                          bool probeGpus) {
  Host& h = k.host;
  RecoverOutcome out;
  std::vector<Bdf> unbound;
  // 1. Nothing stays bound: a reset or a remove under a driver is the driver's business.
  for (const auto& b : u.functions) {
    auto drv = readLinkName(h, hostPath(pciDevicePath(b), "driver"));
    if (!drv) continue;
    if (auto st = checkDriverName("driver", *drv); !st) return st.error();
    if (auto st = timedWrite(h, hostPath(pciDriverPath(*drv), "unbind"), b.str(), b, opt,
                             "unbind from " + *drv);
        !st) {
      return st.error();
    }
    out.tried.push_back("unbound " + b.str() + " from " + *drv);
    unbound.push_back(b);
  }
  auto done = [&](std::string by) {
    out.answers = true;
    out.by = std::move(by);
    // 5. What it unbound gets a driver again, as the functions a rescan adds do: the kernel
    // probes them (their driver_override first). The GPUs go to their mode's driver after this;
    // without a mode they are probed as well, bound before or not (a probe that failed once).
    std::vector<Bdf> probe;
    for (const auto& b : u.functions) {
      const bool gpu = std::find(u.gpus.begin(), u.gpus.end(), b) != u.gpus.end();
      const bool wasUnbound = std::find(unbound.begin(), unbound.end(), b) != unbound.end();
      if (gpu ? probeGpus : wasUnbound) probe.push_back(b);
    }
    for (const auto& b : probe) {
      if (!h.exists(pciDevicePath(b)) || readLinkName(h, hostPath(pciDevicePath(b), "driver")))
        continue;
      auto st = h.writeAttr("sys/bus/pci/drivers_probe", b.str(), opt.unbindTimeout);
      auto drv = readLinkName(h, hostPath(pciDevicePath(b), "driver"));
      out.tried.push_back("probed " + b.str() + ": " +
                          (!st   ? "failed (" + st.error().describe() + ")"
                           : drv ? "on " + *drv
                                 : std::string("no driver takes it")));
    }
    return out;
  };
  // 2. Each function's own reset (not the kernel's bus method listed beside other functions:
  // recoverUnit judged them).
  bool anyReset = false;
  for (const auto& b : u.ownReset) {
    if (!h.exists(hostPath(pciDevicePath(b), "reset"))) continue;
    auto st = h.writeAttr(hostPath(pciDevicePath(b), "reset"), "1", opt.unbindTimeout);
    if (!st && st.error().err == ETIMEDOUT) return named(st.error(), b, "reset");
    if (st) anyReset = true;
    out.tried.push_back("reset " + b.str() +
                        (st ? std::string() : " failed (" + st.error().describe() + ")"));
  }
  if (anyReset && allAnswer(h, u.functions)) return done("a function reset");
  if (anyReset) out.tried.push_back("still silent: " + join(silent(h, u.functions), ", "));
  // 3. The bus, when it is the GPU's alone.
  if (u.bridge && u.bridgeResets && u.othersOnBus.empty()) {
    auto st = h.writeAttr(hostPath(pciDevicePath(*u.bridge), "reset_subordinate"), "1",
                          opt.unbindTimeout);
    out.tried.push_back("reset bus " + busOf(u.functions.front()).str() + " through " +
                        u.bridge->str() +
                        (st ? std::string() : " failed (" + st.error().describe() + ")"));
    if (st && allAnswer(h, u.functions)) return done("a bus reset through " + u.bridge->str());
  }
  // 4. Remove and rescan. The mark goes first: a run killed in between is rescanned by the next.
  if (auto st = h.makeDirs("run/hostprep", 0755); !st) return st.error();
  if (auto st = h.writeFileAtomic(kRescanMark, (u.bridge ? u.bridge->str() : "all") + "\n", 0644);
      !st) {
    return st.error();
  }
  std::vector<Bdf> order(u.functions.rbegin(), u.functions.rend());  // function 0 last
  for (const auto& b : order) {
    if (!h.exists(hostPath(pciDevicePath(b), "remove"))) continue;
    if (auto st = timedWrite(h, hostPath(pciDevicePath(b), "remove"), "1", b, opt, "remove"); !st)
      return st.error();
  }
  auto rescanned = resolveInterruptedRescan(h);
  if (!rescanned) return rescanned.error();
  out.tried.push_back("removed " + joinBdfs(u.functions) + " and rescanned " +
                      (u.bridge ? "bus " + busOf(u.functions.front()).str() : "the PCI tree"));
  // The kernel adds the functions back as it enumerates them: wait for every one.
  waitFor(
      [&] {
        return std::all_of(u.functions.begin(), u.functions.end(),
                           [&](const Bdf& b) { return h.exists(pciDevicePath(b)); });
      },
      milliseconds(5000));
  if (allAnswer(h, u.functions)) return done("a remove and rescan");
  out.tried.push_back("still silent: " + join(silent(h, u.functions), ", "));
  return out;
}

}  // namespace hostprep

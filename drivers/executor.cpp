#include "drivers/executor.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "drivers/snapshot.hpp"

namespace hostprep {
namespace {

using std::chrono::milliseconds;

DeviceState readState(const Host& host, const Bdf& bdf) {
  auto f = readPciFunction(host, bdf);
  if (!f) return {};
  return {f->driver, f->driverOverride};
}

Error stepError(const Step& st, const Error& cause, std::string advice = {}) {
  Error e = cause;
  e.message = st.describe() + ": " + cause.message;
  if (!advice.empty()) e.advice = std::move(advice);
  e.exit = Exit::kFailed;
  return e;
}

// Waits (briefly) for a condition the kernel settles asynchronously, e.g. a /dev node.
bool waitFor(const std::function<bool()>& cond, milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!cond()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return true;
}

Status runStep(Kernel& k, const Step& st, const ApplyOptions& opt) {
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
      auto now = readState(h, *st.bdf).driverOverride.value_or("");
      if (now != st.arg) {
        return stepError(st, sysError("driver_override reads '" + now + "'", EIO));
      }
      return {};
    }
    case StepKind::kUnbind: {
      auto s = h.writeAttr(hostPath(pciDriverPath(st.arg), "unbind"), bdf, opt.unbindTimeout);
      auto now = readState(h, *st.bdf).driver;
      if (!s) {
        // ENODEV: it was no longer bound to that driver, which is what we wanted.
        if (s.error().err == ENODEV && now != st.arg) return {};
        std::string advice = s.error().err == ETIMEDOUT
                                 ? "the driver's remove() is blocked, usually because a process "
                                   "holds the device; find it with 'fuser -v /dev/nvidia*', stop "
                                   "it, and run again"
                                 : "see dmesg";
        return stepError(st, s.error(), advice);
      }
      if (now && *now == st.arg) return stepError(st, sysError("still bound after unbind", EBUSY));
      return {};
    }
    case StepKind::kProbe: {
      auto s = h.writeAttr("sys/bus/pci/drivers_probe", bdf, opt.unbindTimeout);
      if (!s) return stepError(st, s.error(), "see dmesg for the driver's probe error");
      return {};
    }
    case StepKind::kVerifyDriver: {
      auto now = readState(h, *st.bdf).driver.value_or("");
      const bool ok = st.arg.empty() ? (now.empty() || !isVfioDriver(now)) : now == st.arg;
      if (!ok) {
        std::string got = now.empty() ? "no driver" : now;
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
      return {};
    }
  }
  return {};
}

// Roll back every device touched so far, last first. Returns the first restore error, if any.
Status rollBack(Kernel& k, const std::vector<JournalDevice>& devices, const ApplyOptions& opt) {
  Status first;
  for (auto it = devices.rbegin(); it != devices.rend(); ++it) {
    auto s = restoreDevice(k, it->bdf, it->original, opt);
    if (!s && first.ok()) first = s;
  }
  return first;
}

}  // namespace

std::vector<Holder> planHolders(const Host& host, const Plan& plan, const ApplyOptions& opt) {
  std::vector<std::string> globs;
  for (const auto& st : plan.steps) {
    if (st.kind != StepKind::kUnbind) continue;
    if (st.arg == opt.hostDriver) {
      globs.insert(globs.end(), opt.holderNodes.begin(), opt.holderNodes.end());
    } else if (isVfioDriver(st.arg)) {
      for (const auto& mv : plan.moves) {
        if (mv.bdf == *st.bdf && mv.group) globs.push_back("/dev/vfio/" + std::to_string(*mv.group));
      }
    }
  }
  std::sort(globs.begin(), globs.end());
  globs.erase(std::unique(globs.begin(), globs.end()), globs.end());
  if (globs.empty()) return {};
  return findHolders(host, globs);
}

Status restoreDevice(Kernel& k, const Bdf& bdf, const DeviceState& want, const ApplyOptions& opt) {
  Host& h = k.host;
  const std::string dev = pciDevicePath(bdf);
  auto fail = [&](const std::string& what, const Error& e) {
    return sysError(bdf.str() + ": cannot restore it to " + want.driver.value_or("no driver") +
                        ": " + what + ": " + e.message,
                    e.err,
                    "bind it by hand: echo " + bdf.str() + " > /sys/bus/pci/drivers/" +
                        want.driver.value_or("<driver>") + "/bind");
  };
  if (!h.exists(dev)) return sysError(bdf.str() + ": the device is gone", ENODEV);
  DeviceState cur = readState(h, bdf);
  if (cur == want) return {};
  if (cur.driverOverride != want.driverOverride) {
    if (auto s = h.writeAttr(hostPath(dev, "driver_override"), want.driverOverride.value_or("\n"));
        !s) {
      return fail("driver_override", s.error());
    }
  }
  if (cur.driver && cur.driver != want.driver) {
    auto s = h.writeAttr(hostPath(pciDriverPath(*cur.driver), "unbind"), bdf.str(), opt.unbindTimeout);
    if (!s && s.error().err != ENODEV) return fail("unbind from " + *cur.driver, s.error());
  }
  if (want.driver && readState(h, bdf).driver != want.driver) {
    if (!h.exists(pciDriverPath(*want.driver))) {
      if (auto s = k.modules.load(*want.driver); !s) return fail("load", s.error());
    }
    auto s = h.writeAttr(hostPath(pciDriverPath(*want.driver), "bind"), bdf.str(), opt.unbindTimeout);
    if (!s && readState(h, bdf).driver != want.driver) return fail("bind", s.error());
  }
  DeviceState now = readState(h, bdf);
  if (now != want) {
    return sysError(bdf.str() + ": restored, but it is on " + now.driver.value_or("no driver") +
                        " with override " + now.driverOverride.value_or("(none)"),
                    EIO, "see dmesg");
  }
  return {};
}

namespace {

// The device steps of a plan, split into lanes that may run at the same time: one lane per IOMMU
// group (functions of one group move in plan order, GPU before companions), since the slow part
// of a switch is the driver's remove() and devices in different groups do not wait on each other.
std::vector<std::vector<size_t>> deviceLanes(const Plan& plan) {
  std::map<std::string, std::vector<size_t>> lanes;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& st = plan.steps[i];
    if (!st.bdf) continue;
    std::string key = st.bdf->str();
    for (const auto& mv : plan.moves) {
      if (mv.bdf == *st.bdf && mv.group) key = "group " + std::to_string(*mv.group);
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

  Journal jr{plan.mode, static_cast<int>(::getpid()), {}, plan.steps, 0};
  for (const auto& mv : plan.moves) {
    if (mv.changes) jr.devices.push_back({mv.bdf, mv.from});
  }

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
  // Runs step i: journal first, then the write, then the hooks. False stops the caller's lane.
  auto runOne = [&](size_t i) -> bool {
    const Step& st = plan.steps[i];
    {
      std::lock_guard<std::mutex> g(mu);
      if (stop) return false;
      jr.next = std::max(jr.next, i);
      if (st.bdf) touched.insert(*st.bdf);
      if (auto s = writeJournal(k.host, jr); !s) {
        failure = s.error();
        stop = true;
        return false;
      }
    }
    Status s = runStep(k, st, opt);
    std::lock_guard<std::mutex> g(mu);
    ++res.stepsRun;
    const bool lastOfDevice =
        st.bdf && (i + 1 == plan.steps.size() || plan.steps[i + 1].bdf != st.bdf);
    if (st.bdf && (!s || lastOfDevice) && opt.onDevice) {
      if (const auto* mv = moveOf(*st.bdf)) opt.onDevice(*mv, s);
    }
    if (!s) {
      if (!failure) failure = s.error();
      stop = true;
      return false;
    }
    if (opt.afterStep && !opt.afterStep(i)) {
      abandoned = true;
      if (!failure) failure = sysError("stopped after step " + std::to_string(i) + " (test hook)", EINTR);
      stop = true;
      return false;
    }
    return true;
  };

  // 1. Global steps (module loads) first, 2. device lanes in parallel, 3. group checks last.
  for (size_t i = 0; i < plan.steps.size() && !stop; ++i) {
    if (!plan.steps[i].bdf && plan.steps[i].kind != StepKind::kVerifyVfioGroup) runOne(i);
  }
  if (!stop) {
    auto lanes = deviceLanes(plan);
    auto runLane = [&](const std::vector<size_t>& lane) {
      for (size_t i : lane) {
        if (!runOne(i)) return;
      }
    };
    if (opt.parallel && lanes.size() > 1) {
      std::vector<std::thread> threads;
      for (const auto& lane : lanes) threads.emplace_back(runLane, std::cref(lane));
      for (auto& t : threads) t.join();
    } else {
      for (const auto& lane : lanes) runLane(lane);
    }
  }
  for (size_t i = 0; i < plan.steps.size() && !stop; ++i) {
    if (plan.steps[i].kind == StepKind::kVerifyVfioGroup) runOne(i);
  }

  if (failure) {
    if (abandoned) return *failure;
    Error e = *failure;
    std::vector<JournalDevice> devices;
    for (const auto& d : jr.devices) {
      if (touched.count(d.bdf)) devices.push_back(d);
    }
    auto rb = rollBack(k, devices, opt);
    res.rolledBack = true;
    if (rb) {
      (void)removeJournal(k.host);
      e.advice += std::string(e.advice.empty() ? "" : "; ") +
                  "every device was put back on its original driver";
    } else {
      e.advice += std::string(e.advice.empty() ? "" : "; ") + "ROLLBACK FAILED: " +
                  rb.error().describe() +
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
  if (auto s = rollBack(k, j.devices, opt); !s) {
    Error e = s.error();
    e.message = "resolving the journal of an interrupted run (pid " + std::to_string(j.pid) +
                "): " + e.message;
    return e;
  }
  if (auto s = removeJournal(k.host); !s) return s.error();
  return std::optional<size_t>(j.devices.size());
}

}  // namespace hostprep

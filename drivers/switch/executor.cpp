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

#include "drivers/model/vgpu.hpp"
#include "drivers/switch/rollback.hpp"
#include "drivers/switch/run_state.hpp"
#include "drivers/switch/run_step.hpp"
#include "drivers/switch/vgpu_steps.hpp"

namespace hostprep {
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

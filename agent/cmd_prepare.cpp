// hostprep prepare: plan, then move every selected GPU and its companions to the mode's driver.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "agent/commands.hpp"
#include "agent/options.hpp"
#include "drivers/executor.hpp"
#include "drivers/selection.hpp"
#include "drivers/snapshot.hpp"
#include "drivers/text.hpp"

namespace hostprep {
namespace {

using nlohmann::json;

json stateJson(const DeviceState& s) {
  return {{"driver", s.driver ? json(*s.driver) : json(nullptr)},
          {"driver_override", s.driverOverride ? json(*s.driverOverride) : json(nullptr)}};
}

json planJson(const Plan& plan, bool dryRun) {
  json j{{"mode", std::string(toString(plan.mode))}, {"dry_run", dryRun}, {"noop", plan.noop()}};
  j["devices"] = json::array();
  for (const auto& mv : plan.moves) {
    j["devices"].push_back({{"bdf", mv.bdf.str()},
                            {"role", std::string(toString(mv.role))},
                            {"iommu_group", mv.group ? json(*mv.group) : json(nullptr)},
                            {"from", stateJson(mv.from)},
                            {"to_driver", mv.toDriver.empty() ? json(nullptr) : json(mv.toDriver)},
                            {"changes", mv.changes}});
  }
  j["steps"] = json::array();
  for (const auto& st : plan.steps) {
    j["steps"].push_back({{"kind", std::string(toString(st.kind))},
                          {"bdf", st.bdf ? json(st.bdf->str()) : json(nullptr)},
                          {"arg", st.arg},
                          {"group", st.group ? json(*st.group) : json(nullptr)},
                          {"description", st.describe()}});
  }
  return j;
}

void printPlan(Context& ctx, const Snapshot& s, const Plan& plan) {
  ctx.out << "plan for " << toString(plan.mode) << ": " << plan.moves.size() << " device(s), "
          << plan.steps.size() << " step(s)\n";
  for (const auto& mv : plan.moves) {
    ctx.out << "  " << describeFunction(s, mv.bdf) << " " << toString(mv.role) << ": "
            << mv.from.driver.value_or("no driver") << " -> "
            << (mv.toDriver.empty() ? "its own driver" : mv.toDriver)
            << (mv.changes ? "" : " (already there)") << "\n";
  }
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    ctx.out << "  " << (i + 1) << ". " << plan.steps[i].describe() << "\n";
  }
}

// Prints the error the way every command does, and returns its exit code.
int fail(Context& ctx, const Error& e, json* report = nullptr) {
  if (ctx.json()) {
    json j = report ? *report : json::object();
    j["ok"] = false;
    j["error"] = {{"message", e.message}, {"errno", e.err}, {"advice", e.advice}};
    ctx.out << j.dump(2) << "\n";
  }
  ctx.err << "hostprep prepare: " << e.describe() << "\n";
  return static_cast<int>(e.exit);
}

#ifdef HOSTPREP_TEST_HOOKS
// Test builds only: HOSTPREP_TEST_CRASH_AFTER_STEP=k kills the process right after step k, the
// way a power cut or an OOM kill would, so the crash sweep can check the next run.
std::function<bool(size_t)> crashHook() {
  const char* v = std::getenv("HOSTPREP_TEST_CRASH_AFTER_STEP");
  if (!v) return {};
  auto k = parseUnsigned(v);
  if (!k) return {};
  size_t at = *k;
  return [at](size_t i) {
    if (i == at) ::raise(SIGKILL);
    return true;
  };
}
#endif

}  // namespace

int cmdPrepare(Context& ctx, const std::vector<std::string>& args) {
  auto opt = parsePrepareOptions(args);
  if (!opt) return fail(ctx, opt.error());
  if (opt->help) {
    ctx.out << prepareHelp();
    return 0;
  }
  RootHost host(ctx.global.root);

  // 1. One run at a time (a dry run only reads).
  std::optional<RunLock> lock;
  if (!opt->dryRun) {
    auto l = RunLock::acquire(host, opt->lockTimeout);
    if (!l) return fail(ctx, l.error());
    lock.emplace(std::move(*l));
  }

  // 2. Read the host.
  auto snap = readSnapshot(host);
  if (!snap) return fail(ctx, snap.error());
  auto modules = makeKmodLoader(host, snap->kernelRelease);
  Kernel kernel{host, *modules};
  ApplyOptions apply;
  apply.unbindTimeout = opt->unbindTimeout;
  apply.hostDriver = opt->selection.hostDriver;
  apply.holderNodes = {opt->holderNodes};

  // 3. A journal left by a run that died is resolved first: the host goes back to where it was.
  if (opt->dryRun) {
    if (auto jr = readJournal(host); jr && *jr) {
      ctx.err << "note: a journal of an interrupted run exists; a real run rolls it back first\n";
    }
  } else {
    auto rec = recoverJournal(kernel, apply);
    if (!rec) return fail(ctx, rec.error());
    if (*rec) {
      spdlog::warn("rolled back an interrupted run: {} device(s) restored", **rec);
      snap = readSnapshot(host);
      if (!snap) return fail(ctx, snap.error());
    }
  }

  // 4. Select the GPUs and their companions; refuse unsafe groups.
  auto sel = selectDevices(*snap, opt->selection);
  if (!sel) return fail(ctx, sel.error());
  if (sel->targets.empty()) {
    std::string what = opt->selection.gpuIds.empty() ? "NVIDIA GPU (vendor 10de, class 0300/0302)"
                                                      : "device with the given --gpu-ids";
    return fail(ctx, sysError("no " + what + " found on this host", ENODEV,
                              "check 'lspci -nn'; for other devices pass --gpu-ids VVVV:DDDD"));
  }
  if (opt->mode != Mode::kContainer && !sel->problems.empty() && !opt->force) {
    std::vector<std::string> lines;
    for (const auto& p : sel->problems) lines.push_back(p.describe(*snap));
    return fail(ctx, refusal("refusing to give these IOMMU groups to vfio: " + join(lines, "; "),
                             "a VM would take the other devices with the GPU; move the GPU to "
                             "another slot, or pass --force if you really mean it"));
  }

  // 5. Plan.
  PlanInputs in{opt->mode, opt->selection.hostDriver,
                host.read(hostPath("lib/modules", snap->kernelRelease, "modules.alias"), 64u << 20)
                    .value_or("")};
  auto plan = makePlan(*snap, *sel, in);
  if (!plan) return fail(ctx, plan.error());
  if (opt->dryRun) {
    if (ctx.json()) {
      ctx.out << planJson(*plan, true).dump(2) << "\n";
    } else {
      printPlan(ctx, *snap, *plan);
    }
    return 0;
  }
  json report = planJson(*plan, false);
  if (plan->noop()) {
    if (ctx.json()) {
      report["ok"] = true;
      ctx.out << report.dump(2) << "\n";
    } else {
      ctx.out << "nothing to do: " << plan->moves.size() << " device(s) already in "
              << toString(plan->mode) << " mode\n";
    }
    return 0;
  }

  // 6. Nobody may be holding what we are about to unbind.
  auto holders = planHolders(host, *plan, apply);
  if (!holders.empty() && !opt->force) {
    std::vector<std::string> who;
    for (const auto& h : holders) who.push_back(h.describe());
    return fail(ctx, refusal("devices are in use: " + join(who, "; "),
                             "stop those processes (e.g. systemctl stop nvidia-persistenced), "
                             "or pass --force"),
                &report);
  }

  // 7. Apply, one line per device as it moves.
  auto started = std::chrono::steady_clock::now();
  apply.onDevice = [&](const DeviceMove& mv, const Status& s) {
    if (ctx.json()) return;
    ctx.out << mv.bdf.str() << " " << toString(mv.role) << ": " << mv.from.driver.value_or("no driver")
            << " -> " << (mv.toDriver.empty() ? "its own driver" : mv.toDriver)
            << (s ? " ok" : " FAILED") << "\n";
    ctx.out.flush();
  };
#ifdef HOSTPREP_TEST_HOOKS
  apply.afterStep = crashHook();
#endif
  auto res = applyPlan(kernel, *plan, apply);
  if (!res) return fail(ctx, res.error(), &report);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (ctx.json()) {
    report["ok"] = true;
    report["seconds"] = secs;
    ctx.out << report.dump(2) << "\n";
  } else {
    ctx.out << "done: " << plan->moves.size() << " device(s) in " << toString(plan->mode)
            << " mode, " << res->stepsRun << " step(s) in " << secs << " s\n";
  }
  return 0;
}

}  // namespace hostprep

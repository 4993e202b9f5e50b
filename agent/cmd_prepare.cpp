// hostprep prepare: plan, then move every selected GPU and its companions to the mode's driver.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "agent/commands.hpp"
#include "agent/config.hpp"
#include "agent/converge.hpp"
#include "agent/options.hpp"
#include "drivers/common/text.hpp"
#include "drivers/model/selection.hpp"
#include "drivers/model/snapshot.hpp"
#include "drivers/switch/executor.hpp"

namespace hostprep {
namespace {

using nlohmann::json;

json stateJson(const DeviceState& s) {
  return {{"driver", s.driver ? json(*s.driver) : json(nullptr)},
          {"driver_override", s.driverOverride ? json(*s.driverOverride) : json(nullptr)}};
}

// "vm-passthrough", or on a split "mixed (container: 1, vm-passthrough: 3)".
std::string modeText(const Plan& plan) { return modeSummary(plan.split(), plan.mode); }

json planJson(const Plan& plan, bool dryRun) {
  json j{{"mode", std::string(toString(plan.mode))}, {"dry_run", dryRun}, {"noop", plan.noop()}};
  const auto split = plan.split();
  if (split.size() > 1) {
    j["split"] = json::object();
    for (const auto& [m, n] : split) j["split"][std::string(toString(m))] = n;
  }
  j["devices"] = json::array();
  for (const auto& mv : plan.moves) {
    j["devices"].push_back({{"bdf", mv.bdf.str()},
                            {"role", std::string(toString(mv.role))},
                            {"mode", std::string(toString(mv.mode))},
                            {"iommu_group", mv.group ? json(*mv.group) : json(nullptr)},
                            {"from", stateJson(mv.from)},
                            {"to_driver", mv.toDriver.empty() ? json(nullptr) : json(mv.toDriver)},
                            {"to_module", mv.toModule.empty() ? json(nullptr) : json(mv.toModule)},
                            {"changes", mv.changes}});
    if (mv.awaitsDriver) j["devices"].back()["awaits_driver"] = true;
  }
  if (auto w = waitingText(plan)) j["waiting"] = *w;
  if (!plan.notReset.empty()) {
    j["not_reset"] = json::array();
    for (const auto& [bdf, why] : plan.notReset)
      j["not_reset"].push_back({{"bdf", bdf.str()}, {"why", why}});
  }
  j["steps"] = json::array();
  for (const auto& st : plan.steps) {
    j["steps"].push_back({{"kind", std::string(toString(st.kind))},
                          {"bdf", st.bdf ? json(st.bdf->str()) : json(nullptr)},
                          {"arg", st.arg},
                          {"group", st.group ? json(*st.group) : json(nullptr)},
                          {"description", st.describe()}});
    if (!st.uuid.empty()) j["steps"].back()["uuid"] = st.uuid;
  }
  if (plan.split().count(Mode::kVmVgpu) || !plan.vgpuRemovals.empty() || !plan.sriov.empty()) {
    json v{{"devices", json::array()}, {"removals", json::array()}, {"sriov", json::array()}};
    for (const auto& pv : plan.vgpus) {
      v["devices"].push_back(
          {{"gpu", pv.gpu.str()},
           {"parent", pv.parent.str()},
           {"type", pv.type},
           {"type_name", pv.typeName},
           {"uuid", pv.uuid.empty() ? json(nullptr) : json(pv.uuid)},
           {"interface", pv.iface ? json(std::string(toString(*pv.iface))) : json("auto")},
           {"exists", pv.exists}});
    }
    for (const auto& d : plan.vgpuRemovals) {
      v["removals"].push_back({{"parent", d.parent.str()},
                               {"interface", std::string(toString(d.iface))},
                               {"uuid", d.uuid.empty() ? json(nullptr) : json(d.uuid)},
                               {"type", d.typeId},
                               {"type_name", d.typeName}});
    }
    for (const auto& sc : plan.sriov) {
      v["sriov"].push_back({{"pf", sc.pf.str()}, {"from", sc.from}, {"to", sc.to}});
    }
    v["advertised"] = json::object();
    for (const auto& [name, n] : expectedAdvertised(plan)) v["advertised"][name] = n;
    j["vgpu"] = v;
  }
  return j;
}

// Functions that go back from vfio without a reset, and why (drivers/model/reset.hpp).
void printNotReset(Context& ctx, const Plan& plan, std::string_view indent) {
  for (const auto& [bdf, why] : plan.notReset) {
    ctx.out << indent << "note: " << bdf.str() << " returns from vfio without a reset (" << why
            << ")\n";
  }
}

void printPlan(Context& ctx, const Snapshot& s, const Plan& plan) {
  ctx.out << "plan for " << modeText(plan) << ": " << plan.moves.size() << " device(s), "
          << plan.steps.size() << " step(s)\n";
  for (const auto& mv : plan.moves) {
    ctx.out << "  " << describeFunction(s, mv.bdf) << " " << toString(mv.role) << ": "
            << mv.from.driver.value_or("no driver") << " -> " << mv.target()
            << (mv.changes ? "" : " (already there)") << "\n";
  }
  for (const auto& pv : plan.vgpus) {
    ctx.out << "  vGPU " << pv.typeName << " on " << pv.parent.str() << " (GPU " << pv.gpu.str()
            << (pv.iface ? ", " + std::string(toString(*pv.iface)) : std::string()) << ")"
            << (pv.exists ? " (already there)" : "") << "\n";
  }
  for (const auto& [name, n] : expectedAdvertised(plan)) {
    ctx.out << "  advertises " << name << ": " << n << "\n";
  }
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    ctx.out << "  " << (i + 1) << ". " << plan.steps[i].describe() << "\n";
  }
  if (auto w = waitingText(plan)) ctx.out << "  " << *w << "\n";
  printNotReset(ctx, plan, "  ");
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
    if (i == at) (void)::raise(SIGKILL);  // never returns
    return true;
  };
}
#endif

// prepare without --mode: the config's mode and rules, its selection, holder-nodes and vGPU
// config where the command line names none. Errors exit 2 with the host untouched.
Status applyConfig(const Host& host, const PrepareOptions& p, ConvergeOptions& co) {
  auto cfg = loadConfig(host, p.config.path, p.config.given);
  if (!cfg) return cfg.error();
  if (!cfg->mode) {
    return usageError("no --mode, and " + p.config.path + " names no mode",
                      "pass --mode M, or write mode: M in the config");
  }
  co.mode = *cfg->mode;
  co.rules = cfg->rules;
  co.selection = cfg->selection;
  p.selection.applyTo(co.selection);
  if (!p.holderNodesGiven) co.holderNodes = cfg->holderNodes;
  if (!p.noReset) co.resetOnReturn = cfg->resetOnReturn;
  if (!p.vgpuConfigGiven) {
    co.vgpuConfigFile = cfg->vgpuConfigFile;
    co.vgpuConfigName = cfg->vgpuConfigName;
  }
  return {};
}

}  // namespace

int cmdPrepare(Context& ctx, const std::vector<std::string>& args) {
  ctx.errorDocument = json::object();  // --output json: errors as {"ok": false, "error": ...}
  PrepareOptions po;
  if (auto rc = exitEarly(ctx, parsePrepareOptions(args), po)) return *rc;
  ConvergeOptions& co = po.converge;
  RootHost host(ctx.global.root);
  if (po.fromConfig) {
    if (auto st = applyConfig(host, po, co); !st) return fail(ctx, st.error());
  }
  auto release = readTrimmed(host, "proc/sys/kernel/osrelease").value_or("");
  auto modules = makeKmodLoader(host, release);
  Kernel kernel{host, *modules};

  // The same path as the agent: lock, journal, select, plan, holders, apply (agent/converge).
  co.onDevice = [&](const DeviceMove& mv, const Status& s) {
    if (ctx.json()) return;
    ctx.out << mv.bdf.str() << " " << toString(mv.role) << ": "
            << mv.from.driver.value_or("no driver") << " -> " << mv.target()
            << (s ? " ok" : " FAILED") << "\n";
    ctx.out.flush();
  };
#ifdef HOSTPREP_TEST_HOOKS
  co.afterStep = crashHook();
#endif
  auto c = converge(kernel, co);
  if (c.journalPending) {
    ctx.err << "note: a journal of an interrupted run exists; a real run rolls it back first\n";
  }
  if (!c.plan) return fail(ctx, c.status.error());
  const Plan& plan = *c.plan;
  if (co.dryRun) {
    if (ctx.json()) {
      ctx.out << planJson(plan, true).dump(2) << "\n";
    } else {
      printPlan(ctx, *c.snapshot, plan);
    }
    return 0;
  }
  // The report is --output json's; text prints a line per device as it goes (onDevice).
  json report = ctx.json() ? planJson(plan, false) : json();
  if (!c.status) return fail(ctx, c.status.error(), report);
  if (plan.noop()) {
    if (ctx.json()) {
      report["ok"] = true;
      ctx.out << report.dump(2) << "\n";
    } else {
      ctx.out << nothingToDo(plan) << "\n";
      if (auto w = waitingText(plan)) ctx.out << *w << "\n";
    }
    return 0;
  }
  if (ctx.json()) {
    report["ok"] = true;
    report["seconds"] = c.seconds;
    ctx.out << report.dump(2) << "\n";
  } else {
    ctx.out << "done: " << plan.moves.size() << " device(s) " << inModes(plan.split(), plan.mode)
            << ", " << c.stepsRun << " step(s) in " << c.seconds << " s\n";
    if (auto w = waitingText(plan)) ctx.out << *w << "\n";
    printNotReset(ctx, plan, "");
  }
  return 0;
}

}  // namespace hostprep

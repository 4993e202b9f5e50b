// hostprep recover: bring back GPUs whose functions no longer answer or sit without a driver
// (drivers/switch/recover.hpp climbs the ladder), then move them to their mode's driver the way
// prepare does (agent/converge).
#include <nlohmann/json.hpp>

#include "agent/commands.hpp"
#include "agent/config.hpp"
#include "agent/converge.hpp"
#include "agent/options.hpp"
#include "agent/status_writer.hpp"
#include "drivers/common/text.hpp"
#include "drivers/model/host_module.hpp"
#include "drivers/model/selection.hpp"
#include "drivers/switch/executor.hpp"
#include "drivers/switch/recover.hpp"
#include "drivers/switch/run_state.hpp"

namespace hostprep {
namespace {

using nlohmann::json;

// What would block the unbinds: the host driver's device nodes for a function on one of the
// host module's drivers, /dev/vfio/<group> for one on vfio (executor.hpp planHolders).
std::vector<Holder> unitHolders(const Host& host, const Snapshot& s, const RecoverUnit& u,
                                const ApplyOptions& apply) {
  Plan p;
  for (const auto& d : driversOfModule(s, normalizeModuleName(apply.hostDriver)))
    p.hostDrivers.insert(d);
  for (const auto& b : u.functions) {
    const PciFunction* f = s.find(b);
    if (!f || !f->driver) continue;
    DeviceMove mv;
    mv.bdf = b;
    mv.group = f->iommuGroup;
    p.moves.push_back(mv);
    p.steps.push_back({StepKind::kUnbind, b, *f->driver, std::nullopt, {}});
  }
  return planHolders(host, p, apply);
}

}  // namespace

int cmdRecover(Context& ctx, const std::vector<std::string>& args) {
  ctx.errorDocument = json::object();
  RecoverOptions ro;
  if (auto rc = exitEarly(ctx, parseRecoverOptions(args), ro)) return *rc;
  RootHost host(ctx.global.root);
  auto cfg = loadConfig(host, ro.config.path, ro.config.given);
  if (!cfg) return fail(ctx, cfg.error());
  SelectionOptions sel = cfg->selection;
  ro.selection.applyTo(sel);
  // The mode as status sees it: --mode, else the config's (with its devices rules), else the last
  // prepare's (with its split).
  StatusRequest desired;
  desired.config = *cfg;
  desired.modeOverride = ro.mode;
  std::vector<DeviceRule> rules;
  const auto desiredNow = desiredMode(host, desired, &rules);
  const std::optional<Mode> mode = desiredNow.first;
  const std::string& modeSource = desiredNow.second;

  // The GPUs --devices names (a function that is not a GPU hostprep selects is bad input), and
  // every function of their slots.
  auto snap = readSnapshot(host);
  if (!snap) return fail(ctx, snap.error());
  auto chosen = selectDevices(*snap, sel);
  if (!chosen) return fail(ctx, chosen.error());
  auto unit = recoverUnit(*snap, *ro.selection.devices);
  if (!unit) return fail(ctx, unit.error());

  ApplyOptions apply;
  apply.unbindTimeout = ro.unbindTimeout;
  apply.hostDriver = sel.hostDriver;
  apply.holderNodes = {holderGlob(cfg->holderNodes, sel.hostDriver)};
  if (snap->rootDiskPci && !ro.force) {
    const PciFunction* disk = snap->find(*snap->rootDiskPci);
    for (const auto& b : unit->functions) {
      const PciFunction* f = snap->find(b);
      if (f && disk && f->iommuGroup && f->iommuGroup == disk->iommuGroup) {
        return fail(ctx, refusal(b.str() + " shares IOMMU group " + std::to_string(*f->iommuGroup) +
                                     " with the root disk " + disk->bdf.str(),
                                 "a reset or a rescan there touches the disk hostprep runs "
                                 "from; pass --force only if you mean it"));
      }
    }
  }
  // A function of the GPUs' slots that is not theirs (a NIC beside a GPU) would be unbound, reset
  // and removed with them.
  if (auto foreign = notTheGpus(*snap, *unit, sel); !foreign.empty() && !ro.force) {
    std::vector<std::string> who;
    for (const auto& b : foreign) who.push_back(describeFunction(*snap, b));
    return fail(ctx, refusal("the slot of " + joinBdfs(unit->gpus) + " also holds " +
                                 join(who, ", ") + ", which is not the GPU's",
                             "recovering would unbind, reset and remove it with the GPU; pass "
                             "--force only if you mean it"));
  }
  if (auto holders = unitHolders(host, *snap, *unit, apply); !holders.empty()) {
    std::vector<std::string> who;
    for (const auto& h : holders) who.push_back(h.describe());
    return fail(ctx, refusal("the GPU is in use: " + join(who, "; "),
                             "stop those processes (a VM, nvidia-persistenced) and run again"));
  }

  const auto ladder = recoverLadder(*snap, *unit);
  const std::string bindText =
      mode ? "then move them to " + std::string(toString(*mode)) + "'s driver (" +
                 (modeSource == "flag"     ? std::string("--mode")
                  : modeSource == "config" ? std::string("the config's mode")
                                           : std::string("the last prepare's mode")) +
                 "), as prepare does"
           : "then probe them: the driver the kernel gives them (no --mode, no mode in the "
             "config, no prepare since boot)";
  json doc{{"devices", json::array()}, {"functions", json::array()}, {"dry_run", ro.dryRun}};
  for (const auto& g : unit->gpus) doc["devices"].push_back(g.str());
  for (const auto& f : unit->functions) doc["functions"].push_back(f.str());
  if (ro.dryRun) {
    doc["ladder"] = ladder;
    doc["then"] = bindText;
    if (ctx.json()) {
      ctx.out << doc.dump(2) << "\n";
    } else {
      ctx.out << "recover " << joinBdfs(unit->gpus) << " (functions " << joinBdfs(unit->functions)
              << ") would try, until every function answers:\n";
      for (size_t i = 0; i < ladder.size(); ++i)
        ctx.out << "  " << (i + 1) << ". " << ladder[i] << "\n";
      ctx.out << "  " << bindText << "\n";
    }
    return 0;
  }

  // One run at a time; what a run that died left behind is resolved first, as prepare does.
  auto release = readTrimmed(host, "proc/sys/kernel/osrelease").value_or("");
  auto modules = makeKmodLoader(host, release);
  Kernel kernel{host, *modules};
  Result<RecoverOutcome> outcome = RecoverOutcome{};
  {
    auto lock = RunLock::acquire(host, ro.lockTimeout);
    if (!lock) return fail(ctx, lock.error());
    if (auto rec = recoverJournal(kernel, apply); !rec) return fail(ctx, rec.error());
    if (auto rescan = resolveInterruptedRescan(host); !rescan) return fail(ctx, rescan.error());
    outcome = climbRecoverLadder(kernel, *unit, apply, /*probeGpus=*/!mode);
  }
  if (!outcome) return fail(ctx, outcome.error(), doc);
  doc["tried"] = outcome->tried;
  doc["answers"] = outcome->answers;
  if (!ctx.json()) {
    for (const auto& t : outcome->tried) ctx.out << "  " << t << "\n";
  }
  if (!outcome->answers) {
    return fail(ctx,
                sysError(joinBdfs(unit->functions) + ": still not answering after every rung (" +
                             join(ladder, "; ") + ")",
                         EIO, "reboot the host (a cold boot powers the slot off and on)"),
                doc);
  }
  doc["by"] = outcome->by;
  if (!ctx.json())
    ctx.out << joinBdfs(unit->functions) << " answer again (" << outcome->by << ")\n";
  if (!mode) {
    if (ctx.json()) {
      doc["ok"] = true;
      ctx.out << doc.dump(2) << "\n";
    } else {
      ctx.out << "no mode (--mode, the config's, or the last prepare's): on the driver the kernel "
                 "gave them\n";
    }
    return 0;
  }

  // Their mode's driver, the way prepare moves them.
  ConvergeOptions co;
  co.mode = *mode;
  co.rules = rules;
  co.selection = sel;
  co.selection.devices = unit->gpus;
  co.lockTimeout = ro.lockTimeout;
  co.unbindTimeout = ro.unbindTimeout;
  co.holderNodes = cfg->holderNodes;
  co.vgpuConfigFile = cfg->vgpuConfigFile;
  co.vgpuConfigName = cfg->vgpuConfigName;
  co.resetOnReturn = cfg->resetOnReturn && !ro.noReset;
  co.onDevice = [&](const DeviceMove& mv, const Status& s) {
    if (ctx.json()) return;
    ctx.out << mv.bdf.str() << " " << toString(mv.role) << ": "
            << mv.from.driver.value_or("no driver") << " -> " << mv.target()
            << (s ? " ok" : " FAILED") << "\n";
  };
  auto c = converge(kernel, co);
  if (!c.status) return fail(ctx, c.status.error(), doc);
  doc["mode"] = std::string(toString(*mode));
  doc["ok"] = true;
  if (ctx.json()) {
    ctx.out << doc.dump(2) << "\n";
  } else {
    ctx.out << "done: " << joinBdfs(unit->gpus) << " in " << toString(*mode) << "\n";
  }
  return 0;
}

}  // namespace hostprep

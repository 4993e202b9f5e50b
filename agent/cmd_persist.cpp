// hostprep persist: boot-time persistence of the mode (modprobe.d, modules-load.d, initramfs).
#include <nlohmann/json.hpp>

#include "agent/commands.hpp"
#include "agent/config.hpp"
#include "agent/options.hpp"
#include "drivers/common/text.hpp"
#include "drivers/model/device_rules.hpp"
#include "drivers/published/bootconfig.hpp"
#include "drivers/published/persist.hpp"

namespace hostprep {

namespace {

std::string_view action(const PersistFile& f) {
  return !f.changes ? "unchanged" : f.content ? "write" : "remove";
}

// --output json: the plan (each file with what it would hold), then, on a run, whether it was
// applied and whether the initramfs must be rebuilt.
nlohmann::json persistJson(std::string_view modeText, const PersistPlan& plan, bool dryRun) {
  using nlohmann::json;
  json j{{"mode", std::string(modeText)},
         {"dry_run", dryRun},
         {"noop", plan.noop()},
         {"files", json::array()},
         {"notes", plan.notes},
         {"warnings", plan.warnings},
         {"initramfs_rebuild", plan.initramfsChanges}};
  for (const auto& f : plan.files) {
    j["files"].push_back({{"path", "/" + f.path},
                          {"action", std::string(action(f))},
                          {"content", f.content ? json(*f.content) : json(nullptr)}});
  }
  return j;
}

}  // namespace

int cmdPersist(Context& ctx, const std::vector<std::string>& args) {
  ctx.errorDocument = nlohmann::json::object();  // --output json: errors as {"ok": false, ...}
  PersistOptions opt;
  if (auto rc = exitEarly(ctx, parsePersistOptions(args), opt)) return *rc;
  RootHost host(ctx.global.root);
  auto config = loadConfig(host, opt.config.path, opt.config.given);
  if (!config) return fail(ctx, config.error());
  if (!opt.mode && !config->mode) {
    return fail(ctx, usageError("no --mode, and " + opt.config.path + " names no mode",
                                "pass --mode M, or write mode: M in the config"));
  }
  SelectionOptions so = config->selection;
  opt.selection.applyTo(so);

  // 1. The devices: the same selection as prepare.
  auto snap = readSnapshot(host);
  if (!snap) return fail(ctx, snap.error());
  auto sel = selectDevices(*snap, so);
  if (!sel) return fail(ctx, sel.error());

  // 2. The mode of each: --mode for all, else the config's default and devices rules, with the
  //    mixes prepare refuses refused here too (a container + vm-vgpu mix exits 2, an IOMMU group
  //    split between modes 3).
  DeviceModes modes;
  if (opt.mode) {
    modes = uniformModes(*sel, *opt.mode);
  } else {
    auto resolved = resolveModes(*snap, *sel, *config->mode, config->rules);
    for (const auto& w : resolved.warnings) ctx.err << "warning: " << w << "\n";
    modes = std::move(resolved.modes);
  }
  const auto split = modeSplit(*sel, modes);
  if (auto st = checkModeMix(split); !st) return fail(ctx, st.error());
  if (auto st = checkGroupModes(*snap, *sel, modes); !st) return fail(ctx, st.error());
  const Mode base = opt.mode ? *opt.mode : *config->mode;
  const std::string modeText =
      split.size() > 1 ? "mixed (" + splitText(split) + ")" : std::string(toString(base));
  if (base == Mode::kVmPassthrough && sel->targets.empty()) {
    return fail(ctx,
                sysError("no GPU selected on this host: nothing to keep away from the host driver",
                         ENODEV, "check 'lspci -nn'; pass --gpu-ids VVVV:DDDD"));
  }

  // 3. The files.
  auto plan =
      makePersistPlan(*snap, *sel, modes, [&](std::string_view p) -> std::optional<std::string> {
        auto t = host.read(p, 1u << 20);
        return t ? std::optional<std::string>(*t) : std::nullopt;
      });
  if (!plan.notes.empty() && readBootConfig(host).enabledUnits.empty()) {
    // Ids were left out: only the unit binds those GPUs at boot.
    const std::string unit(kPrepareUnit);
    plan.warnings.push_back(unit +
                            " is not enabled: after a reboot nothing hands the vm-passthrough GPUs "
                            "whose ids were left out to vfio-pci (systemctl enable " +
                            unit + ")");
  }
  for (const auto& w : plan.warnings) ctx.err << "warning: " << w << "\n";
  if (ctx.json()) {
    auto doc = persistJson(modeText, plan, opt.dryRun);
    if (!opt.dryRun) {
      if (auto s = applyPersistPlan(host, plan); !s) return fail(ctx, s.error(), doc);
    }
    doc["ok"] = true;
    ctx.out << doc.dump(2) << "\n";
    return 0;
  }
  for (const auto& n : plan.notes) ctx.out << "note: " << n << "\n";
  for (const auto& f : plan.files) {
    ctx.out << "/" << f.path << ": "
            << (!f.changes  ? "unchanged"
                : f.content ? (opt.dryRun ? "would write" : "written")
                            : (opt.dryRun ? "would remove" : "removed"))
            << "\n";
    if (opt.dryRun && f.changes && f.content) {
      for (auto line : splitLines(*f.content)) ctx.out << "  | " << line << "\n";
    }
  }
  if (opt.dryRun) return 0;

  // 4. Apply.
  if (auto s = applyPersistPlan(host, plan); !s) return fail(ctx, s.error());
  if (plan.initramfsChanges) {
    ctx.out << "the initramfs must be rebuilt for the next boot: run 'update-initramfs -u'\n";
  } else if (plan.noop()) {
    ctx.out << "nothing to do: boot persistence already matches " << modeText << "\n";
  }
  return 0;
}

}  // namespace hostprep

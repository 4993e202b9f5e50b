#include "agent/status_writer.hpp"

#include <spdlog/spdlog.h>

#include "agent/phase_clock.hpp"
#include "checks/preflight.hpp"
#include "drivers/common/parsers.hpp"
#include "drivers/common/text.hpp"
#include "drivers/model/operator_driver.hpp"
#include "drivers/model/platform.hpp"
#include "drivers/published/bootconfig.hpp"
#include "drivers/published/status_formats.hpp"
#include "drivers/published/status_reads.hpp"
#include "drivers/seam/kmod.hpp"

namespace hostprep {
namespace {

// Creates the parent directory of a host path if it is missing (never chmods an existing one:
// run/hostprep is also the journal's directory).
Status ensureParent(Host& host, const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0) return {};
  const std::string dir = path.substr(0, slash);
  if (host.exists(dir)) return {};
  return host.makeDirs(dir, 0755);
}

Status writeOne(Host& host, const std::string& path, const std::string& text) {
  if (auto s = ensureParent(host, path); !s) return s;
  return host.writeFileAtomic(path, text, 0644);
}

}  // namespace

// The PreflightPassed condition: preflight's host checks for the desired mode, on the snapshot
// already read.
std::optional<PreflightOutcome> preflightOutcome(const Host& host, const Snapshot& s, Mode mode,
                                                 const SelectionOptions& sel,
                                                 const std::vector<DeviceRule>& rules) {
  auto loader = makeKmodLoader(host, s.kernelRelease);
  const PlatformFacts platform =
      readPlatform(host, s.kernelRelease, *loader, preflightModules(sel.hostDriver));
  const BootConfig boot = readBootConfig(host);
  PreflightRequest req{mode, sel};
  req.rules = rules;
  HostFacts facts{&s, {}, platform, boot, s.cmdlineText};
  facts.operatorDriver =
      operatorProvidesDriver(host, sel.hostDriverProvider, s.kernelRelease, sel.hostDriver);
  facts.otherAgents = operatorAgents(host);
  auto r = preflightHost(facts, req);
  if (!r) return std::nullopt;
  std::vector<std::string> failed;
  for (const auto& c : r->checks) {
    if (c.status == CheckStatus::kFail) failed.push_back(c.id);
  }
  if (failed.empty()) {
    return PreflightOutcome{true, "every " + r->modeText() + " check passed (" +
                                      std::to_string(r->summary().warn) + " warning(s))"};
  }
  return PreflightOutcome{false, "failed: " + join(failed, ", ") + "; run 'hostprep preflight'"};
}

std::pair<std::optional<Mode>, std::string> desiredMode(const Host& host, const StatusRequest& r,
                                                        std::vector<DeviceRule>* rules) {
  if (r.modeOverride) return {r.modeOverride, "flag"};
  if (r.config.mode) {
    if (rules) *rules = r.config.rules;
    return {r.config.mode, "config"};
  }
  auto last = readLastMode(host);
  if (!last) {
    spdlog::warn("{} (ignored: no desired mode)", last.error().describe());
  } else if (*last) {
    if (rules) *rules = (*last)->rules();  // the split the last prepare converged to
    return {(*last)->mode, "last-prepare"};
  }
  return {std::nullopt, ""};
}

Result<std::unique_ptr<Observation>> observe(const Host& host, const StatusRequest& r) {
  auto o = std::make_unique<Observation>();
  PhaseClock clock;
  auto snap = r.previous ? refreshSnapshot(host, r.previous->snapshot, r.changed, r.rebound)
                         : readSnapshot(host);
  if (!snap) return snap.error();
  o->snapshot = std::move(*snap);
  o->vgpu = r.previous ? refreshVgpuHost(host, o->snapshot, r.previous->vgpu, r.changed)
                       : readVgpuHost(host, o->snapshot);
  clock.lap("status: snapshot and vGPU view");

  StaticInputs fresh;
  StaticInputs& st = r.statics ? *r.statics : fresh;
  if (!st.nodeName) st.nodeName = readNodeName(host);
  if (!r.pciIds && !st.pciIds) st.pciIds = readPciIds(host);  // --pci-ids: the host's is not read
  if (!st.modulesAlias || st.modulesAlias->first != o->snapshot.kernelRelease) {
    const auto path = hostPath("lib/modules", o->snapshot.kernelRelease, "modules.alias");
    st.modulesAlias.emplace(o->snapshot.kernelRelease,
                            vfioAliasLines(host.read(path, 64u << 20).value_or("")));
  }

  clock.lap("status: node name, pci.ids, modules.alias");

  StatusInputs in;
  in.nodeName = *st.nodeName;
  in.agentVersion = HOSTPREP_VERSION;
  in.observedTime = r.now;
  // The rules split the config's mode, or the last prepare's; --mode applies to every GPU.
  std::tie(in.desiredMode, in.desiredModeSource) = desiredMode(host, r, &in.rules);
  in.selection = r.config.selection;
  in.modulesAlias = st.modulesAlias->second;
  if (const auto& ids = r.pciIds ? r.pciIds : *st.pciIds) in.pciIds = *ids;  // a view, not a copy
  if (r.previous) {
    in.previous = r.previous->doc.conditions;
  } else if (auto prev = host.read(r.config.statusPath, 4u << 20)) {
    in.previous = parseConditions(*prev);
  }
  in.convergeError = r.convergeError;
  if (r.previous) {
    o->operatorDriver = r.previous->operatorDriver;
    o->otherAgents = r.previous->otherAgents;
  } else {
    o->operatorDriver = operatorProvidesDriver(host, in.selection.hostDriverProvider,
                                               o->snapshot.kernelRelease, in.selection.hostDriver);
    o->otherAgents = operatorAgents(host);
  }
  in.operatorDriver = o->operatorDriver;
  in.otherAgents = o->otherAgents;
  clock.lap("status: desired mode and previous conditions");
  if (in.desiredMode) {
    in.preflight =
        r.preflight ? r.preflight(host, o->snapshot, *in.desiredMode, in.selection, in.rules)
                    : preflightOutcome(host, o->snapshot, *in.desiredMode, in.selection, in.rules);
  }
  clock.lap("status: preflight");
  o->doc = buildStatus(o->snapshot, o->vgpu, in);
  clock.lap("status: build the document");
  return o;
}

Status publish(Host& host, const Observation& o, const AgentConfig& c, const std::string& path) {
  PhaseClock clock;
  const std::string text = toJson(o.doc).dump(2) + "\n";
  clock.lap("status: JSON text");
  if (auto s = writeOne(host, path, text); !s) return s;
  clock.lap("status: write");
  if (!c.nfdFeaturesPath.empty()) {
    if (auto s = writeOne(host, c.nfdFeaturesPath, nfdFeatures(o.doc)); !s) return s;
  }
  if (!c.prometheusPath.empty()) {
    if (auto s = writeOne(host, c.prometheusPath, prometheusText(o.doc)); !s) return s;
  }
  return {};
}

std::string summary(const StatusDocument& d) {
  std::string s = std::string(toString(d.actualMode));
  if (d.desiredMode) s += " (desired " + d.desiredSummary() + ")";
  s += d.converged ? ", converged" : ", not converged";
  s += ", " + std::to_string(d.devices.size()) + " device(s)";
  auto drift = d.drift();
  if (!drift.empty()) s += ", " + std::to_string(drift.size()) + " off their wanted driver";
  std::vector<std::string> adv;
  for (const auto& [name, n] : d.advertised) adv.push_back(name + "=" + std::to_string(n));
  if (!adv.empty()) s += ", advertises " + join(adv, " ");
  return s;
}

}  // namespace hostprep

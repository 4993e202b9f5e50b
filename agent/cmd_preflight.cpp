// hostprep preflight: every host prerequisite of a mode, with the exact fix for each problem.
// Reads the host (or an image root) once, runs the pure checks, prints, and exits 0 when no
// check failed, 1 when one did, 2 on a usage error — an image pipeline can gate on it.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>

#include "agent/commands.hpp"
#include "agent/config.hpp"
#include "agent/options.hpp"
#include "agent/phase_clock.hpp"
#include "checks/image.hpp"
#include "checks/preflight.hpp"
#include "drivers/model/operator_driver.hpp"
#include "drivers/model/platform.hpp"
#include "drivers/model/selection.hpp"
#include "drivers/model/snapshot.hpp"
#include "drivers/published/bootconfig.hpp"
#include "drivers/seam/kmod.hpp"

namespace hostprep {
namespace {

// Keys in schema order (id first), not sorted.
using json = nlohmann::ordered_json;

// The JSON document, schema in checks/preflight.schema.json (version 2).
json reportJson(const PreflightReport& r) {
  json checks = json::array();
  for (const auto& c : r.checks) {
    checks.push_back({{"id", c.id},
                      {"status", std::string(jsonStatus(c.status))},
                      {"title", c.title},
                      {"detail", c.detail},
                      {"remedy", c.remedy.empty() ? json(nullptr) : json(c.remedy)}});
  }
  const auto s = r.summary();
  json split = json::object();
  for (const auto& [m, n] : r.split) split[std::string(toString(m))] = n;
  return {{"version", 2},
          {"mode", r.mixed() ? std::string("mixed") : std::string(toString(r.mode))},
          {"split", split},
          {"target", r.image ? "image" : "host"},
          {"checks", checks},
          {"summary",
           {{"ok", s.fail == 0},
            {"pass", s.pass},
            {"warn", s.warn},
            {"fail", s.fail},
            {"skip", s.skip},
            {"info", s.info}}}};
}

bool useColor(const Context& ctx, ColorChoice choice) {
  if (choice != ColorChoice::kAuto) return choice == ColorChoice::kAlways;
  // https://no-color.org: NO_COLOR set and not empty disables colour; a flag overrides it.
  const char* noColor = std::getenv("NO_COLOR");
  if (noColor && *noColor) return false;
  const char* term = std::getenv("TERM");
  if (term && std::string_view(term) == "dumb") return false;
  return &ctx.out == &std::cout && ::isatty(STDOUT_FILENO) == 1;
}

// ANSI colours by CheckStatus: pass green, warn yellow, fail bold red, skip dim, info cyan.
constexpr std::array<std::string_view, 5> kStatusColors{"\033[32m", "\033[33m", "\033[1;31m",
                                                        "\033[2m", "\033[36m"};
std::string_view colorOf(CheckStatus s) { return kStatusColors[static_cast<size_t>(s)]; }

void printText(Context& ctx, const PreflightReport& r, const std::string& root, bool color) {
  ctx.out << "preflight for " << r.modeText() << " on " << (r.image ? "image " : "host ") << root
          << "\n";
  size_t width = 0;
  for (const auto& c : r.checks) width = std::max(width, c.title.size());
  for (const auto& c : r.checks) {
    if (color) {
      ctx.out << colorOf(c.status) << toString(c.status) << "\033[0m";
    } else {
      ctx.out << toString(c.status);
    }
    ctx.out << "  " << c.title << std::string(width - c.title.size(), ' ') << "  " << c.detail
            << "\n";
    if (!c.remedy.empty() && (c.status == CheckStatus::kWarn || c.status == CheckStatus::kFail)) {
      ctx.out << "      remedy: " << c.remedy << "\n";
    }
  }
  const auto s = r.summary();
  ctx.out << "summary: " << s.pass << " pass, " << s.warn << " warn, " << s.fail << " fail, "
          << s.skip << " skip, " << s.info << " info: " << (s.fail ? "NOT READY" : "ready")
          << " for " << r.modeText() << "\n";
}

}  // namespace

// The mode configured for this node (etc/hostprep/config.yaml under --root), if any.
std::optional<Mode> configuredPreflightMode(const Context& ctx) {
  RootHost host(ctx.global.root);
  return configuredMode(host);
}

int cmdPreflight(Context& ctx, const std::vector<std::string>& args) {
  ctx.errorDocument = nlohmann::json::object();  // --output json: errors as {"ok": false, ...}
  PhaseClock clock;
  PreflightOptions opt;
  if (auto rc = exitEarly(ctx, parsePreflightOptions(args), opt)) return *rc;
  RootHost host(ctx.global.root);
  PreflightRequest req{preflightMode(opt.mode, configuredPreflightMode(ctx)), opt.selection};
  if (!opt.mode && !opt.image) {
    // No --mode on a host: the config's mode and devices rules (a mixed node is checked per
    // mode). A config that does not parse exits 2, as prepare does.
    auto cfg = loadConfig(host, kConfigPath, false);
    if (!cfg) return fail(ctx, cfg.error());
    req.mode = preflightMode(std::nullopt, cfg->mode);
    req.rules = cfg->rules;
  }
  req.cc = configuredCcMode(host);
  const auto modules = preflightModules(req.selection.hostDriver);

  PreflightReport report;
  if (opt.image) {
    // 1. An image: its boot configuration and installed kernels; no running kernel to ask.
    const BootConfig boot = readBootConfig(host);
    const auto kernels = readImageKernels(
        host, modules, [&](const std::string& release) { return makeKmodLoader(host, release); });
    report = preflightImage(ImageFacts{boot, kernels}, req);
  } else {
    // 1. A live host: the PCI snapshot (may be missing: then the checks say so), platform facts,
    //    and the boot configuration the next boot will use.
    //    The snapshot reads whole only the functions a selection can reach: the checks look at
    //    no other attribute of the rest.
    clock.lap("options and config");
    auto snap =
        readSnapshot(host, [&](const PciFunction& f) { return maySelect(f, req.selection); });
    clock.lap("snapshot (" + std::to_string(snap ? snap->pci.size() : 0) + " functions)");
    const std::string release =
        snap ? snap->kernelRelease : readTrimmed(host, "proc/sys/kernel/osrelease").value_or("");
    auto loader = makeKmodLoader(host, release);
    const PlatformFacts platform = readPlatform(host, release, *loader, modules);
    clock.lap("platform and modules");
    const BootConfig boot = readBootConfig(host);
    HostFacts facts{snap ? &*snap : nullptr, snap ? std::string() : snap.error().describe(),
                    platform, boot, readTrimmed(host, "proc/cmdline").value_or("")};
    facts.operatorDriver = operatorProvidesDriver(host, req.selection.hostDriverProvider, release,
                                                  req.selection.hostDriver);
    facts.otherAgents = operatorAgents(host);
    clock.lap("boot configuration");
    // 2. The checks.
    auto r = preflightHost(facts, req);
    if (!r) return fail(ctx, r.error());
    report = std::move(*r);
    clock.lap("checks");
  }

  // 3. Print; the exit code says whether anything failed.
  if (ctx.json()) {
    ctx.out << reportJson(report).dump(2) << "\n";
  } else {
    printText(ctx, report, ctx.global.root.string(), useColor(ctx, opt.color));
  }
  clock.lap("output");
  return report.failed() ? static_cast<int>(Exit::kFailed) : static_cast<int>(Exit::kOk);
}

}  // namespace hostprep

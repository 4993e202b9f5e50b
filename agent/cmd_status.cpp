// hostprep status: what the node is, from the host alone; --write publishes it.
#include <spdlog/spdlog.h>

#include <ctime>
#include <nlohmann/json.hpp>

#include "agent/commands.hpp"
#include "agent/config.hpp"
#include "agent/local_file.hpp"
#include "agent/options.hpp"
#include "agent/status_writer.hpp"
#include "drivers/published/status_formats.hpp"

namespace hostprep {
namespace {

void printText(Context& ctx, const StatusDocument& d) {
  ctx.out << "node " << (d.nodeName.empty() ? "(unnamed)" : d.nodeName) << ": " << summary(d)
          << "\n";
  for (const auto& c : d.conditions) {
    ctx.out << "  " << c.type << "=" << toString(c.status) << " (" << c.reason << "): " << c.message
            << "\n";
  }
  for (const auto& dv : d.devices) {
    ctx.out << "  " << dv.fn->bdf.str() << " " << toString(dv.role) << " " << toString(dv.fn->id)
            << " " << dv.name.value_or(className(dv.fn->classCode)) << ": "
            << dv.fn->driver.value_or("no driver");
    if (dv.onWantedDriver == false) ctx.out << " (wants " << dv.wanted() << ")";
    if (dv.fn->responsive == false)
      ctx.out << " (does not answer" << (dv.fn->powerState ? ", " + *dv.fn->powerState : "") << ")";
    ctx.out << "\n";
  }
  // The entries themselves are long; the document carries them, ready for the KubeVirt CR.
  if (!d.permitted.empty()) {
    ctx.out << "  KubeVirt permittedHostDevices: " << d.permitted.pci.size() << " pci, "
            << d.permitted.mediated.size() << " mediated (see --output json)\n";
  }
}

}  // namespace

int cmdStatus(Context& ctx, const std::vector<std::string>& args) {
  ctx.errorDocument = nlohmann::json::object();  // --output json: errors as {"ok": false, ...}
  StatusOptions opt;
  if (auto rc = exitEarly(ctx, parseStatusOptions(args), opt)) return *rc;
  RootHost host(ctx.global.root);

  // 1. The selection of the last prepare, the config over it (selection, paths, mode), then the
  //    flags over both.
  AgentConfig last;
  if (auto s = readLastSelection(host); !s) {
    spdlog::warn("{} (ignored)", s.error().describe());
  } else if (*s) {
    last.selection = **s;
  }
  auto config = loadConfig(host, opt.config.path, opt.config.given, last);
  if (!config) return fail(ctx, config.error());
  StatusRequest req;
  req.config = std::move(*config);
  opt.selection.applyTo(req.config.selection);
  req.modeOverride = opt.mode;
  req.now = std::time(nullptr);
  if (opt.pciIdsFile) {
    auto text = readHostFile(host, "--pci-ids", *opt.pciIdsFile, 16u << 20);
    if (!text) return fail(ctx, text.error());
    req.pciIds = *text;
  }

  if (opt.write && !opt.write->empty()) {
    if (auto st = checkFileTarget(host, *opt.write, "--write"); !st) return fail(ctx, st.error());
  }

  // 2. Observe.
  auto o = observe(host, req);
  if (!o) return fail(ctx, o.error());

  // 3. Publish and print.
  if (opt.write) {
    const std::string path = opt.write->empty() ? req.config.statusPath : *opt.write;
    if (auto s = publish(host, **o, req.config, path); !s) return fail(ctx, s.error());
  }
  if (ctx.json()) {
    ctx.out << toJson((*o)->doc).dump(2) << "\n";
  } else {
    printText(ctx, (*o)->doc);
  }
  return 0;
}

}  // namespace hostprep

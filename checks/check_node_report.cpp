// check-node's report: the JSON document (checks/check-node.schema.json) and the text a person
// reads. Declared in checks/check_node.hpp.
#include <array>
#include <sstream>

#include "checks/check_node.hpp"
#include "checks/findings.hpp"

namespace hostprep {

using nlohmann::json;

namespace {

json findingJson(const Finding& f) {
  json j{{"id", f.id},
         {"severity", std::string(toString(f.severity))},
         {"node", f.node.empty() ? json(nullptr) : json(f.node)},
         {"message", f.message},
         {"fix", f.fix}};
  j["resource"] = f.resource.empty() ? json(nullptr) : json(f.resource);
  j["subject"] = f.subject.empty() ? json(nullptr) : json(f.subject);
  return j;
}

// How the mode was decided, in the text report; indexed by ModeSource.
constexpr std::array<std::string_view, 4> kModeSourceWords{
    " (label)", " (no label: default workload)", " (invalid label: default workload)",
    " (sandbox workloads disabled)"};

// Nodes per state, indexed by NodeState.
std::array<int, 3> countStates(const CheckNodeReport& r) {
  std::array<int, 3> c{};
  for (const auto& n : r.nodes) ++c[static_cast<size_t>(n.state())];
  return c;
}

// The declared split, modes with GPUs only; null on a one-mode node.
json splitJson(const NodeResult& n) {
  if (!n.split) return nullptr;
  json j = json::object();
  for (Mode m : {Mode::kContainer, Mode::kVmPassthrough, Mode::kVmVgpu}) {
    if (n.split->of(m) > 0) j[std::string(toString(m))] = n.split->of(m);
  }
  return j;
}

}  // namespace

json reportJson(const CheckNodeReport& r) {
  json j;
  j["schema"] = "hostprep.check-node/v1";
  j["ok"] = r.exitCode() == 0;
  j["policy"] = {{"given", r.policy.given},
                 {"source", r.policy.given ? json(r.policy.source) : json(nullptr)},
                 {"sandbox_workloads_enabled", r.policy.sandboxEnabled},
                 {"default_workload", std::string(toString(r.policy.defaultWorkload))}};
  const auto [ok, warn, err] = countStates(r);
  int nogpu = 0;
  json nodes = json::array();
  json findings = json::array();
  for (const auto& n : r.nodes) {
    nogpu += n.hasGpus ? 0 : 1;
    json res = json::object();
    for (const auto& rc : n.resources) {
      res[rc.name] = {{"kind", std::string(toString(rc.kind))},
                      {"capacity", rc.capacity ? json(*rc.capacity) : json(nullptr)},
                      {"allocatable", rc.allocatable ? json(*rc.allocatable) : json(nullptr)}};
    }
    nodes.push_back(
        {{"name", n.name},
         {"source", n.source},
         {"has_gpus", n.hasGpus},
         {"mode", n.hasGpus ? json(std::string(toString(n.mode))) : json(nullptr)},
         {"mode_source", n.hasGpus ? json(std::string(toString(n.modeSource))) : json(nullptr)},
         {"label", n.label ? json(*n.label) : json(nullptr)},
         {"gpus", n.gpus ? json(*n.gpus) : json(nullptr)},
         {"split", splitJson(n)},
         {"resources", std::move(res)},
         {"state", std::string(toString(n.state()))}});
    for (const auto& f : n.findings) findings.push_back(findingJson(f));
  }
  for (const auto& f : r.clusterFindings) findings.push_back(findingJson(f));
  j["summary"] = {{"nodes", r.nodes.size()},
                  {"ok", ok},
                  {"with_warnings", warn},
                  {"with_errors", err},
                  {"without_gpus", nogpu},
                  {"errors", r.count(Severity::kError)},
                  {"warnings", r.count(Severity::kWarning)},
                  {"infos", r.count(Severity::kInfo)}};
  j["nodes"] = std::move(nodes);
  j["findings"] = std::move(findings);
  return j;
}

std::string summaryLine(const CheckNodeReport& r) {
  const auto [ok, warn, err] = countStates(r);
  std::string line = plural(static_cast<int64_t>(r.nodes.size()), "node", "nodes") + ", " +
                     std::to_string(ok) + " ok";
  if (warn) line += ", " + std::to_string(warn) + " with warnings";
  if (err) line += ", " + std::to_string(err) + " with errors";
  int clusterErr = 0;
  for (const auto& f : r.clusterFindings) clusterErr += f.severity == Severity::kError ? 1 : 0;
  if (clusterErr) line += "; " + plural(clusterErr, "cluster error", "cluster errors");
  return line;
}

std::string reportText(const CheckNodeReport& r) {
  std::ostringstream s;
  s << "policy: sandbox workloads " << (r.policy.sandboxEnabled ? "enabled" : "disabled")
    << ", default workload " << toString(r.policy.defaultWorkload) << " ("
    << (r.policy.given ? "from " + r.policy.source : std::string("assumed: no --cluster-policy"))
    << ")\n";
  auto print = [&](const Finding& f) {
    s << "  " << toString(f.severity) << " " << f.id << ": " << f.message << "\n"
      << "    fix: " << f.fix << "\n";
  };
  for (const auto& n : r.nodes) {
    s << n.name << ": ";
    if (!n.hasGpus) {
      s << "no GPU\n";
    } else {
      s << toString(n.mode);
      s << kModeSourceWords[static_cast<size_t>(n.modeSource)];
      if (n.gpus) s << ", " << plural(*n.gpus, "GPU", "GPUs");
      if (n.split) s << ", split " << n.split->describe();
      int e = n.count(Severity::kError), w = n.count(Severity::kWarning);
      if (e == 0 && w == 0) {
        s << ": ok\n";
      } else {
        s << ": ";
        if (e) s << plural(e, "error", "errors") << (w ? ", " : "");
        if (w) s << plural(w, "warning", "warnings");
        s << "\n";
      }
    }
    for (const auto& f : n.findings) print(f);
  }
  if (!r.clusterFindings.empty()) {
    s << "cluster:\n";
    for (const auto& f : r.clusterFindings) print(f);
  }
  s << summaryLine(r) << "\n";
  return s.str();
}

}  // namespace hostprep

#include "drivers/model/operator_driver.hpp"

#include <algorithm>
#include <utility>

#include "drivers/common/parsers.hpp"
#include "drivers/common/text.hpp"
#include "drivers/common/validate.hpp"
#include "drivers/seam/module_index.hpp"

namespace hostprep {

bool operatorDriverPresent(const Host& host) {
  return host.exists(kOperatorDriverRoot) || host.exists(kOperatorValidations);
}

bool operatorProvidesDriver(const Host& host, DriverProvider p, const std::string& kernelRelease,
                            std::string_view module) {
  if (p != DriverProvider::kAuto) return p == DriverProvider::kOperator;
  const std::string m = normalizeModuleName(module);
  if (!listedModules(host, kernelRelease, {m}).empty()) return false;
  return operatorDriverPresent(host);
}

std::string waitingForOperatorDriver(std::string_view module) {
  return "waiting for the host driver from the GPU Operator's driver container (module " +
         std::string(module) + " not loaded yet)";
}

namespace {

// The operator agent a program name belongs to, or "".
std::string_view agentOf(std::string_view program) {
  if (auto slash = program.rfind('/'); slash != std::string_view::npos)
    program = program.substr(slash + 1);
  if (program == "vfio-manage" || program == "vfio-manage.sh") return "vfio-manager";
  if (program == "nvidia-vgpu-dm" || program == "vgpu-device-manager") return "vgpu-device-manager";
  return "";
}

}  // namespace

std::vector<std::string> operatorAgents(const Host& host) {
  std::vector<std::pair<long, std::string>> found;
  auto procs = host.listUnordered("proc");
  if (!procs) return {};
  for (const auto& p : *procs) {
    auto pid = parseUnsigned(p);
    if (!pid) continue;
    const std::string comm = readTrimmed(host, hostPath("proc", p, "comm")).value_or("");
    // Only an agent's or a shell's command line is read (a script run as "sh vfio-manage.sh").
    const bool shell = comm == "sh" || comm == "bash" || comm == "dash";
    if (agentOf(comm).empty() && !shell) continue;
    std::vector<std::string> words;
    if (auto cmd = host.read(hostPath("proc", p, "cmdline"), 4096)) {
      for (auto w : split(*cmd, '\0')) {
        if (!w.empty()) words.emplace_back(w);
      }
    }
    // The script runs under a shell ("/bin/sh /usr/bin/vfio-manage bind --all"): its name is
    // the shell's first argument, and comm is the script's name.
    std::string_view agent = agentOf(comm);
    for (size_t i = 0; agent.empty() && i < std::min<size_t>(words.size(), 2); ++i)
      agent = agentOf(words[i]);
    if (agent.empty()) continue;
    std::string what = words.empty() ? comm : join(words, " ");
    if (what.size() > 80) what = what.substr(0, 80) + "...";
    found.emplace_back(static_cast<long>(*pid),
                       std::string(agent) + " (pid " + p + ": " + quoteUntrusted(what) + ")");
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

}  // namespace hostprep

// hostprep: prepares a GPU node's host for its workload mode (container, vm-passthrough,
// vm-vgpu). This file only dispatches: read the global options, find the command, run it.
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "agent/commands.hpp"
#include "agent/options.hpp"

namespace hostprep {
namespace {

constexpr Command kCommands[] = {
    {"prepare", "move the selected GPUs and their companions to the mode's driver", cmdPrepare},
    {"preflight", "check every host prerequisite of a mode and say how to fix it", cmdPreflight},
    {"status", "what the node is: modes, devices, conditions, advertised resources", cmdStatus},
    {"agent", "converge, publish the status, and keep it current from kernel events", cmdAgent},
    {"persist", "keep passthrough GPUs away from the host driver from the first boot stage",
     cmdPersist},
    {"check-node", "check node labels against advertised resources (cluster side)", cmdCheckNode},
};

size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

void printUsage(std::ostream& os) {
  os << "usage: hostprep [global options] <command> [options]\n\nCommands:\n";
  for (const auto& c : kCommands)
    os << "  " << c.name << std::string(14 - std::string_view(c.name).size(), ' ') << c.help
       << "\n";
  os << "\n"
     << globalOptionsHelp()
     << "\nExit codes: 0 ok or nothing to do, 1 failed (host left as it was), 2 usage or bad "
        "input,\n"
        "3 refused (device in use, unsafe IOMMU group).\n"
        "Run 'hostprep <command> --help' for a command's options.\n";
}

// Logs go to stderr in a journald-friendly form: "<level> message", no timestamps (journald
// adds them), so stdout stays clean for --output json.
void setupLogging(const GlobalOptions& g) {
  auto logger = spdlog::stderr_logger_st("hostprep");
  logger->set_pattern("%l: %v");
  logger->set_level(spdlog::level::from_str(g.logLevel));
  spdlog::set_default_logger(logger);
}

int run(int argc, const char* const* argv) {
  // 1. Global options, wherever they stand.
  auto parsed = parseGlobalOptions(argc, argv);
  if (!parsed) {
    std::cerr << "hostprep: " << parsed.error().describe() << "\n";
    return static_cast<int>(Exit::kUsage);
  }
  if (parsed->version) {
    std::cout << "hostprep " << HOSTPREP_VERSION << "\n";
    return 0;
  }
  auto& rest = parsed->rest;
  if (rest.empty()) {
    printUsage(parsed->help ? std::cout : std::cerr);
    return parsed->help ? 0 : static_cast<int>(Exit::kUsage);
  }
  if (parsed->help) rest.push_back("--help");

  // 2. The command, with "did you mean" on a typo.
  const std::string name = rest.front();
  const auto* cmd = std::find_if(std::begin(kCommands), std::end(kCommands),
                                 [&](const Command& c) { return name == c.name; });
  if (cmd == std::end(kCommands)) {
    std::cerr << "hostprep: unknown command '" << name << "'";
    const Command* best = nullptr;
    size_t bestD = 3;
    for (const auto& c : kCommands) {
      size_t d = editDistance(name, c.name);
      if (d < bestD) bestD = d, best = &c;
    }
    if (best) std::cerr << "; did you mean '" << best->name << "'?";
    std::cerr << "\nrun 'hostprep --help' for the list of commands\n";
    return static_cast<int>(Exit::kUsage);
  }

  // 3. Run it.
  setupLogging(parsed->global);
  Context ctx{parsed->global, std::cout, std::cerr, cmd->name, std::nullopt};
  return cmd->fn(ctx, std::vector<std::string>(rest.begin() + 1, rest.end()));
}

}  // namespace
}  // namespace hostprep

int main(int argc, char** argv) {
  try {
    return hostprep::run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "hostprep: internal error: " << e.what() << "\n";
    return static_cast<int>(hostprep::Exit::kFailed);
  }
}

// Reads the global options, finds the command, runs it: in this process, or by exec(3).
#include "agent/dispatch.hpp"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "agent/commands.hpp"
#include "agent/options.hpp"
#include "drivers/seam/host.hpp"

#ifndef HOSTPREP_LIBEXEC_FROM_SBIN
#define HOSTPREP_LIBEXEC_FROM_SBIN "../libexec/hostprep"
#endif

namespace hostprep {
namespace {

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

void printUsage(std::ostream& os, std::span<const Command> commands) {
  os << "usage: hostprep [global options] <command> [options]\n\nCommands:\n";
  for (const auto& c : commands)
    os << "  " << c.name << std::string(14 - std::string_view(c.name).size(), ' ') << c.help
       << "\n";
  os << "\n"
     << globalOptionsHelp()
     << "\nFiles: a FILE or PATH given to --config, --write, --pci-ids or prepare's --vgpu-config\n"
        "is a host path: absolute, read and written under --root (with --root /host, --config\n"
        "/etc/hostprep/c.yaml reads /host/etc/hostprep/c.yaml). check-node's FILEs are cluster\n"
        "documents, read on this machine as given ('-': standard input).\n"
        "\nExit codes: 0 ok or nothing to do, 1 failed (host left as it was), 2 usage or bad "
        "input,\n"
        "3 refused (device in use, unsafe IOMMU group).\n"
        "Run 'hostprep <command> --help' for a command's options.\n";
}

// Whether the command's words ask for its help, which needs no host.
bool asksForHelp(const std::vector<std::string>& rest) {
  return std::any_of(rest.begin(), rest.end(),
                     [](const std::string& w) { return w == "--help" || w == "-h"; });
}

// Logs go to stderr in a journald-friendly form: "<level> message", no timestamps (journald
// adds them), so stdout stays clean for --output json.
void setupLogging(const GlobalOptions& g) {
  auto logger = spdlog::stderr_logger_st("hostprep");
  logger->set_pattern("%l: %v");
  logger->set_level(spdlog::level::from_str(g.logLevel));
  spdlog::set_default_logger(logger);
}

// exec(3) of the command's program with this command line; returns only when no candidate ran.
int runProgram(Context& ctx, const Command& cmd, const char* const* argv) {
  std::string tried;
  int err = ENOENT;  // the reason reported: the first that is not "no such file"
  for (const auto& path : programCandidates(cmd.program)) {
    ::execv(path.c_str(), const_cast<char* const*>(argv));  // NOLINT: execv's historical type
    if (err == ENOENT) err = errno;
    tried += (tried.empty() ? "" : ", ") + path.string();
  }
  return fail(ctx,
              sysError("cannot run " + std::string(cmd.program) + " (tried " + tried + ")", err,
                       "an install puts it in libexec/hostprep (make install, or the package); "
                       "a build tree builds it beside hostprep (cmake --build)"),
              nlohmann::json::object());
}

int run(int argc, const char* const* argv, std::span<const Command> commands) {
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
    printUsage(parsed->help ? std::cout : std::cerr, commands);
    return parsed->help ? 0 : static_cast<int>(Exit::kUsage);
  }
  if (parsed->help) rest.push_back("--help");

  // 2. The command, with "did you mean" on a typo.
  const std::string name = rest.front();
  const auto cmd = std::find_if(commands.begin(), commands.end(),
                                [&](const Command& c) { return name == c.name; });
  if (cmd == commands.end()) {
    std::cerr << "hostprep: unknown command '" << name << "'";
    const Command* best = nullptr;
    size_t bestD = 3;
    for (const auto& c : commands) {
      size_t d = editDistance(name, c.name);
      if (d < bestD) bestD = d, best = &c;
    }
    if (best) std::cerr << "; did you mean '" << best->name << "'?";
    std::cerr << "\nrun 'hostprep --help' for the list of commands\n";
    return static_cast<int>(Exit::kUsage);
  }

  // 3. Run it, in its own program or here; a command here only under a --root that is what it
  //    needs (else every read would fail, and the agent retry for ever).
  setupLogging(parsed->global);
  Context ctx{parsed->global, std::cout, std::cerr, cmd->name, std::nullopt};
  if (!cmd->fn) return runProgram(ctx, *cmd, argv);
  if (cmd->root != RootNeed::kNone && !asksForHelp(rest)) {
    Status st = checkRootDir(ctx.global.root);
    if (st && cmd->root == RootNeed::kRunningHost) st = checkLiveHost(RootHost(ctx.global.root));
    if (!st) {
      ctx.errorDocument = nlohmann::json::object();
      return fail(ctx, st.error());
    }
  }
  return cmd->fn(ctx, std::vector<std::string>(rest.begin() + 1, rest.end()));
}

}  // namespace

// This executable's own path: the running process's, not the host's under --root.
std::vector<std::filesystem::path> programCandidates(const char* program) {
  std::error_code ec;
  const auto dir = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
  if (ec || dir.empty()) return {};
  return {dir / program, (dir / HOSTPREP_LIBEXEC_FROM_SBIN / program).lexically_normal()};
}

int runCommandLine(int argc, const char* const* argv, std::span<const Command> commands) {
  try {
    return run(argc, argv, commands);
  } catch (const std::exception& e) {
    std::cerr << "hostprep: internal error: " << e.what() << "\n";
    return static_cast<int>(Exit::kFailed);
  }
}

}  // namespace hostprep

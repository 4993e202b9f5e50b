// One function per subcommand; main.cpp holds the table. Every command starts and fails the
// same way (exitEarly, fail).
#pragma once

#include <optional>

#include "agent/context.hpp"
#include "drivers/common/error.hpp"
#include "drivers/model/mode.hpp"

namespace hostprep {

// How a command reports an error: "hostprep <command>: <error>" on stderr and, with --output json,
// `document` (else ctx.errorDocument, when set) on stdout with "ok": false and "error" added.
// Returns the error's exit code.
int fail(Context& ctx, const Error& e);
int fail(Context& ctx, const Error& e, nlohmann::json document);

// How a command starts: its parsed words either say --help (print the help, exit 0) or are a
// usage error (fail, exit 2): then the exit code; else `options` is set and nullopt says go on.
template <class T>
std::optional<int> exitEarly(Context& ctx, Result<CommandLine<T>> parsed, T& options) {
  if (!parsed) return fail(ctx, parsed.error());
  if (const auto* help = std::get_if<HelpText>(&*parsed)) {
    ctx.out << help->text;
    return 0;
  }
  options = std::get<T>(std::move(*parsed));
  return std::nullopt;
}

int cmdPrepare(Context& ctx, const std::vector<std::string>& args);
int cmdPreflight(Context& ctx, const std::vector<std::string>& args);
// The node's configured mode for preflight's default (etc/hostprep/config.yaml), if any.
std::optional<Mode> configuredPreflightMode(const Context& ctx);
int cmdStatus(Context& ctx, const std::vector<std::string>& args);
int cmdAgent(Context& ctx, const std::vector<std::string>& args);
int cmdPersist(Context& ctx, const std::vector<std::string>& args);
int cmdRecover(Context& ctx, const std::vector<std::string>& args);
int cmdCheckNode(Context& ctx, const std::vector<std::string>& args);

// check-node's line in the usage, and the executable that runs it (agent/main_check_node.cpp).
inline constexpr const char* kCheckNodeSummary =
    "check node labels against advertised resources (cluster side)";
inline constexpr const char* kCheckNodeProgram = "hostprep-check-node";

}  // namespace hostprep

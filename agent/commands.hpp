// One function per subcommand; main.cpp holds the table.
#pragma once

#include <optional>

#include "agent/context.hpp"
#include "drivers/mode.hpp"

namespace hostprep {

int cmdPrepare(Context& ctx, const std::vector<std::string>& args);
int cmdPreflight(Context& ctx, const std::vector<std::string>& args);
// The node's configured mode for preflight's default (etc/hostprep/config.yaml), if any.
std::optional<Mode> configuredPreflightMode(const Context& ctx);
int cmdStatus(Context& ctx, const std::vector<std::string>& args);
int cmdAgent(Context& ctx, const std::vector<std::string>& args);
int cmdPersist(Context& ctx, const std::vector<std::string>& args);
int cmdCheckNode(Context& ctx, const std::vector<std::string>& args);

}  // namespace hostprep

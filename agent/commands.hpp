// One function per subcommand; main.cpp holds the table.
#pragma once

#include "agent/context.hpp"

namespace hostprep {

int cmdPrepare(Context& ctx, const std::vector<std::string>& args);
int cmdStatus(Context& ctx, const std::vector<std::string>& args);
int cmdAgent(Context& ctx, const std::vector<std::string>& args);
int cmdPersist(Context& ctx, const std::vector<std::string>& args);

}  // namespace hostprep

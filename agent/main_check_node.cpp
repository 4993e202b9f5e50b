// hostprep-check-node: the check-node command, run by `hostprep check-node` (agent/main.cpp)
// with the user's whole command line. Its own executable because it reads node lists with
// libsimdjson and so loads the shared C++ runtime, which no other command needs.
#include "agent/commands.hpp"
#include "agent/dispatch.hpp"

namespace {

constexpr hostprep::Command kCommands[] = {
    {"check-node", hostprep::kCheckNodeSummary, hostprep::cmdCheckNode, nullptr,
     hostprep::RootNeed::kNone},
};

}  // namespace

int main(int argc, char** argv) { return hostprep::runCommandLine(argc, argv, kCommands); }

// hostprep: prepares a GPU node's host for its workload mode (container, vm-passthrough,
// vm-vgpu). This file only holds the commands; agent/dispatch reads the command line.
#include "agent/commands.hpp"
#include "agent/dispatch.hpp"

namespace {

// check-node is an executable of its own, hostprep-check-node (agent/main_check_node.cpp): it
// alone reads node lists with libsimdjson, which Debian ships shared only and which loads the
// shared C++ runtime. Without it this binary links libstdc++ statically, and the agent, prepare
// and preflight map neither library (tests/bench/README.md).
constexpr hostprep::Command kCommands[] = {
    {"prepare", "move the selected GPUs and their companions to the mode's driver",
     hostprep::cmdPrepare},
    {"preflight", "check every host prerequisite of a mode and say how to fix it",
     hostprep::cmdPreflight, nullptr, hostprep::RootNeed::kDirectory},
    {"status", "what the node is: modes, devices, conditions, advertised resources",
     hostprep::cmdStatus},
    {"agent", "converge, publish the status, and keep it current from kernel events",
     hostprep::cmdAgent},
    {"persist", "keep passthrough GPUs away from the host driver from the first boot stage",
     hostprep::cmdPersist},
    {"recover", "bring back GPUs that no longer answer: reset, bus reset, remove and rescan",
     hostprep::cmdRecover},
    {"check-node", hostprep::kCheckNodeSummary, nullptr, hostprep::kCheckNodeProgram},
};

}  // namespace

int main(int argc, char** argv) { return hostprep::runCommandLine(argc, argv, kCommands); }

// The command line of both executables, hostprep and hostprep-check-node: the global options,
// the command by name (with "did you mean"), logging, then the command. A command with a program
// instead of a function is run by exec(3) with this process's whole command line, so its
// global options, standard input and exit code are the ones the user gave and gets.
#pragma once

#include <filesystem>
#include <span>
#include <vector>

#include "agent/context.hpp"

namespace hostprep {

int runCommandLine(int argc, const char* const* argv, std::span<const Command> commands);

// Where a command's program is looked for: beside this executable (a build tree), then in the
// install's libexec/hostprep, found from this executable's sbin directory (usr/sbin/hostprep:
// usr/libexec/hostprep/PROGRAM). Empty when /proc/self/exe cannot be read.
std::vector<std::filesystem::path> programCandidates(const char* program);

}  // namespace hostprep

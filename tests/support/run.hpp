// Runs the hostprep binary for command-line tests (fork + execv, no shell).
#pragma once

#include <string>
#include <vector>

namespace hostprep::test {

struct RunResult {
  int exitCode = -1;
  std::string out;
  std::string err;
};

RunResult runHostprep(const std::vector<std::string>& args,
                      const std::vector<std::string>& env = {});

// The same with another executable (a copy of hostprep somewhere else).
RunResult runExecutable(const std::string& binary, const std::vector<std::string>& args,
                        const std::vector<std::string>& env = {});

// The same with stdout and stderr on a pseudo-terminal (for colour-on-a-terminal tests); the
// output is what the terminal received (the pty turns "\n" into "\r\n"). `env` entries
// replace inherited variables of the same name; a bare "NAME" removes it.
RunResult runHostprepOnTty(const std::vector<std::string>& args,
                           const std::vector<std::string>& env = {});

}  // namespace hostprep::test

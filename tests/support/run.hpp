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

}  // namespace hostprep::test

// What every command gets: the global options and where to print. No globals, no singletons.
#pragma once

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

namespace hostprep {

enum class OutputFormat { kText, kJson };

struct GlobalOptions {
  std::filesystem::path root = "/";
  OutputFormat output = OutputFormat::kText;
  std::string logLevel = "info";
};

struct Context {
  GlobalOptions global;
  std::ostream& out;
  std::ostream& err;

  bool json() const { return global.output == OutputFormat::kJson; }
};

// A subcommand: takes the words after its name (global options already removed) and returns
// the process exit code.
using CommandFn = int (*)(Context&, const std::vector<std::string>& args);

struct Command {
  const char* name;
  const char* help;
  CommandFn fn;
};

}  // namespace hostprep

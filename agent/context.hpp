// What every command gets: the global options and where to print. No globals, no singletons.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <variant>
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
  std::string_view command;  // "prepare": its errors read "hostprep prepare: ..."
  // With --output json, a failure also prints this document on stdout, with "ok": false and
  // "error": {message, errno, advice} added (prepare, check-node); unset: stderr only.
  std::optional<nlohmann::json> errorDocument;

  bool json() const { return global.output == OutputFormat::kJson; }
};

// A command's words, parsed (agent/options): its typed options, or --help with the text to print.
struct HelpText {
  std::string text;
};
template <class T>
using CommandLine = std::variant<T, HelpText>;

// A subcommand: takes the words after its name (global options already removed) and returns
// the process exit code.
using CommandFn = int (*)(Context&, const std::vector<std::string>& args);

// What a command needs --root to be; agent/dispatch checks it before the command runs.
enum class RootNeed {
  kNone,         // reads no host (check-node: only its inputs)
  kDirectory,    // a directory: a host's root or an image's (preflight)
  kRunningHost,  // a running host's root, with sys/bus/pci/devices under it
};

// A command is either a function of this executable (fn) or, where fn is null, an executable of
// its own (program: a file name) that gets this process's whole command line (agent/dispatch).
struct Command {
  const char* name;
  const char* help;
  CommandFn fn;
  const char* program = nullptr;
  RootNeed root = RootNeed::kRunningHost;
};

}  // namespace hostprep

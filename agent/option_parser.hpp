// How a command's options are parsed (options.cpp says what they are: the option table, where
// every option is declared once with its value and its help, and each command's use of it): a
// command's options as Boost describes them, its --help text, the parser skeleton (the words
// against the command's options, --help, a stray word refused), and the readers that turn a value
// into its typed option through the validator the config file uses (agent/option_values).
#pragma once

#include <boost/program_options.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/context.hpp"
#include "agent/options.hpp"
#include "drivers/common/error.hpp"
#include "drivers/common/text.hpp"

namespace hostprep::cli {

namespace po = boost::program_options;

enum class Arg {
  kNone,          // a switch
  kText,          // one value
  kOptionalText,  // a value that may be left out ("" then)
  kTexts,         // values, possibly after several uses
  kSeconds,       // a number of seconds
};

struct Option {
  std::string name;
  Arg arg;
  std::string help;
  std::string byDefault = {};  // the value when the option is absent (shown as "(=...)")
};

// Every command option, once (options.cpp).
const std::vector<Option>& optionTable();

// A command's use of an option of the table, in the command's own words where they differ.
struct Use {
  std::string name;
  std::string help = {};       // "": the table's
  std::string byDefault = {};  // "": the table's
};

// A command: its name, the text around its option table, its options, and a positional name.
struct CommandSpec {
  std::string name;
  std::string usage;  // above the options (a blank line between)
  std::vector<Use> options;
  std::string trailer = {};  // below them
  const char* positional = nullptr;
};

// The command's options as Boost describes them (std::logic_error for an option the table lacks:
// a bug), and the command's --help text.
po::options_description describe(const CommandSpec& c);
std::string helpText(const CommandSpec& c);

// Runs a Boost parser and turns its exceptions into a usage error naming the input.
template <class F>
Result<po::variables_map> parseWith(F&& parse, std::string_view command) {
  po::variables_map vm;
  try {
    po::store(parse(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    // The caller names the command ("hostprep prepare: ..."); the advice names its help.
    return usageError(e.what(), command == "hostprep"
                                    ? std::string("see 'hostprep --help'")
                                    : "see 'hostprep " + std::string(command) + " --help'");
  }
  return vm;
}

// A word the command does not take is an error, never ignored: `prepare --mode M 0000:3b:00.0`
// would otherwise move every GPU, not the one named.
Error strayWord(const std::string& command, const std::string& word);

// The skeleton of every command's parser: the words against the command's options; --help; then
// `read` makes the typed options from them.
template <class T, class Read>
Result<CommandLine<T>> parseCommand(const std::vector<std::string>& args, const CommandSpec& c,
                                    Read read) {
  po::options_description all;
  all.add(describe(c));
  po::positional_options_description pos;
  if (c.positional) {
    all.add_options()(c.positional, po::value<std::vector<std::string>>()->composing(), "");
    pos.add(c.positional, -1);
  }
  std::vector<std::string> stray;  // words that are no option, where the command takes none
  auto vm = parseWith(
      [&] {
        po::command_line_parser p(args);
        p.options(all);
        if (c.positional) p.positional(pos);
        auto parsed = p.run();
        if (!c.positional) stray = po::collect_unrecognized(parsed.options, po::include_positional);
        return parsed;
      },
      c.name);
  if (!vm) return vm.error();
  if (vm->count("help")) return CommandLine<T>(HelpText{helpText(c)});
  if (!stray.empty()) return strayWord(c.name, stray.front());
  Result<T> o = read(*vm);
  if (!o) return o.error();
  return CommandLine<T>(std::move(*o));
}

// ---- Reading the values: each option's validator is called in one place --------------------

std::optional<std::string> text(const po::variables_map& vm, const char* name);
std::vector<std::string> texts(const po::variables_map& vm, const char* name);
bool given(const po::variables_map& vm, const char* name);
Status readMode(const po::variables_map& vm, std::optional<Mode>& mode);
Status readSelection(const po::variables_map& vm, SelectionOverrides& o);
// The same for a command whose --host-driver has a default: the whole selection.
Status readSelection(const po::variables_map& vm, SelectionOptions& selection);
Result<std::chrono::milliseconds> readSeconds(const po::variables_map& vm, const char* name);
Status readTimeouts(const po::variables_map& vm, std::chrono::milliseconds& lock,
                    std::chrono::milliseconds& unbind);
Status readConfig(const po::variables_map& vm, ConfigFile& c);

// A list of values on the command line: comma-separated, each checked by `parse`.
template <class T>
Result<std::vector<T>> parseList(std::string_view option, std::string_view text,
                                 Result<T> (*parse)(std::string_view, std::string_view)) {
  std::vector<T> out;
  const std::string where = "--" + std::string(option);
  for (auto part : split(text, ',')) {
    part = trim(part);
    if (part.empty()) continue;
    auto v = parse(where, part);
    if (!v) {
      Error e = v.error();
      e.advice += ", comma-separated";
      return e;
    }
    out.push_back(*v);
  }
  return out;
}

}  // namespace hostprep::cli

#include "drivers/common/parsers.hpp"

#include <fnmatch.h>

#include <algorithm>

#include "drivers/common/text.hpp"

namespace hostprep {

bool Cmdline::has(std::string_view key) const {
  return std::any_of(params.begin(), params.end(), [&](const auto& p) { return p.first == key; });
}

std::optional<std::string> Cmdline::value(std::string_view key) const {
  std::optional<std::string> v;
  for (const auto& p : params) {
    if (p.first == key) v = p.second;
  }
  return v;
}

Cmdline parseCmdline(std::string_view text) {
  Cmdline out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n')) ++i;
    if (i >= text.size()) break;
    std::string word;
    bool quoted = false;
    while (i < text.size()) {
      char c = text[i];
      if (c == '"') {
        quoted = !quoted;
        ++i;
        continue;
      }
      if (!quoted && (c == ' ' || c == '\t' || c == '\n')) break;
      word += c;
      ++i;
    }
    if (word.empty()) continue;
    // The kernel's arguments end at "--": what follows goes to init (kernel/params.c,
    // parse_args(): "Stop at --").
    if (word == "--") break;
    auto eq = word.find('=');
    if (eq == std::string::npos) {
      out.params.emplace_back(word, std::nullopt);
    } else {
      out.params.emplace_back(word.substr(0, eq), word.substr(eq + 1));
    }
  }
  return out;
}

std::string normalizeModuleName(std::string_view name) {
  std::string s(name);
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

std::set<std::string> parseProcModules(std::string_view text) {
  std::set<std::string> out;
  for (auto line : splitLines(text)) {
    auto words = splitWords(line);
    if (!words.empty() && isValidModuleName(words[0])) out.insert(normalizeModuleName(words[0]));
  }
  return out;
}

bool isValidModuleName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

namespace {

// Calls `f` with each line of `text` that holds `prefix`, once, in order. A distribution's
// modules.alias has some 26,000 lines and a handful for vfio_pci: each place the prefix occurs is
// found by a search, and only its line is looked at (splitting them all cost 5 ms a call).
template <class F>
void forLinesHolding(std::string_view text, std::string_view prefix, F&& f) {
  for (size_t at = text.find(prefix); at != std::string_view::npos; at = text.find(prefix, at)) {
    const size_t nl = text.rfind('\n', at);
    const size_t start = nl == std::string_view::npos ? 0 : nl + 1;
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    f(text.substr(start, end - start));
    at = end;
  }
}

constexpr std::string_view kVfioAliasPrefix = "vfio_pci:";

}  // namespace

std::vector<ModuleAlias> parseModulesAlias(std::string_view text, std::string_view prefix) {
  std::vector<ModuleAlias> out;
  auto parseLine = [&](std::string_view line) {
    auto w = splitWords(line);
    if (w.size() != 3 || w[0] != "alias") return;
    if (!prefix.empty() && !startsWith(w[1], prefix)) return;
    out.push_back({std::string(w[1]), std::string(w[2])});
  };
  if (prefix.empty()) {
    for (auto line : splitLines(text)) parseLine(line);
  } else {
    forLinesHolding(text, prefix, parseLine);  // only a line that holds the prefix can match
  }
  return out;
}

std::string vfioAliasLines(std::string_view modulesAlias) {
  std::string out;
  forLinesHolding(modulesAlias, kVfioAliasPrefix, [&](std::string_view line) {
    out.append(line);
    out += '\n';
  });
  return out;
}

bool aliasPatternAffordable(std::string_view pattern) {
  return pattern.size() <= 256 && std::count(pattern.begin(), pattern.end(), '*') <= 16;
}

std::string bestVfioModule(std::string_view modulesAlias, std::string_view modalias) {
  std::string target(trim(modalias));
  if (!startsWith(target, "pci:")) return "vfio_pci";
  target = std::string(kVfioAliasPrefix) + target.substr(4);
  std::string best = "vfio_pci";
  long bestStars = -1;
  for (const auto& a : parseModulesAlias(modulesAlias, kVfioAliasPrefix)) {
    // The module becomes a driver directory and a driver_override value: a hostile or corrupt
    // modules.alias line ("alias vfio_pci:* ../../x") is skipped, never followed.
    if (!isValidModuleName(a.module)) continue;
    if (!aliasPatternAffordable(a.pattern)) continue;
    const long stars = std::count(a.pattern.begin(), a.pattern.end(), '*');
    if (::fnmatch(a.pattern.c_str(), target.c_str(), 0) != 0) continue;
    if (bestStars < 0 || stars < bestStars) {
      bestStars = stars;
      best = normalizeModuleName(a.module);
    }
  }
  return best;
}

}  // namespace hostprep

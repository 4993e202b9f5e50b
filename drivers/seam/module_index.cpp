#include "drivers/seam/module_index.hpp"

#include <fnmatch.h>

#include "drivers/common/parsers.hpp"
#include "drivers/common/text.hpp"

namespace hostprep {
namespace {

// kmod's alias_normalize (libkmod/libkmod-util.c): '-' -> '_' except inside [...].
std::string normalizeAlias(std::string_view pattern) {
  std::string s(pattern);
  bool bracket = false;
  for (char& c : s) {
    if (c == '[') bracket = true;
    if (c == ']') bracket = false;
    if (c == '-' && !bracket) c = '_';
  }
  return s;
}

// The names of `names` that an alias pattern matches.
void addMatches(std::string_view pattern, const std::set<std::string>& names,
                std::set<std::string>& out) {
  for (const auto& n : names) {
    if (!out.count(n) && aliasMayMatch(pattern, n)) out.insert(n);
  }
}

bool isBlank(char c) { return c == ' ' || c == '\t'; }

// The first whitespace-separated word of s, and s after it.
std::string_view nextWord(std::string_view& s) {
  size_t b = 0;
  while (b < s.size() && isBlank(s[b])) ++b;
  size_t e = b;
  while (e < s.size() && !isBlank(s[e])) ++e;
  std::string_view w = s.substr(b, e - b);
  s.remove_prefix(e);
  return w;
}

std::string modulesDir(const std::string& release) { return hostPath("lib/modules", release); }

// A text index the lookup reads as its binary twin: the text, or nullopt when the binary is there
// and the text is not (the text cannot speak for it); "" when neither is there.
std::optional<FileText> textOfIndex(const Host& host, const std::string& dir, std::string_view text,
                                    std::string_view binary) {
  if (auto t = host.readText(hostPath(dir, text), 64u << 20)) return std::move(*t);
  if (host.exists(hostPath(dir, binary))) return std::nullopt;
  return FileText();
}

}  // namespace

std::set<std::string> namesListedIn(std::string_view text, const std::set<std::string>& names) {
  std::set<std::string> out;
  eachLine(text, '\n', [&](std::string_view line) {
    line = line.substr(0, line.find(':'));
    const size_t slash = line.rfind('/');
    if (slash != std::string_view::npos) line.remove_prefix(slash + 1);
    const size_t ko = line.find(".ko");
    if (ko == std::string_view::npos || ko == 0) return;
    const std::string name = normalizeModuleName(trim(line.substr(0, ko)));
    if (names.count(name)) out.insert(name);
  });
  return out;
}

bool aliasMayMatch(std::string_view pattern, std::string_view name) {
  // The literal head decides most patterns ("pci:v...", "usb:..."): compare it before anything
  // is built.
  size_t i = 0;
  for (; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '*' || c == '?' || c == '[' || c == '\\') break;
    if (i >= name.size() || (c == '-' ? '_' : c) != name[i]) return false;
  }
  if (i == pattern.size()) return i == name.size();
  // A pattern fnmatch cannot judge cheaply is left to libkmod.
  if (!aliasPatternAffordable(pattern)) return true;
  const std::string n(name);
  return ::fnmatch(normalizeAlias(pattern).c_str(), n.c_str(), 0) == 0;
}

std::set<std::string> namesMatchedByAliases(std::string_view text,
                                            const std::set<std::string>& names) {
  std::set<std::string> out;
  eachLine(text, '\n', [&](std::string_view line) {
    if (nextWord(line) != "alias") return;
    addMatches(nextWord(line), names, out);
  });
  return out;
}

std::set<std::string> namesMatchedByBuiltinAliases(std::string_view modinfo,
                                                   const std::set<std::string>& names) {
  std::set<std::string> out;
  eachLine(modinfo, '\0', [&](std::string_view entry) {
    const size_t key = entry.find(".alias=");
    if (key == std::string_view::npos) return;
    addMatches(entry.substr(key + 7), names, out);
  });
  return out;
}

std::set<std::string> namesInModprobeConfig(std::string_view text,
                                            const std::set<std::string>& names) {
  std::set<std::string> out;
  std::string joined;  // a line continued with a trailing backslash, as kmod reads it
  eachLine(text, '\n', [&](std::string_view part) {
    if (!part.empty() && part.back() == '\\') {
      joined.append(part.substr(0, part.size() - 1));
      return;
    }
    joined.append(part);
    std::string_view line = joined;
    const std::string_view command = nextWord(line);
    if (command == "alias") {
      addMatches(nextWord(line), names, out);
    } else if (command == "install") {
      const std::string module = normalizeModuleName(nextWord(line));
      if (names.count(module)) out.insert(module);
    }
    joined.clear();
  });
  return out;
}

std::set<std::string> listedModules(const Host& host, const std::string& release,
                                    const std::set<std::string>& names) {
  std::set<std::string> out;
  for (auto f : {"modules.dep", "modules.builtin"}) {
    if (auto t = host.readText(hostPath(modulesDir(release), f), 64u << 20)) {
      out.merge(namesListedIn(t->view(), names));
    }
  }
  return out;
}

std::set<std::string> resolvableModules(const Host& host, const std::string& release,
                                        const std::set<std::string>& names) {
  if (names.empty()) return {};
  const std::string dir = modulesDir(release);
  // modules.dep and modules.builtin were read by name already (listedModules); their binary
  // twins without them leave the names unjudged.
  for (auto [text, binary] : {std::pair{"modules.dep", "modules.dep.bin"},
                              std::pair{"modules.builtin", "modules.builtin.bin"}}) {
    if (!host.exists(hostPath(dir, text)) && host.exists(hostPath(dir, binary))) return names;
  }
  auto aliases = textOfIndex(host, dir, "modules.alias", "modules.alias.bin");
  auto builtinAliases =
      textOfIndex(host, dir, "modules.builtin.modinfo", "modules.builtin.alias.bin");
  if (!aliases || !builtinAliases) return names;

  std::set<std::string> out = namesMatchedByAliases(aliases->view(), names);
  out.merge(namesMatchedByBuiltinAliases(builtinAliases->view(), names));
  for (std::string_view d : kModprobeConfigDirs) {
    auto files = host.list(d);
    if (!files) continue;
    for (const auto& f : *files) {
      // kmod reads a directory's "*.conf" files and skips hidden ones (conf_files_filter_out).
      if (f.empty() || f[0] == '.' || !endsWith(f, ".conf")) continue;
      if (auto t = host.read(hostPath(d, f))) out.merge(namesInModprobeConfig(*t, names));
    }
  }
  return out;
}

}  // namespace hostprep

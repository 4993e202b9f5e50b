#include "drivers/published/bootconfig.hpp"

#include <algorithm>

#include "drivers/common/text.hpp"

namespace hostprep {
namespace {

// modprobe.d and modules-load.d search path, highest priority first: a file name in an earlier
// directory hides the same name in later ones (modprobe.d(5), modules-load.d(5)).
constexpr std::string_view kConfDirs[] = {"etc", "run", "usr/local/lib", "usr/lib", "lib"};

// "<dir>/<name>.conf" files of a configuration directory, with the override rule applied, in
// file-name order.
std::vector<std::string> confFiles(const Host& host, std::string_view subdir) {
  std::map<std::string, std::string> byName;
  for (auto base : kConfDirs) {
    const std::string dir = hostPath(base, subdir);
    auto names = host.list(dir);
    if (!names) continue;
    for (const auto& n : *names) {
      if (!endsWith(n, ".conf")) continue;
      byName.emplace(n, hostPath(dir, n));  // emplace keeps the higher-priority one
    }
  }
  std::vector<std::string> out;
  for (auto& [name, path] : byName) out.push_back(path);
  return out;
}

std::string normKey(std::string_view key) {
  std::string s(key);
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

// Removes a trailing comment and surrounding space from a config line.
std::string_view stripComment(std::string_view line, std::string_view marks) {
  auto p = line.find_first_of(marks);
  if (p != std::string_view::npos) line = line.substr(0, p);
  return trim(line);
}

// Expands $VAR and ${VAR} from vars; unknown variables expand to nothing, as in sh.
std::string expandVars(std::string_view s, const std::map<std::string, std::string>& vars) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '$' || i + 1 >= s.size()) {
      out += s[i];
      continue;
    }
    size_t start = i + 1;
    bool braced = s[start] == '{';
    if (braced) ++start;
    size_t end = start;
    while (end < s.size() && (std::isalnum(static_cast<unsigned char>(s[end])) || s[end] == '_'))
      ++end;
    if (end == start || (braced && (end >= s.size() || s[end] != '}'))) {
      out += s[i];
      continue;
    }
    auto it = vars.find(std::string(s.substr(start, end - start)));
    if (it != vars.end()) out += it->second;
    i = braced ? end : end - 1;
  }
  return out;
}

// The value of a shell assignment's right-hand side: quotes removed, "$VAR" expanded inside
// double quotes and bare words, nothing expanded inside single quotes.
std::string shellValue(std::string_view rhs, const std::map<std::string, std::string>& vars) {
  std::string out;
  size_t i = 0;
  while (i < rhs.size()) {
    char c = rhs[i];
    if (c == '\'' || c == '"') {
      size_t close = rhs.find(c, i + 1);
      if (close == std::string_view::npos) close = rhs.size();
      auto inner = rhs.substr(i + 1, close - i - 1);
      out += c == '"' ? expandVars(inner, vars) : std::string(inner);
      i = close + 1;
    } else if (c == ' ' || c == '\t' || (c == '#' && i == 0)) {
      // An unquoted space ends the word (the rest would be a command or a trailing comment); a
      // '#' after a space never gets here, one at the start is a comment.
      break;
    } else {
      size_t end = rhs.find_first_of(" \t'\"", i);
      if (end == std::string_view::npos) end = rhs.size();
      out += expandVars(rhs.substr(i, end - i), vars);
      i = end;
    }
  }
  return out;
}

void addGrub(const Host& host, BootConfig& out) {
  auto main = host.read("etc/default/grub");
  auto snippets = host.list("etc/default/grub.d");
  std::map<std::string, std::string> vars;
  std::string origin;
  if (main) {
    vars = parseGrubDefaults(*main, vars);
    origin = "etc/default/grub";
  }
  // grub-mkconfig sources etc/default/grub.d/*.cfg after etc/default/grub (Debian, Ubuntu).
  if (snippets) {
    for (const auto& n : *snippets) {
      if (!endsWith(n, ".cfg")) continue;
      auto t = host.read(hostPath("etc/default/grub.d", n));
      if (!t) continue;
      vars = parseGrubDefaults(*t, vars);
      origin += std::string(origin.empty() ? "" : " + ") + "etc/default/grub.d/" + n;
    }
  }
  if (origin.empty()) return;
  std::string text = vars["GRUB_CMDLINE_LINUX"];
  const std::string& def = vars["GRUB_CMDLINE_LINUX_DEFAULT"];
  if (!def.empty()) text += (text.empty() ? "" : " ") + def;
  out.cmdlines.push_back(
      {origin + " (GRUB_CMDLINE_LINUX, GRUB_CMDLINE_LINUX_DEFAULT)", text, parseCmdline(text)});
}

void addLoaderEntries(const Host& host, BootConfig& out) {
  // Fedora-style entries may say "options $kernelopts", resolved from grubenv.
  std::map<std::string, std::string> env;
  for (auto p : {"boot/grub2/grubenv", "boot/grub/grubenv"}) {
    if (auto t = host.read(p)) {
      for (auto line : splitLines(*t)) {
        auto eq = line.find('=');
        if (!startsWith(line, "#") && eq != std::string_view::npos) {
          env.emplace(std::string(line.substr(0, eq)), std::string(line.substr(eq + 1)));
        }
      }
    }
  }
  for (auto dir : {"boot/loader/entries", "efi/loader/entries", "boot/efi/loader/entries"}) {
    auto names = host.list(dir);
    if (!names) continue;
    for (const auto& n : *names) {
      if (!endsWith(n, ".conf")) continue;
      const std::string path = hostPath(dir, n);
      auto t = host.read(path);
      if (!t) continue;
      std::string text = expandVars(parseLoaderEntryOptions(*t), env);
      out.cmdlines.push_back({path, text, parseCmdline(text)});
    }
  }
}

// dracut: add_drivers+=" vfio vfio_pci " / force_drivers+="..." in etc/dracut.conf{,.d/*.conf}.
void addDracut(const Host& host, BootConfig& out) {
  std::vector<std::string> files{"etc/dracut.conf"};
  if (auto names = host.list("etc/dracut.conf.d")) {
    for (const auto& n : *names) {
      if (endsWith(n, ".conf")) files.push_back(hostPath("etc/dracut.conf.d", n));
    }
  }
  for (const auto& f : files) {
    auto t = host.read(f);
    if (!t) continue;
    for (auto line : splitLines(*t)) {
      line = stripComment(line, "#");
      for (std::string_view key : {"add_drivers", "force_drivers"}) {
        if (!startsWith(line, key)) continue;
        auto eq = line.find('=');
        if (eq == std::string_view::npos) continue;
        std::string v = shellValue(trim(line.substr(eq + 1)), {});
        for (auto w : splitWords(v)) out.bootModules.push_back({f, normalizeModuleName(w)});
      }
    }
  }
}

}  // namespace

std::optional<std::string> cmdlineValue(const Cmdline& c, std::string_view key) {
  std::optional<std::string> v;
  const std::string k = normKey(key);
  for (const auto& p : c.params) {
    if (normKey(p.first) == k) v = p.second;
  }
  return v;
}

std::vector<std::string> cmdlineValues(const Cmdline& c, std::string_view key) {
  std::vector<std::string> out;
  const std::string k = normKey(key);
  for (const auto& p : c.params) {
    if (normKey(p.first) == k) out.push_back(p.second.value_or(""));
  }
  return out;
}

bool cmdlineHas(const Cmdline& c, std::string_view key) {
  const std::string k = normKey(key);
  return std::any_of(c.params.begin(), c.params.end(),
                     [&](const auto& p) { return normKey(p.first) == k; });
}

std::map<std::string, std::string> parseGrubDefaults(std::string_view text,
                                                     std::map<std::string, std::string> vars) {
  for (auto raw : splitLines(text)) {
    auto line = trim(raw);
    if (line.empty() || line[0] == '#') continue;
    if (startsWith(line, "export ")) line = trim(line.substr(7));
    auto eq = line.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    auto name = line.substr(0, eq);
    bool ident = std::all_of(name.begin(), name.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    });
    if (!ident) continue;
    vars[std::string(name)] = shellValue(line.substr(eq + 1), vars);
  }
  return vars;
}

std::vector<ModprobeDirective> parseModprobeConf(std::string_view file, std::string_view text) {
  std::vector<ModprobeDirective> out;
  std::string joined;
  for (auto raw : splitLines(text)) {
    // A trailing backslash continues the line (modprobe.d(5)).
    if (!raw.empty() && raw.back() == '\\') {
      joined += std::string(raw.substr(0, raw.size() - 1)) + " ";
      continue;
    }
    joined += std::string(raw);
    std::string line(stripComment(joined, "#"));
    joined.clear();
    auto words = splitWords(line);
    if (words.size() < 2) continue;
    ModprobeDirective d{
        std::string(file), std::string(words[0]), normalizeModuleName(words[1]), {}};
    for (size_t i = 2; i < words.size(); ++i) d.args.emplace_back(words[i]);
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<BootModule> parseModulesList(std::string_view file, std::string_view text) {
  std::vector<BootModule> out;
  for (auto raw : splitLines(text)) {
    auto line = trim(raw);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    auto words = splitWords(line);
    out.push_back({std::string(file), normalizeModuleName(words[0])});
  }
  return out;
}

std::string parseLoaderEntryOptions(std::string_view text) {
  std::string out;
  for (auto raw : splitLines(text)) {
    auto line = trim(raw);
    if (!startsWith(line, "options") || line.size() < 8 || (line[7] != ' ' && line[7] != '\t'))
      continue;
    auto v = trim(line.substr(8));
    if (v.empty()) continue;
    out += (out.empty() ? "" : " ") + std::string(v);
  }
  return out;
}

bool BootConfig::blacklisted(std::string_view module) const {
  const std::string m = normalizeModuleName(module);
  for (const auto& d : modprobe) {
    if (d.module != m) continue;
    if (d.verb == "blacklist") return true;
    // "install nouveau /bin/false" (or /bin/true) makes every load a no-op.
    if (d.verb == "install" && !d.args.empty() &&
        (endsWith(d.args[0], "/false") || endsWith(d.args[0], "/true"))) {
      return true;
    }
  }
  return false;
}

std::vector<std::string> BootConfig::optionValues(std::string_view module,
                                                  std::string_view key) const {
  std::vector<std::string> out;
  const std::string m = normalizeModuleName(module);
  const std::string k = normKey(key);
  for (const auto& d : modprobe) {
    if (d.verb != "options" || d.module != m) continue;
    for (const auto& a : d.args) {
      auto eq = a.find('=');
      if (eq != std::string::npos && normKey(std::string_view(a).substr(0, eq)) == k) {
        out.push_back(a.substr(eq + 1));
      }
    }
  }
  return out;
}

std::vector<std::string> BootConfig::softdepPre(std::string_view module) const {
  std::vector<std::string> out;
  const std::string m = normalizeModuleName(module);
  for (const auto& d : modprobe) {
    if (d.verb != "softdep" || d.module != m) continue;
    bool pre = false;
    for (const auto& a : d.args) {
      if (a == "pre:") {
        pre = true;
      } else if (a == "post:") {
        pre = false;
      } else if (pre) {
        out.push_back(normalizeModuleName(a));
      }
    }
  }
  return out;
}

bool BootConfig::loadsAtBoot(std::string_view module) const {
  const std::string m = normalizeModuleName(module);
  return std::any_of(bootModules.begin(), bootModules.end(),
                     [&](const BootModule& b) { return b.module == m; });
}

BootConfig readBootConfig(const Host& host) {
  BootConfig out;
  // 1. Kernel command lines: GRUB, kernel-install, BLS entries.
  addGrub(host, out);
  if (auto t = host.read("etc/kernel/cmdline")) {
    std::string text(trim(*t));
    out.cmdlines.push_back({"etc/kernel/cmdline", text, parseCmdline(text)});
  }
  addLoaderEntries(host, out);

  // 2. modprobe.d directives.
  for (const auto& f : confFiles(host, "modprobe.d")) {
    if (auto t = host.read(f)) {
      auto d = parseModprobeConf(f, *t);
      out.modprobe.insert(out.modprobe.end(), d.begin(), d.end());
    }
  }

  // 3. Modules loaded at boot: systemd, Debian's etc/modules, the initramfs lists.
  std::vector<std::string> lists = confFiles(host, "modules-load.d");
  lists.push_back("etc/modules");
  lists.push_back("etc/initramfs-tools/modules");
  for (const auto& f : lists) {
    if (auto t = host.read(f)) {
      auto m = parseModulesList(f, *t);
      out.bootModules.insert(out.bootModules.end(), m.begin(), m.end());
    }
  }
  addDracut(host, out);

  // 4. The hostprep boot unit, enabled in any target's wants/ (multi-user, sysinit, ...).
  for (auto base : {"etc/systemd/system", "usr/lib/systemd/system", "lib/systemd/system"}) {
    auto names = host.list(base);
    if (!names) continue;
    for (const auto& n : *names) {
      if (!endsWith(n, ".wants")) continue;
      const std::string link = hostPath(base, n, kPrepareUnit);
      if (host.exists(link) || host.readLink(link)) out.enabledUnits.push_back(link);
    }
  }
  return out;
}

}  // namespace hostprep

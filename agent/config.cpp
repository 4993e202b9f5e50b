#include "agent/config.hpp"

#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <set>

#include "drivers/parsers.hpp"
#include "drivers/text.hpp"

namespace hostprep {
namespace {

struct Reader {
  std::string source;

  Error bad(const std::string& key, const std::string& problem, const std::string& advice) const {
    return usageError(source + ": " + key + ": " + problem, advice);
  }

  // Every key of a mapping must be known.
  std::optional<Error> keys(const YAML::Node& n, const std::string& where,
                            const std::set<std::string>& known) const {
    for (const auto& kv : n) {
      const std::string k = kv.first.Scalar();
      if (!known.count(k)) {
        std::string list;
        for (const auto& x : known) list += (list.empty() ? "" : ", ") + x;
        return bad(where.empty() ? k : where + "." + k, "unknown key", "known keys: " + list);
      }
    }
    return std::nullopt;
  }

  Result<std::string> scalar(const YAML::Node& n, const std::string& key) const {
    if (!n.IsScalar()) return bad(key, "must be a single value", "write " + key + ": VALUE");
    return n.Scalar();
  }

  Result<bool> boolean(const YAML::Node& n, const std::string& key) const {
    auto s = scalar(n, key);
    if (!s) return s.error();
    if (*s == "true" || *s == "yes" || *s == "on") return true;
    if (*s == "false" || *s == "no" || *s == "off") return false;
    return bad(key, "'" + *s + "' is not true or false", "write " + key + ": true or false");
  }

  // A host path hostprep writes or reads: absolute, no "..", no control characters.
  Result<std::string> path(const YAML::Node& n, const std::string& key) const {
    auto s = scalar(n, key);
    if (!s) return s.error();
    bool ctl = false;
    for (char c : *s) ctl = ctl || static_cast<unsigned char>(c) < 0x20;
    bool dots = false;
    for (auto part : split(*s, '/')) dots = dots || part == "..";
    if (s->empty() || s->front() != '/' || dots || ctl || s->size() > 4096 || s->back() == '/') {
      return bad(key, "'" + *s + "' is not an absolute file path",
                 "write a path such as /run/hostprep/status.json, without '..'");
    }
    return *s;
  }

  Result<std::vector<std::string>> list(const YAML::Node& n, const std::string& key) const {
    std::vector<std::string> out;
    if (n.IsScalar()) {  // "10de:2236,10de:2331" is accepted, like the command line
      for (auto p : split(n.Scalar(), ',')) {
        if (!trim(p).empty()) out.emplace_back(trim(p));
      }
      return out;
    }
    if (!n.IsSequence()) return bad(key, "must be a list", "write " + key + ": [A, B]");
    for (size_t i = 0; i < n.size(); ++i) {
      auto s = scalar(n[i], key + "[" + std::to_string(i) + "]");
      if (!s) return s.error();
      out.push_back(*s);
    }
    return out;
  }
};

Result<AgentConfig> parseRoot(const YAML::Node& root, const Reader& r) {
  AgentConfig c;
  if (!root || root.IsNull()) return c;
  if (!root.IsMap())
    return r.bad("(top level)", "must be a mapping of keys", "see systemd/config.yaml");
  if (auto e = r.keys(root, "",
                      {"mode", "selection", "host-driver", "holder-nodes", "vgpu", "status",
                       "reconcile", "cc-mode"})) {
    return *e;
  }
  if (auto n = root["mode"]) {
    auto s = r.scalar(n, "mode");
    if (!s) return s.error();
    auto m = parseMode(*s);
    if (!m)
      return r.bad("mode", "'" + *s + "' is not a mode",
                   "choose one of " + std::string(kModeChoices));
    c.mode = *m;
  }
  if (auto sel = root["selection"]) {
    if (!sel.IsMap())
      return r.bad("selection", "must be a mapping", "write selection: {gpu-ids: [...]}");
    if (auto e = r.keys(sel, "selection", {"gpu-ids", "devices"})) return *e;
    if (auto n = sel["gpu-ids"]) {
      auto l = r.list(n, "selection.gpu-ids");
      if (!l) return l.error();
      for (size_t i = 0; i < l->size(); ++i) {
        auto id = parsePciId((*l)[i]);
        if (!id) {
          return r.bad("selection.gpu-ids[" + std::to_string(i) + "]",
                       "'" + (*l)[i] + "' is not a vendor:device id",
                       "write VVVV:DDDD in hex, e.g. 10de:2236");
        }
        c.selection.gpuIds.push_back(*id);
      }
    }
    if (auto n = sel["devices"]) {
      auto l = r.list(n, "selection.devices");
      if (!l) return l.error();
      for (size_t i = 0; i < l->size(); ++i) {
        auto b = parseBdf((*l)[i]);
        if (!b) {
          return r.bad("selection.devices[" + std::to_string(i) + "]",
                       "'" + (*l)[i] + "' is not a PCI address",
                       "write DDDD:BB:DD.F, e.g. 0000:3b:00.0");
        }
        c.selection.devices.push_back(*b);
      }
    }
  }
  if (auto n = root["host-driver"]) {
    auto s = r.scalar(n, "host-driver");
    if (!s) return s.error();
    if (!isValidModuleName(*s)) {
      return r.bad("host-driver", "'" + *s + "' is not a driver name",
                   "use letters, digits, '_' and '-' only, at most 64 characters");
    }
    c.selection.hostDriver = *s;
  }
  if (auto n = root["holder-nodes"]) {
    auto s = r.scalar(n, "holder-nodes");
    if (!s) return s.error();
    if (!startsWith(*s, "/dev/") || s->find("..") != std::string::npos) {
      return r.bad("holder-nodes", "'" + *s + "' is not a /dev pattern",
                   "write a glob under /dev, e.g. /dev/nvidia*");
    }
    c.holderNodes = *s;
  }
  if (auto v = root["vgpu"]) {
    if (!v.IsMap())
      return r.bad("vgpu", "must be a mapping", "write vgpu: {config-file: ..., config-name: ...}");
    if (auto e = r.keys(v, "vgpu", {"config-file", "config-name"})) return *e;
    if (auto n = v["config-file"]) {
      auto p = r.path(n, "vgpu.config-file");
      if (!p) return p.error();
      c.vgpuConfigFile = *p;
    }
    if (auto n = v["config-name"]) {
      auto s = r.scalar(n, "vgpu.config-name");
      if (!s) return s.error();
      bool ok = !s->empty() && s->size() <= 63;
      for (char ch : *s)
        ok = ok &&
             (std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.');
      if (!ok)
        return r.bad("vgpu.config-name", "'" + *s + "' is not a config name",
                     "use letters, digits, '-', '_' and '.'");
      c.vgpuConfigName = *s;
    }
  }
  if (auto st = root["status"]) {
    if (!st.IsMap())
      return r.bad("status", "must be a mapping",
                   "write status: {path: /run/hostprep/status.json}");
    if (auto e = r.keys(st, "status", {"path", "nfd-features", "prometheus"})) return *e;
    for (auto [key, field] :
         {std::pair{"path", &c.statusPath}, std::pair{"nfd-features", &c.nfdFeaturesPath},
          std::pair{"prometheus", &c.prometheusPath}}) {
      if (auto n = st[key]) {
        auto p = r.path(n, std::string("status.") + key);
        if (!p) return p.error();
        *field = *p;
      }
    }
  }
  if (auto n = root["cc-mode"]) {
    auto s = r.scalar(n, "cc-mode");
    if (!s) return s.error();
    auto m = parseCcMode(*s);
    if (!m) {
      return r.bad("cc-mode", "'" + *s + "' is not a CC mode",
                   "choose one of " + std::string(kCcModeChoices));
    }
    c.ccMode = *m;
  }
  if (auto n = root["reconcile"]) {
    auto b = r.boolean(n, "reconcile");
    if (!b) return b.error();
    c.reconcile = *b;
  }
  return c;
}

}  // namespace

std::string AgentConfig::holderGlob() const {
  return holderNodes.empty() ? "/dev/" + selection.hostDriver + "*" : holderNodes;
}

Result<AgentConfig> parseConfig(std::string_view text, std::string_view source) {
  Reader r{std::string(source)};
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return usageError(r.source + ": line " + std::to_string(e.mark.line + 1) + ": " + e.msg,
                      "fix the YAML syntax");
  }
  try {
    return parseRoot(root, r);
  } catch (const YAML::Exception& e) {
    return usageError(r.source + ": " + e.what(), "see systemd/config.yaml for the format");
  }
}

std::optional<std::string> configPermissionProblem(uid_t owner, mode_t mode, bool runningAsRoot) {
  if (!runningAsRoot) return std::nullopt;
  if (owner != 0) return "owned by uid " + std::to_string(owner) + ", not root";
  if ((mode & (S_IWGRP | S_IWOTH)) != 0) return "writable by group or others";
  return std::nullopt;
}

Result<AgentConfig> loadConfig(const Host& host, std::string_view path, bool required) {
  const std::string source = startsWith(path, "/") ? std::string(path) : "/" + std::string(path);
  auto text = host.read(path, 1u << 20);
  if (!text) {
    if (text.error().err == ENOENT && !required) return AgentConfig{};
    return usageError(
        source + ": cannot read the config: " + std::string(std::strerror(text.error().err)),
        "pass --config with a readable file");
  }
  struct stat st {};
  if (::stat(host.resolve(path).c_str(), &st) == 0) {
    if (auto p = configPermissionProblem(st.st_uid, st.st_mode, ::geteuid() == 0)) {
      return usageError(source + ": refusing a config " + *p,
                        "chown root:root " + source + " && chmod 0644 " + source);
    }
  }
  return parseConfig(*text, source);
}

std::optional<Mode> configuredMode(const Host& host, std::string_view path) {
  auto c = loadConfig(host, path, false);
  return c ? c->mode : std::nullopt;
}

CcMode configuredCcMode(const Host& host, std::string_view path) {
  auto c = loadConfig(host, path, false);
  return c ? c->ccMode : CcMode::kOff;
}

}  // namespace hostprep

#include "agent/config.hpp"

#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <set>

#include "agent/local_file.hpp"
#include "drivers/common/text.hpp"
#include "drivers/common/validate.hpp"
#include "drivers/seam/state_file.hpp"

namespace hostprep {
namespace {

// A value's parser: an agent/option_values validator, given where the value was read.
template <class T>
using Parse = Result<T> (*)(std::string_view where, std::string_view text);

struct Reader {
  std::string source;

  // "config.yaml: selection.gpu-ids[1]": where a value was read.
  std::string where(const std::string& key) const { return source + ": " + key; }

  Error bad(const std::string& key, const std::string& problem, const std::string& advice) const {
    return usageError(where(key) + ": " + problem, advice);
  }

  // `n` must be a mapping of known keys (`key` names it; empty for the top level).
  std::optional<Error> mapping(const YAML::Node& n, const std::string& key,
                               const std::set<std::string>& known,
                               const std::string& advice) const {
    if (!n.IsMap()) return bad(key.empty() ? "(top level)" : key, "must be a mapping", advice);
    for (const auto& kv : n) {
      const std::string k = kv.first.Scalar();
      if (!known.count(k)) {
        std::string list;
        for (const auto& x : known) list += (list.empty() ? "" : ", ") + x;
        return bad(key.empty() ? k : key + "." + k, "unknown key", "known keys: " + list);
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

  // The value of `path` (its last part a key of `map`), when there, checked by `parse` into
  // `field`.
  template <class Field, class T>
  std::optional<Error> value(const YAML::Node& map, const std::string& path, Field& field,
                             Parse<T> parse) const {
    const auto n = map[path.substr(path.rfind('.') + 1)];
    if (!n) return std::nullopt;
    auto s = scalar(n, path);
    if (!s) return s.error();
    auto v = parse(where(path), *s);
    if (!v) return v.error();
    field = std::move(*v);
    return std::nullopt;
  }

  // A list the same way, each element checked ("selection.gpu-ids[1]"); "10de:2236,10de:2331"
  // is accepted, like the command line.
  template <class T>
  std::optional<Error> list(const YAML::Node& map, const std::string& path, std::vector<T>& field,
                            Parse<T> parse) const {
    const auto n = map[path.substr(path.rfind('.') + 1)];
    if (!n) return std::nullopt;
    std::vector<std::string> texts;
    if (n.IsScalar()) {
      for (auto p : split(n.Scalar(), ',')) {
        if (!trim(p).empty()) texts.emplace_back(trim(p));
      }
    } else if (n.IsSequence()) {
      for (size_t i = 0; i < n.size(); ++i) {
        auto s = scalar(n[i], path + "[" + std::to_string(i) + "]");
        if (!s) return s.error();
        texts.push_back(*s);
      }
    } else {
      return bad(path, "must be a list", "write " + path + ": [A, B]");
    }
    field.clear();
    for (size_t i = 0; i < texts.size(); ++i) {
      auto v = parse(where(path + "[" + std::to_string(i) + "]"), texts[i]);
      if (!v) return v.error();
      field.push_back(*v);
    }
    return std::nullopt;
  }
};

// A whole number >= 0 (a GPU index, a NUMA node).
Result<int> parseCount(std::string_view where, std::string_view text) {
  auto n = parseUnsigned(text);
  if (!n || *n > 1'000'000) {
    return usageError(std::string(where) + ": '" + quoteUntrusted(std::string(text)) +
                          "' is not a whole number >= 0",
                      "write a number such as 0 or 1");
  }
  return static_cast<int>(*n);
}

// devices: [{match: {bdf|model|index|numa: ...}, mode: M}, ...]
Result<std::vector<DeviceRule>> parseRules(const YAML::Node& n, const Reader& r) {
  const std::string kShape =
      "write devices: [{match: {bdf: \"0000:41:00.0\"}, mode: vm-passthrough}]";
  if (!n.IsSequence()) return r.bad("devices", "must be a list of rules", kShape);
  std::vector<DeviceRule> out;
  for (size_t i = 0; i < n.size(); ++i) {
    const std::string key = "devices[" + std::to_string(i) + "]";
    const YAML::Node& rule = n[i];
    if (auto e = r.mapping(rule, key, {"match", "mode"}, kShape)) return *e;
    if (!rule["match"]) return r.bad(key + ".match", "is missing", kShape);
    if (!rule["mode"]) {
      return r.bad(key + ".mode", "is missing", "write mode: one of " + std::string(kModeChoices));
    }
    const YAML::Node match = rule["match"];
    const std::string mk = key + ".match";
    if (auto e = r.mapping(match, mk, {"bdf", "model", "index", "numa"},
                           "write match: {bdf: \"0000:41:00.0\"}")) {
      return *e;
    }
    if (match.size() == 0) {
      return r.bad(mk, "matches every GPU: name bdf, model, index or numa",
                   "to set every GPU's mode, write the top-level mode:");
    }
    DeviceRule dr;
    if (auto e = r.value(rule, key + ".mode", dr.mode, parseModeValue)) return *e;
    if (auto e = r.value(match, mk + ".bdf", dr.match.bdf, parseBdfValue)) return *e;
    if (auto e = r.value(match, mk + ".model", dr.match.model, parsePciIdValue)) return *e;
    if (auto e = r.value(match, mk + ".index", dr.match.index, parseCount)) return *e;
    if (auto e = r.value(match, mk + ".numa", dr.match.numa, parseCount)) return *e;
    out.push_back(dr);
  }
  return out;
}

Result<AgentConfig> parseRoot(const YAML::Node& root, const Reader& r, AgentConfig c) {
  if (!root || root.IsNull()) return c;
  if (!root.IsMap())
    return r.bad("(top level)", "must be a mapping of keys", "see systemd/config.yaml");
  if (auto e =
          r.mapping(root, "",
                    {"mode", "devices", "selection", "host-driver", "host-driver-provider",
                     "holder-nodes", "vgpu", "status", "reconcile", "cc-mode", "reset-on-return"},
                    "")) {
    return *e;
  }
  if (auto e = r.value(root, "mode", c.mode, parseModeValue)) return *e;
  if (auto d = root["devices"]) {
    auto rules = parseRules(d, r);
    if (!rules) return rules.error();
    c.rules = std::move(*rules);
  }
  if (auto sel = root["selection"]) {
    if (auto e = r.mapping(sel, "selection", {"gpu-ids", "devices"},
                           "write selection: {gpu-ids: [...]}")) {
      return *e;
    }
    if (auto e = r.list(sel, "selection.gpu-ids", c.selection.gpuIds, parsePciIdValue)) return *e;
    if (auto e = r.list(sel, "selection.devices", c.selection.devices, parseBdfValue)) return *e;
  }
  if (auto e = r.value(root, "host-driver", c.selection.hostDriver, parseDriverValue)) return *e;
  if (auto e = r.value(root, "host-driver-provider", c.selection.hostDriverProvider,
                       parseDriverProviderValue)) {
    return *e;
  }
  if (auto e = r.value(root, "holder-nodes", c.holderNodes, parseHolderNodes)) return *e;
  if (auto v = root["vgpu"]) {
    if (auto e = r.mapping(v, "vgpu", {"config-file", "config-name"},
                           "write vgpu: {config-file: ..., config-name: ...}")) {
      return *e;
    }
    if (auto e = r.value(v, "vgpu.config-file", c.vgpuConfigFile, parseHostFilePath)) return *e;
    if (auto e = r.value(v, "vgpu.config-name", c.vgpuConfigName, parseVgpuConfigName)) return *e;
  }
  if (auto st = root["status"]) {
    if (auto e = r.mapping(st, "status", {"path", "nfd-features", "prometheus"},
                           "write status: {path: /run/hostprep/status.json}")) {
      return *e;
    }
    if (auto e = r.value(st, "status.path", c.statusPath, parseHostFilePath)) return *e;
    if (auto e = r.value(st, "status.nfd-features", c.nfdFeaturesPath, parseHostFilePath))
      return *e;
    if (auto e = r.value(st, "status.prometheus", c.prometheusPath, parseHostFilePath)) return *e;
  }
  if (auto e = r.value(root, "cc-mode", c.ccMode, parseCcModeValue)) return *e;
  if (auto n = root["reconcile"]) {
    auto b = r.boolean(n, "reconcile");
    if (!b) return b.error();
    c.reconcile = *b;
  }
  if (auto n = root["reset-on-return"]) {
    auto b = r.boolean(n, "reset-on-return");
    if (!b) return b.error();
    c.resetOnReturn = *b;
  }
  return c;
}

}  // namespace

Result<AgentConfig> parseConfig(std::string_view text, std::string_view source,
                                const AgentConfig& defaults) {
  Reader r{std::string(source)};
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return usageError(r.source + ": line " + std::to_string(e.mark.line + 1) + ": " + e.msg,
                      "fix the YAML syntax");
  }
  try {
    return parseRoot(root, r, defaults);
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

Result<AgentConfig> loadConfig(const Host& host, std::string_view path, bool required,
                               const AgentConfig& defaults) {
  const std::string source = startsWith(path, "/") ? std::string(path) : "/" + std::string(path);
  auto text = host.read(path, 1u << 20);
  if (!text) {
    if (text.error().err == ENOENT && !required) return defaults;
    return usageError(source + ": cannot read the config" + underRoot(host, path) + ": " +
                          std::string(std::strerror(text.error().err)),
                      "pass --config with a readable file");
  }
  if (auto st = host.ownership(path)) {
    if (auto p = configPermissionProblem(st->owner, st->mode, ::geteuid() == 0)) {
      return usageError(source + ": refusing a config " + *p,
                        "chown root:root " + source + " && chmod 0644 " + source);
    }
  }
  auto config = parseConfig(*text, source, defaults);
  if (config) {
    if (auto st = checkFileTarget(host, config->statusPath, source + ": status.path"); !st)
      return st.error();
  }
  return config;
}

std::optional<Mode> configuredMode(const Host& host, std::string_view path) {
  auto c = loadConfig(host, path, false);
  return c ? c->mode : std::nullopt;
}

std::string formatSelection(const SelectionOptions& s) {
  auto quoted = [](const auto& values, auto str) {
    std::vector<std::string> out;
    for (const auto& v : values) out.push_back("\"" + str(v) + "\"");
    return "[" + join(out, ", ") + "]";
  };
  return "selection:\n  gpu-ids: " + quoted(s.gpuIds, [](PciId id) { return toString(id); }) +
         "\n  devices: " + quoted(s.devices, [](const Bdf& b) { return b.str(); }) +
         "\nhost-driver: \"" + s.hostDriver +
         "\"\nhost-driver-provider: " + std::string(toString(s.hostDriverProvider)) + "\n";
}

Result<std::optional<SelectionOptions>> readLastSelection(const Host& host) {
  auto text = host.read(kLastSelectionPath, 1u << 20);
  if (!text) return std::optional<SelectionOptions>();
  auto c = parseConfig(*text, "/" + std::string(kLastSelectionPath));
  if (!c) return c.error();
  return std::optional<SelectionOptions>(c->selection);
}

Status writeLastSelection(Host& host, const SelectionOptions& s) {
  return writeStateFile(host, kLastSelectionPath, formatSelection(s));
}

CcMode configuredCcMode(const Host& host, std::string_view path) {
  auto c = loadConfig(host, path, false);
  return c ? c->ccMode : CcMode::kOff;
}

}  // namespace hostprep

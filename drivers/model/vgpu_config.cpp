#include "drivers/model/vgpu_config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>

#include "drivers/common/text.hpp"

namespace hostprep {
namespace {

struct Where {
  std::string_view source;
  std::string at(const YAML::Node& n, const std::string& key) const {
    std::string s(source);
    if (n.IsDefined() && n.Mark().line >= 0) s += ":" + std::to_string(n.Mark().line + 1);
    return s + ": " + key;
  }
};

Error configError(std::string message, std::string advice = {}) {
  return usageError(std::move(message),
                    advice.empty() ? "see the vgpu-device-manager config format in the README"
                                   : std::move(advice));
}

std::optional<PciId> parseFilterId(std::string_view s) {
  s = trim(s);
  if (!(startsWith(s, "0x") || startsWith(s, "0X")) || s.size() != 10) return std::nullopt;
  auto v = parseUnsigned(s, 16);
  if (!v) return std::nullopt;
  return PciId{static_cast<uint16_t>(*v & 0xffff), static_cast<uint16_t>(*v >> 16)};
}

std::string scalarOf(const YAML::Node& n) { return n.IsScalar() ? n.Scalar() : std::string(); }

}  // namespace

std::optional<VgpuDeviceFilter> parseVgpuDeviceFilter(std::string_view s) {
  auto parts = split(trim(s), ':');
  if (parts.empty() || parts.size() > 2) return std::nullopt;
  auto dev = parseFilterId(parts[0]);
  if (!dev) return std::nullopt;
  VgpuDeviceFilter f{*dev, std::nullopt};
  if (parts.size() == 2) {
    f.subsystem = parseFilterId(parts[1]);
    if (!f.subsystem) return std::nullopt;
  }
  return f;
}

bool isValidVgpuTypeName(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.';
  });
}

bool VgpuConfigEntry::matches(PciId id, PciId subsystem, int index) const {
  if (devices && std::find(devices->begin(), devices->end(), index) == devices->end()) return false;
  if (filters.empty()) return true;
  return std::any_of(filters.begin(), filters.end(), [&](const VgpuDeviceFilter& f) {
    return f.device == id && (!f.subsystem || *f.subsystem == subsystem);
  });
}

const std::vector<VgpuConfigEntry>* VgpuConfigFile::find(std::string_view name) const {
  for (const auto& [n, entries] : configs) {
    if (n == name) return &entries;
  }
  return nullptr;
}

std::vector<std::string> VgpuConfigFile::names() const {
  std::vector<std::string> out;
  for (const auto& c : configs) out.push_back(c.first);
  return out;
}

Result<VgpuConfigFile> parseVgpuConfig(std::string_view text, std::string_view source) {
  Where w{source};
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return configError(std::string(source) + ":" + std::to_string(e.mark.line + 1) +
                       ": not YAML: " + e.msg);
  }
  if (!root.IsMap())
    return configError(std::string(source) + ": not a map with version and vgpu-configs");
  for (const auto& kv : root) {
    const std::string key = scalarOf(kv.first);
    if (key != "version" && key != "vgpu-configs") {
      return configError(w.at(kv.first, key) + ": unknown key",
                         "the top level holds version and vgpu-configs");
    }
  }
  const YAML::Node version = root["version"];
  if (!version)
    return configError(std::string(source) + ": version: missing", "write 'version: v1'");
  if (scalarOf(version) != "v1") {
    return configError(w.at(version, "version") + ": '" + scalarOf(version) + "' is not supported",
                       "write 'version: v1'");
  }
  const YAML::Node configs = root["vgpu-configs"];
  if (!configs) return configError(std::string(source) + ": vgpu-configs: missing");
  if (!configs.IsMap())
    return configError(w.at(configs, "vgpu-configs") + ": not a map of named configs");

  VgpuConfigFile out;
  for (const auto& kv : configs) {
    const std::string name = scalarOf(kv.first);
    const std::string where = "vgpu-configs." + name;
    if (name.empty())
      return configError(w.at(kv.first, "vgpu-configs") + ": a config name is empty");
    if (!kv.second.IsSequence()) {
      return configError(w.at(kv.second, where) + ": not a list of entries");
    }
    std::vector<VgpuConfigEntry> entries;
    int idx = 0;
    for (const auto& e : kv.second) {
      const std::string ew = where + "[" + std::to_string(idx++) + "]";
      if (!e.IsMap()) return configError(w.at(e, ew) + ": not a map");
      VgpuConfigEntry entry;
      entry.line = e.Mark().line + 1;
      for (const auto& ekv : e) {
        const std::string key = scalarOf(ekv.first);
        if (key != "device-filter" && key != "devices" && key != "vgpu-devices") {
          return configError(w.at(ekv.first, ew + "." + key) + ": unknown key",
                             "an entry holds device-filter, devices and vgpu-devices");
        }
      }
      if (const YAML::Node f = e["device-filter"]) {
        std::vector<YAML::Node> items;
        if (f.IsSequence()) {
          for (const auto& i : f) items.push_back(i);
        } else {
          items.push_back(f);
        }
        for (const auto& i : items) {
          auto pf = parseVgpuDeviceFilter(scalarOf(i));
          if (!pf) {
            return configError(
                w.at(i, ew + ".device-filter") + ": '" + scalarOf(i) + "' is not a device id",
                "write 0xDDDDVVVV (device, then vendor), e.g. 0x223610DE, "
                "optionally :0xSSSSVVVV for the subsystem");
          }
          entry.filters.push_back(*pf);
        }
      }
      const YAML::Node d = e["devices"];
      if (!d)
        return configError(w.at(e, ew + ".devices") + ": missing",
                           "write 'devices: all' or a list of indexes");
      if (d.IsScalar() && d.Scalar() == "all") {
        entry.devices = std::nullopt;
      } else if (d.IsSequence()) {
        entry.devices = std::vector<int>{};
        for (const auto& i : d) {
          auto v = parseUnsigned(scalarOf(i));
          if (!v || *v > 1023) {
            return configError(
                w.at(i, ew + ".devices") + ": '" + scalarOf(i) + "' is not a GPU index",
                "write 'all' or a list of indexes from 0");
          }
          entry.devices->push_back(static_cast<int>(*v));
        }
      } else {
        return configError(
            w.at(d, ew + ".devices") + ": '" + scalarOf(d) + "' is neither 'all' nor a list",
            "write 'devices: all' or 'devices: [0, 1]'");
      }
      const YAML::Node v = e["vgpu-devices"];
      if (!v)
        return configError(w.at(e, ew + ".vgpu-devices") + ": missing",
                           "write e.g. 'vgpu-devices: {A10-12Q: 2}'");
      if (!v.IsMap())
        return configError(w.at(v, ew + ".vgpu-devices") + ": not a map of type: count");
      for (const auto& t : v) {
        const std::string type = scalarOf(t.first);
        const std::string tw = ew + ".vgpu-devices." + type;
        if (!isValidVgpuTypeName(type)) {
          return configError(
              w.at(t.first, ew + ".vgpu-devices") + ": '" + type + "' is not a vGPU type name",
              "write the type as NVIDIA names it, e.g. A10-12Q (letters, digits, '-', '_', '.')");
        }
        auto n = parseUnsigned(scalarOf(t.second));
        if (!n || *n > 1024) {
          return configError(w.at(t.second, tw) + ": '" + scalarOf(t.second) + "' is not a count",
                             "write a whole number of devices per GPU");
        }
        for (const auto& [prev, c] : entry.vgpuDevices) {
          if (prev == type) return configError(w.at(t.first, tw) + ": listed twice");
        }
        entry.vgpuDevices.emplace_back(type, static_cast<int>(*n));
      }
      entries.push_back(std::move(entry));
    }
    if (out.find(name)) return configError(w.at(kv.first, where) + ": defined twice");
    out.configs.emplace_back(name, std::move(entries));
  }
  return out;
}

}  // namespace hostprep

#include "checks/vgpu_configs.hpp"

#include "drivers/text.hpp"

namespace hostprep {
namespace {

using nlohmann::json;

// "'<json>'" (built by appending: GCC 12 warns falsely on "literal" + std::string&&).
std::string quoted(const json& v) {
  std::string s(1, '\'');
  s += v.dump();
  s += '\'';
  return s;
}

Error bad(const Document& doc, const std::string& where, const std::string& problem) {
  return usageError(doc.source + ": " + where + ": " + problem,
                    "write the vgpu-device-manager format: version: v1, vgpu-configs: {NAME: "
                    "[{devices: all, vgpu-devices: {TYPE: N}}]}");
}

// "0x223610DE" (device << 16 | vendor, as vgpu-device-manager writes it) or "10de:2236".
std::optional<PciId> parseFilter(std::string_view s) {
  s = trim(s);
  if (s.find(':') != std::string_view::npos) return parsePciId(s);
  auto v = parseUnsigned(s, 16);
  if (!v || *v > 0xffffffffu) return std::nullopt;
  return PciId{static_cast<uint16_t>(*v & 0xffff), static_cast<uint16_t>(*v >> 16)};
}

Result<ClusterVgpuEntry> readEntry(const Document& doc, const std::string& where, const json& e) {
  if (!e.is_object()) return bad(doc, where, "not a mapping");
  ClusterVgpuEntry out;
  if (const json* f = at(e, {"device-filter"})) {
    std::vector<json> items = f->is_array() ? f->get<std::vector<json>>() : std::vector<json>{*f};
    for (const auto& item : items) {
      auto text = scalarText(item);
      std::optional<PciId> id;
      if (text) id = parseFilter(*text);
      if (!id) return bad(doc, where + ".device-filter", quoted(item) + " is not a PCI device id");
      out.deviceFilter.push_back(*id);
    }
  }
  const json* devices = at(e, {"devices"});
  if (!devices || (devices->is_string() && devices->get<std::string>() == "all")) {
    out.allDevices = true;
  } else if (devices->is_array()) {
    out.allDevices = false;
    for (const auto& d : *devices) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0 || d.get<int64_t>() > 1024) {
        return bad(doc, where + ".devices", quoted(d) + " is not a GPU index");
      }
      out.devices.push_back(static_cast<int>(d.get<int64_t>()));
    }
  } else {
    return bad(doc, where + ".devices", "must be 'all' or a list of GPU indices");
  }
  const json* types = at(e, {"vgpu-devices"});
  if (!types || !types->is_object()) return bad(doc, where + ".vgpu-devices", "missing or not a mapping");
  for (const auto& [type, n] : types->items()) {
    auto text = scalarText(n);
    auto count = text ? parseUnsigned(*text) : std::nullopt;
    if (!count || *count > 1024) {
      return bad(doc, where + ".vgpu-devices." + type, quoted(n) + " is not a count");
    }
    out.vgpuDevices.emplace_back(type, static_cast<int>(*count));
  }
  return out;
}

}  // namespace

Result<VgpuConfigs> readVgpuConfigs(const Document& doc) {
  // The operator ships the config inside a ConfigMap: parse its embedded YAML.
  if (kindOf(doc.body) == "ConfigMap") {
    const json* data = at(doc.body, {"data"});
    if (!data || !data->is_object() || data->empty()) return bad(doc, "data", "the ConfigMap has no data");
    const json* text = at(*data, {"config.yaml"});
    if (!text) text = &data->begin().value();
    if (!text->is_string()) return bad(doc, "data", "the config is not a string");
    auto inner = parseDocuments(text->get<std::string>(), doc.source + " (data)");
    if (!inner) return inner.error();
    if (inner->size() != 1) return bad(doc, "data", "expected one YAML document");
    return readVgpuConfigs(inner->front());
  }
  const json* version = at(doc.body, {"version"});
  if (version && scalarText(*version) != std::optional<std::string>("v1")) {
    return bad(doc, "version", quoted(*version) + " is not v1");
  }
  const json* configs = at(doc.body, {"vgpu-configs"});
  if (!configs || !configs->is_object()) return bad(doc, "vgpu-configs", "missing or not a mapping");
  VgpuConfigs out;
  for (const auto& [name, entries] : configs->items()) {
    if (!entries.is_array()) return bad(doc, "vgpu-configs." + name, "not a list");
    auto& list = out.configs[name];
    for (size_t i = 0; i < entries.size(); ++i) {
      auto e = readEntry(doc, "vgpu-configs." + name + "[" + std::to_string(i) + "]", entries[i]);
      if (!e) return e.error();
      list.push_back(std::move(*e));
    }
  }
  return out;
}

}  // namespace hostprep

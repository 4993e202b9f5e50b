#include "checks/vgpu_configs.hpp"

#include "checks/documents.hpp"

namespace hostprep {

Result<VgpuConfigFile> readVgpuConfigs(std::string_view text, std::string_view name) {
  auto docs = parseDocuments(text, name);
  if (!docs) return docs.error();
  if (docs->size() != 1) {
    return usageError(
        std::string(name) + " holds " + std::to_string(docs->size()) + " documents, expected one",
        "pass the vgpu-device-manager config or its ConfigMap");
  }
  const Document& doc = docs->front();
  if (kindOf(doc.body) != "ConfigMap") return parseVgpuConfig(text, name);
  // The operator ships the config inside a ConfigMap: parse its embedded YAML.
  const auto bad = [&](const std::string& problem) {
    return usageError(std::string(name) + ": data: " + problem,
                      "the ConfigMap holds the config as a string under data.\"config.yaml\"");
  };
  const nlohmann::json* data = at(doc.body, {"data"});
  if (!data || !data->is_object() || data->empty()) return bad("the ConfigMap has no data");
  const nlohmann::json* inner = at(*data, {"config.yaml"});
  if (!inner) inner = &data->begin().value();
  if (!inner->is_string()) return bad("the config is not a string");
  return parseVgpuConfig(inner->get<std::string>(), std::string(name) + " (ConfigMap data)");
}

}  // namespace hostprep

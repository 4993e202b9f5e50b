// Cluster documents (kubectl output, manifests, status documents) as JSON values. JSON and YAML
// are both accepted; YAML is converted to nlohmann::json once so every check has one code path.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "drivers/error.hpp"

namespace hostprep {

struct Document {
  std::string
      source;  // where it came from: "nodes.json", "vms.yaml (document 2)", "nodes.json (item 3)"
  nlohmann::json body;
};

// Parses one input: JSON when it starts with '{' or '[', otherwise YAML (several documents
// separated by '---' give several Documents; empty ones are skipped). Malformed text is a usage
// error (exit 2) that names `name` and the position: "nodes.json: malformed JSON at line 3,
// column 7 (byte 41): ...".
Result<std::vector<Document>> parseDocuments(std::string_view text, std::string_view name);

// The items of a Kubernetes List ("kind: List", "NodeList", any object with an "items" array),
// each named "<source> (item N)"; any other document is returned as it is.
std::vector<Document> expandLists(const std::vector<Document>& docs);

// A scalar as text: strings as they are, numbers and booleans printed (YAML turns an unquoted
// `2` into a number where kubectl's JSON has "2"). nullopt for null, objects and arrays.
std::optional<std::string> scalarText(const nlohmann::json& v);

// A member of an object by a path of keys; nullptr when any step is missing or not an object.
const nlohmann::json* at(const nlohmann::json& v, std::initializer_list<std::string_view> path);

// The "kind" of a document, empty when absent.
std::string kindOf(const nlohmann::json& v);

}  // namespace hostprep

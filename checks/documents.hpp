// Cluster documents (kubectl output, manifests, status documents) as JSON values. JSON and YAML
// are both accepted; YAML is converted to nlohmann::json once so every check has one code path.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "drivers/common/error.hpp"

namespace hostprep {

class NodeItems;

struct Document {
  std::string
      source;  // where it came from: "nodes.json", "vms.yaml (document 2)", "nodes.json (item 3)"
  nlohmann::json body;
  // Set for a JSON List of Nodes read by parseNodeDocuments: its items stay text and are read one
  // at a time (NodeItems::forEach); body then holds the List's "kind" alone.
  std::shared_ptr<const NodeItems> items = nullptr;
};

// Parses one input: JSON when it starts with '{' or '[', otherwise YAML (several documents
// separated by '---' give several Documents; empty ones are skipped). Malformed text is a usage
// error (exit 2) that names `name` and the position: "nodes.json: malformed JSON at line 3,
// column 7 (byte 41): ...".
Result<std::vector<Document>> parseDocuments(std::string_view text, std::string_view name);

// The deepest nesting of arrays and objects parseDocuments reads (the top one is level 1); deeper
// is a usage error. Nothing in Kubernetes comes near it, and nlohmann-json copies, compares and
// prints a value recursively, so a file of "[[[[..." read whole would overflow the stack later
// (100,000 levels, 200 KB, crashed check-node).
inline constexpr size_t kMaxDocumentNesting = 512;

// The bytes simdjson may read past the end of a text: a text whose capacity leaves them is parsed
// where it lies, any other is copied once.
inline constexpr size_t kJsonPadding = 64;

// check-node's node input. A JSON object is read with simdjson (On-Demand) instead of into a tree:
// the whole text is validated first, as strictly as parseDocuments (any text it rejects, or any
// this reader cannot take, goes to parseDocuments, so a malformed file gets the same error), then
// only what the checks read of a Node is kept: kind, metadata.name, metadata.labels,
// spec.unschedulable and the nvidia.com/ members of status.capacity and status.allocatable. The
// items of a List are not read until NodeItems::forEach, one at a time, so a 68 MB NodeList never
// becomes a tree. YAML and JSON arrays go to parseDocuments.
Result<std::vector<Document>> parseNodeDocuments(std::string text, std::string_view name);

// The items of a JSON List of Nodes, validated and held as text (see parseNodeDocuments).
class NodeItems {
 public:
  // The first item that is not a named Node, as parsing found it.
  struct Bad {
    size_t index = 0;    // 0-based
    bool object = true;  // false: not a JSON object
    std::string kind;    // its "kind" when a string, else empty
  };

  ~NodeItems();
  NodeItems(const NodeItems&) = delete;
  NodeItems& operator=(const NodeItems&) = delete;

  size_t size() const { return count_; }
  const std::optional<Bad>& firstBad() const { return bad_; }
  // Calls fn(index, node) for each item in order, node holding what parseNodeDocuments keeps.
  Status forEach(const std::function<void(size_t, const nlohmann::json&)>& fn) const;

  struct State;  // the padded text and simdjson's parser (documents.cpp)
  explicit NodeItems(std::unique_ptr<State> s, size_t count, std::optional<Bad> bad);

 private:
  std::unique_ptr<State> state_;
  size_t count_ = 0;
  std::optional<Bad> bad_;
};

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

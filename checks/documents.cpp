#include "checks/documents.hpp"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>

#include "drivers/common/text.hpp"

namespace hostprep {
namespace {

using nlohmann::json;

// A bound on the converted size, so aliases cannot expand a small file into a huge tree
// ("billion laughs"). Without aliases every value takes at least one byte of the text, so a
// budget of values per byte of input (and a floor for short files) never stops a real dump,
// whatever its size, and stops a bomb of a few hundred bytes after ~70,000 values instead of
// after the fixed 50 million of before (22 s and 3.6 GB to reach them, MinSizeRel).
constexpr size_t kYamlValuesPerByte = 16;
constexpr size_t kYamlValuesFloor = 65'536;
constexpr size_t kMaxYamlNodes = 50'000'000;

Error tooDeep(std::string_view name) {
  return usageError(std::string(name) + ": values nested deeper than " +
                        std::to_string(kMaxDocumentNesting) + " levels",
                    "pass the output of 'kubectl get ... -o json' or '-o yaml' unchanged");
}

size_t yamlBudget(size_t bytes) {
  return std::min(kMaxYamlNodes, kYamlValuesFloor + kYamlValuesPerByte * bytes);
}

struct LineCol {
  size_t line = 1;
  size_t column = 1;
};

LineCol position(std::string_view text, size_t byte) {
  LineCol p;
  for (size_t i = 0; i + 1 < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++p.line;
      p.column = 1;
    } else {
      ++p.column;
    }
  }
  return p;
}

bool isYamlNull(std::string_view s) {
  return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL";
}

std::optional<bool> yamlBool(std::string_view s) {
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  return std::nullopt;
}

bool isDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// The YAML 1.2 core schema for a plain (unquoted) scalar: null, bool, int, float, else string.
json plainScalar(const std::string& s) {
  if (isYamlNull(s)) return nullptr;
  if (auto b = yamlBool(s)) return *b;
  std::string_view body = s;
  bool neg = false;
  if (!body.empty() && (body[0] == '-' || body[0] == '+')) {
    neg = body[0] == '-';
    body.remove_prefix(1);
  }
  if (isDigits(body) && body.size() <= 18) {
    auto v = static_cast<int64_t>(*parseUnsigned(body));
    return neg ? -v : v;
  }
  // Floats: digits with one '.' and/or an exponent; anything else stays a string.
  bool digit = false, dot = false, exp = false;
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c >= '0' && c <= '9') {
      digit = true;
    } else if (c == '.' && !dot && !exp) {
      dot = true;
    } else if ((c == 'e' || c == 'E') && digit && !exp && i + 1 < body.size()) {
      exp = true;
      if (body[i + 1] == '+' || body[i + 1] == '-') ++i;
    } else {
      return s;
    }
  }
  if (digit && (dot || exp)) {
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (end && *end == '\0') return d;
  }
  return s;
}

Result<json> toJson(const YAML::Node& n, size_t& budget, std::string_view name, size_t depth = 0) {
  if ((n.IsSequence() || n.IsMap()) && depth >= kMaxDocumentNesting) return tooDeep(name);
  if (budget == 0) {
    return usageError(std::string(name) + ": its YAML aliases expand it to more values than " +
                          std::to_string(kYamlValuesPerByte) + " per byte of the file",
                      "remove the aliases (*name) from the input; kubectl writes none");
  }
  --budget;
  switch (n.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      return json(nullptr);
    case YAML::NodeType::Scalar:
      // "!" is yaml-cpp's tag for a quoted scalar: always a string.
      if (n.Tag() == "!" || n.Tag() == "tag:yaml.org,2002:str") return json(n.Scalar());
      return plainScalar(n.Scalar());
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& item : n) {
        auto v = toJson(item, budget, name, depth + 1);
        if (!v) return v;
        a.push_back(std::move(*v));
      }
      return a;
    }
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : n) {
        if (!kv.first.IsScalar()) {
          const auto m = kv.first.Mark();
          return usageError(std::string(name) + ": unsupported YAML at line " +
                                std::to_string(m.line + 1) + ", column " +
                                std::to_string(m.column + 1) + ": a mapping key is not a scalar",
                            "use plain string keys");
        }
        auto v = toJson(kv.second, budget, name, depth + 1);
        if (!v) return v;
        o[kv.first.Scalar()] = std::move(*v);
      }
      return o;
    }
  }
  return json(nullptr);
}

Result<std::vector<Document>> parseJson(std::string_view text, std::string_view name) {
  // One pass over the bytes: nlohmann-json's callback parser, which could stop at a depth, read
  // check-node's 5,000 nodes 30-60% slower than its plain parser.
  if (jsonNesting(text) > kMaxDocumentNesting) return tooDeep(name);
  try {
    std::vector<Document> out;
    out.push_back({std::string(name), json::parse(text)});
    return out;
  } catch (const json::parse_error& e) {
    auto p = position(text, e.byte);
    // what() is "[json.exception.parse_error.101] parse error at line 1, column 2: <detail>".
    std::string detail = e.what();
    auto c = detail.find("column ");
    if (c != std::string::npos) {
      auto colon = detail.find(": ", c);
      if (colon != std::string::npos) detail = detail.substr(colon + 2);
    }
    return usageError(std::string(name) + ": malformed JSON at line " + std::to_string(p.line) +
                          ", column " + std::to_string(p.column) + " (byte " +
                          std::to_string(e.byte) + "): " + detail,
                      "pass the output of 'kubectl get ... -o json' or '-o yaml' unchanged");
  } catch (const json::out_of_range& e) {
    // A number that does not fit a double ("5E051111111111111111"): out_of_range.406, no position.
    return usageError(std::string(name) + ": malformed JSON: " + e.what(),
                      "pass the output of 'kubectl get ... -o json' or '-o yaml' unchanged");
  }
}

// The documents of a YAML stream, split at "---" / "..." marker lines, each with the line it
// starts on. yaml-cpp 0.7's LoadAll() loops forever, allocating, on some malformed streams
// (jbeder/yaml-cpp#1319, fixed in 0.8); Load() parses one document and always returns.
struct YamlChunk {
  std::string text;
  size_t firstLine = 0;  // 0-based
};
// A document marker line: "---" or "..." alone or followed by blanks ("--- {a: 1}").
bool isMarker(std::string_view line, std::string_view marker) {
  return startsWith(line, marker) &&
         (line.size() == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r');
}

std::vector<YamlChunk> splitYamlDocuments(std::string_view text) {
  std::vector<YamlChunk> out(1);
  size_t line = 0;
  for (std::string_view l : splitLines(text)) {
    const bool start = isMarker(l, "---");
    if (start || isMarker(l, "...")) {
      if (!out.back().text.empty() || out.size() > 1) out.push_back({});
      out.back().firstLine = line;
      // "--- {a: 1}": the rest of the marker line belongs to the document; pad it so columns
      // in error messages stay right.
      if (start) out.back().text = "   " + std::string(l.substr(3)) + "\n";
    } else {
      if (out.back().text.empty()) out.back().firstLine = line;
      out.back().text += std::string(l) + "\n";
    }
    ++line;
  }
  return out;
}

// Does a document's text say nothing but null (blank, comments, "~", "null")? yaml-cpp also
// returns a null node for a document it could not consume at all (",", "]"), which is an error.
bool saysNull(std::string_view text) {
  std::string rest;
  for (std::string_view l : splitLines(text)) {
    l = trim(l);
    if (l.empty() || l.front() == '#' || l.front() == '%') continue;
    rest += std::string(l);
  }
  return rest.empty() || rest == "~" || rest == "null" || rest == "Null" || rest == "NULL";
}

Result<std::vector<Document>> parseYaml(std::string_view text, std::string_view name) {
  std::vector<YAML::Node> nodes;
  for (const auto& chunk : splitYamlDocuments(text)) {
    try {
      nodes.push_back(YAML::Load(chunk.text));
      if (nodes.back().IsNull() && !saysNull(chunk.text)) {
        return usageError(std::string(name) + ": malformed YAML at line " +
                              std::to_string(chunk.firstLine + 1) +
                              ": the document starting there cannot be read",
                          "pass the output of 'kubectl get ... -o yaml' or '-o json' unchanged");
      }
    } catch (const YAML::Exception& e) {
      // yaml-cpp's depth guard says "bad file" (~500 nested levels: 2000 of its own recursion).
      const bool deep = dynamic_cast<const YAML::DeepRecursion*>(&e) != nullptr;
      return usageError(
          std::string(name) + ": malformed YAML at line " +
              std::to_string(chunk.firstLine + static_cast<size_t>(std::max(e.mark.line, 0)) + 1) +
              ", column " + std::to_string(e.mark.column + 1) + ": " +
              (deep ? std::string("nested too deep") : e.msg),
          "pass the output of 'kubectl get ... -o yaml' or '-o json' unchanged");
    }
  }
  std::vector<Document> out;
  size_t budget = yamlBudget(text.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].IsNull() || !nodes[i].IsDefined()) continue;
    auto v = toJson(nodes[i], budget, name);
    if (!v) return v.error();
    std::string source(name);
    if (nodes.size() > 1) source += " (document " + std::to_string(i + 1) + ")";
    out.push_back({std::move(source), std::move(*v)});
  }
  return out;
}

}  // namespace

Result<std::vector<Document>> parseDocuments(std::string_view text, std::string_view name) {
  auto start = text.find_first_not_of(" \t\r\n");
  if (start == std::string_view::npos) return std::vector<Document>{};
  if (text[start] == '{' || text[start] == '[') return parseJson(text, name);
  return parseYaml(text, name);
}

std::vector<Document> expandLists(const std::vector<Document>& docs) {
  std::vector<Document> out;
  for (const auto& d : docs) {
    const json* items = d.body.is_object() ? at(d.body, {"items"}) : nullptr;
    if (items && items->is_array()) {
      for (size_t i = 0; i < items->size(); ++i) {
        out.push_back({d.source + " (item " + std::to_string(i + 1) + ")", (*items)[i]});
      }
    } else {
      out.push_back(d);
    }
  }
  return out;
}

std::optional<std::string> scalarText(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
  if (v.is_number_float()) return v.dump();
  return std::nullopt;
}

const json* at(const json& v, std::initializer_list<std::string_view> path) {
  const json* cur = &v;
  for (auto key : path) {
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(key);
    if (it == cur->end()) return nullptr;
    cur = &*it;
  }
  return cur;
}

std::string kindOf(const json& v) {
  const json* k = at(v, {"kind"});
  return k && k->is_string() ? k->get<std::string>() : std::string();
}

}  // namespace hostprep

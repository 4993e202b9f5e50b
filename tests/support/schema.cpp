#include "tests/support/schema.hpp"

#include <regex>
#include <set>

namespace hostprep::test {
namespace {

using nlohmann::json;

struct Validator {
  const json& root;
  std::vector<std::string> errors;

  static bool hasType(const json& v, const std::string& t) {
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    if (t == "string") return v.is_string();
    if (t == "integer") return v.is_number_integer();
    if (t == "number") return v.is_number();
    if (t == "boolean") return v.is_boolean();
    if (t == "null") return v.is_null();
    return false;
  }

  const json& resolve(const json& s) {
    if (!s.contains("$ref")) return s;
    const std::string ref = s["$ref"];
    const std::string prefix = "#/$defs/";
    if (ref.rfind(prefix, 0) != 0 || !root["$defs"].contains(ref.substr(prefix.size()))) {
      errors.push_back("schema: unsupported $ref " + ref);
      static const json empty = json::object();
      return empty;
    }
    return root["$defs"][ref.substr(prefix.size())];
  }

  void check(const json& schemaIn, const json& v, const std::string& path) {
    const json& s = resolve(schemaIn);
    static const std::set<std::string> known = {"$schema",
                                                "$id",
                                                "$ref",
                                                "$defs",
                                                "title",
                                                "description",
                                                "type",
                                                "enum",
                                                "required",
                                                "properties",
                                                "additionalProperties",
                                                "propertyNames",
                                                "items",
                                                "minimum",
                                                "minItems",
                                                "pattern",
                                                "oneOf"};
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (!known.count(it.key()))
        errors.push_back("schema: unsupported keyword " + it.key() + " at " + path);
    }
    if (s.contains("type")) {
      bool ok = false;
      if (s["type"].is_string()) ok = hasType(v, s["type"]);
      for (const auto& t : s["type"].is_array() ? s["type"] : json::array())
        ok = ok || hasType(v, t);
      if (!ok) {
        errors.push_back(path + ": is " + std::string(v.type_name()) + ", schema wants " +
                         s["type"].dump());
        return;
      }
    }
    if (s.contains("enum")) {
      bool found = false;
      for (const auto& e : s["enum"]) found = found || e == v;
      if (!found) errors.push_back(path + ": " + v.dump() + " is not one of " + s["enum"].dump());
    }
    if (s.contains("oneOf")) {
      int matches = 0;
      for (const auto& alt : s["oneOf"]) {
        Validator sub{root, {}};
        sub.check(alt, v, path);
        if (sub.errors.empty()) ++matches;
      }
      if (matches != 1)
        errors.push_back(path + ": matches " + std::to_string(matches) + " of oneOf");
    }
    if (v.is_string() && s.contains("pattern")) {
      if (!std::regex_search(v.get<std::string>(), std::regex(s["pattern"].get<std::string>()))) {
        errors.push_back(path + ": " + v.dump() + " does not match " +
                         s["pattern"].get<std::string>());
      }
    }
    if (v.is_number() && s.contains("minimum") && v.get<double>() < s["minimum"].get<double>()) {
      errors.push_back(path + ": " + v.dump() + " is below " + s["minimum"].dump());
    }
    if (v.is_array() && s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) {
      errors.push_back(path + ": has " + std::to_string(v.size()) + " item(s), fewer than " +
                       s["minItems"].dump());
    }
    if (v.is_array() && s.contains("items")) {
      for (size_t i = 0; i < v.size(); ++i)
        check(s["items"], v[i], path + "[" + std::to_string(i) + "]");
    }
    if (v.is_object()) {
      for (const auto& r : s.value("required", json::array())) {
        if (!v.contains(r.get<std::string>()))
          errors.push_back(path + ": missing " + r.get<std::string>());
      }
      for (auto it = v.begin(); it != v.end(); ++it) {
        const std::string p = path + "." + it.key();
        if (s.contains("propertyNames")) check(s["propertyNames"], json(it.key()), p + " (name)");
        if (s.contains("properties") && s["properties"].contains(it.key())) {
          check(s["properties"][it.key()], it.value(), p);
        } else if (s.contains("additionalProperties")) {
          const json& ap = s["additionalProperties"];
          if (ap.is_boolean()) {
            if (!ap.get<bool>()) errors.push_back(p + ": not allowed by the schema");
          } else {
            check(ap, it.value(), p);
          }
        }
      }
    }
  }
};

}  // namespace

std::vector<std::string> validateSchema(const json& schema, const json& doc) {
  Validator v{schema, {}};
  v.check(schema, doc, "$");
  return v.errors;
}

}  // namespace hostprep::test

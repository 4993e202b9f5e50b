// A small JSON Schema validator for the subset hostprep's schemas use: type (one or a list),
// enum, required, properties, additionalProperties (false or a schema), propertyNames, items,
// minimum, pattern, oneOf, and local $ref ("#/$defs/name"). Keywords apply only to instances of
// their type, as the spec says. Any keyword outside the subset is reported, so the schema cannot
// silently use something this validator does not check.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace hostprep::test {

// Returns every violation as "path: problem"; empty when the document is valid.
std::vector<std::string> validateSchema(const nlohmann::json& schema, const nlohmann::json& doc);

}  // namespace hostprep::test

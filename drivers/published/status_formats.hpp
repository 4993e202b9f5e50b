// The status document rendered for its readers: JSON (schema: agent/status.schema.json), an NFD
// features.d file, a Prometheus textfile; and the times and conditions of a previous document
// read back.
#pragma once

#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "drivers/published/status.hpp"

namespace hostprep {

inline constexpr std::string_view kNfdPrefix = "hostprep.";

nlohmann::ordered_json toJson(const StatusDocument& d);
std::string nfdFeatures(const StatusDocument& d);     // NFD local source, features.d format
std::string prometheusText(const StatusDocument& d);  // node_exporter textfile collector

// RFC 3339 UTC, "2024-05-01T12:00:00Z".
std::string formatTime(std::time_t t);
std::optional<std::time_t> parseTime(std::string_view s);

// Conditions of a previous document (empty when it is absent or unreadable).
std::vector<Condition> parseConditions(std::string_view statusJson);

}  // namespace hostprep

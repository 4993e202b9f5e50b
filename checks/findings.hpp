// What every check-node check shares: adding a finding, and the few words findings are made of.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "checks/check_node.hpp"
#include "drivers/common/text.hpp"

namespace hostprep {

// A finding about node n.
void addFinding(NodeResult& n, std::string id, Severity s, std::string message, std::string fix,
                std::string resource = {});
// A finding about the cluster (a workload, the KubeVirt CR, the policy): subject names it.
void addClusterFinding(std::vector<Finding>& out, std::string id, Severity s, std::string subject,
                       std::string message, std::string fix, std::string resource = {});

// "1 GPU", "2 GPUs"
std::string plural(int64_t n, std::string_view one, std::string_view many);
// "a, b, c and 4 more"
std::string nameList(const std::vector<std::string>& names, size_t max = 3);

// Calls fn(key, value) for each member of obj whose key starts with prefix (keys are sorted: a
// range).
template <class F>
void forEachPrefixed(const nlohmann::json& obj, std::string_view prefix, F&& fn) {
  if (!obj.is_object()) return;
  const auto& m = obj.get_ref<const nlohmann::json::object_t&>();
  for (auto it = m.lower_bound(prefix); it != m.end() && startsWith(it->first, prefix); ++it) {
    fn(it->first, it->second);
  }
}

}  // namespace hostprep

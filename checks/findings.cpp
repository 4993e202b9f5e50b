#include "checks/findings.hpp"

#include <algorithm>

namespace hostprep {

void addFinding(NodeResult& n, std::string id, Severity s, std::string message, std::string fix,
                std::string resource) {
  n.findings.push_back(
      {std::move(id), s, n.name, std::move(resource), "", std::move(message), std::move(fix)});
}

void addClusterFinding(std::vector<Finding>& out, std::string id, Severity s, std::string subject,
                       std::string message, std::string fix, std::string resource) {
  out.push_back({std::move(id), s, "", std::move(resource), std::move(subject), std::move(message),
                 std::move(fix)});
}

std::string plural(int64_t n, std::string_view one, std::string_view many) {
  return std::to_string(n) + " " + std::string(n == 1 ? one : many);
}

std::string nameList(const std::vector<std::string>& names, size_t max) {
  std::vector<std::string> shown(names.begin(),
                                 names.begin() + static_cast<long>(std::min(max, names.size())));
  std::string s = join(shown, ", ");
  if (names.size() > max) s += " and " + std::to_string(names.size() - max) + " more";
  return s;
}

}  // namespace hostprep

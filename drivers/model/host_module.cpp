#include "drivers/model/host_module.hpp"

#include "drivers/common/parsers.hpp"
#include "drivers/common/text.hpp"

namespace hostprep {

bool isDriverOfModule(const Snapshot& s, std::string_view driver, std::string_view module) {
  if (driver.empty()) return false;
  const std::string m = normalizeModuleName(module);
  auto it = s.pciDrivers.find(std::string(driver));
  if (it != s.pciDrivers.end() && !it->second.empty()) return it->second == m;
  return normalizeModuleName(driver) == m;
}

std::vector<std::string> driversOfModule(const Snapshot& s, std::string_view module) {
  std::vector<std::string> out;
  for (const auto& [driver, owner] : s.pciDrivers) {
    if (isDriverOfModule(s, driver, module)) out.push_back(driver);
  }
  return out;  // the map is sorted
}

std::string hostDriverOf(const Snapshot& s, const PciFunction& f, std::string_view module) {
  if (isDriverOfModule(s, f.driver.value_or(""), module)) return *f.driver;
  auto drivers = driversOfModule(s, module);
  return drivers.size() == 1 ? drivers.front() : std::string();
}

std::string describeHostDriver(const Snapshot& s, std::string_view module) {
  auto drivers = driversOfModule(s, module);
  const std::string m = normalizeModuleName(module);
  if (drivers.size() == 1 && normalizeModuleName(drivers.front()) == m) return drivers.front();
  if (drivers.empty()) return std::string(module);
  return "a driver of module " + m + " (" + join(drivers, ", ") + ")";
}

}  // namespace hostprep

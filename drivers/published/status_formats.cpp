#include "drivers/published/status_formats.hpp"

#include <algorithm>
#include <cstdio>

#include "drivers/common/text.hpp"

namespace hostprep {
namespace {

using ojson = nlohmann::ordered_json;

std::string hex4(uint16_t v) { return hexDigits(v, 4); }
std::string hex6(uint32_t v) { return hexDigits(v & 0xffffff, 6); }

std::string promEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

nlohmann::ordered_json toJson(const StatusDocument& d) {
  auto opt = [](const auto& o) { return o ? ojson(*o) : ojson(nullptr); };
  ojson j;
  j["schemaVersion"] = d.schemaVersion;
  j["nodeName"] = d.nodeName;
  j["observedTime"] = formatTime(d.observedTime);
  j["agentVersion"] = d.agentVersion;
  j["desiredMode"] = d.desiredMode ? ojson(d.desiredSummary()) : ojson(nullptr);
  j["desiredModeSource"] =
      d.desiredModeSource.empty() ? ojson(nullptr) : ojson(d.desiredModeSource);
  j["desiredSplit"] = ojson::object();
  for (const auto& [m, n] : d.desiredSplit) j["desiredSplit"][std::string(toString(m))] = n;
  j["actualMode"] = std::string(toString(d.actualMode));
  j["converged"] = d.converged;
  j["conditions"] = ojson::array();
  for (const auto& c : d.conditions) {
    j["conditions"].push_back({{"type", c.type},
                               {"status", std::string(toString(c.status))},
                               {"reason", c.reason},
                               {"message", c.message},
                               {"lastTransitionTime", formatTime(c.lastTransitionTime)}});
  }
  j["devices"] = ojson::array();
  for (const auto& dv : d.devices) {
    const PciFunction& f = *dv.fn;
    ojson e;
    e["bdf"] = f.bdf.str();
    e["vendorId"] = hex4(f.id.vendor);
    e["deviceId"] = hex4(f.id.device);
    e["subsystemVendorId"] = hex4(f.subsystem.vendor);
    e["subsystemDeviceId"] = hex4(f.subsystem.device);
    e["name"] = opt(dv.name);
    e["class"] = hex6(f.classCode);
    e["className"] = className(f.classCode);
    e["role"] = std::string(toString(dv.role));
    e["desiredMode"] =
        dv.desiredMode ? ojson(std::string(toString(*dv.desiredMode))) : ojson(nullptr);
    e["iommuGroup"] = opt(f.iommuGroup);
    e["driver"] = opt(f.driver);
    e["driverOverride"] = opt(f.driverOverride);
    e["wantedDriver"] = opt(dv.wantedDriver);
    e["wantedModule"] = opt(dv.wantedModule);
    e["onWantedDriver"] = opt(dv.onWantedDriver);
    e["numaNode"] = f.numaNode && *f.numaNode >= 0 ? ojson(*f.numaNode) : ojson(nullptr);
    if (f.sriovTotalVfs) {
      e["sriov"] = {{"totalVfs", *f.sriovTotalVfs}, {"numVfs", f.sriovNumVfs.value_or(0)}};
    } else {
      e["sriov"] = nullptr;
    }
    e["physfn"] = f.physfn ? ojson(f.physfn->str()) : ojson(nullptr);
    // Only while an unbind of it is blocked in the kernel (driverOverride is then unknown).
    if (f.unbindPending) e["unbindPending"] = true;
    // Only where the kernel made a VFIO device file for it (Linux 6.6+, on a VFIO driver).
    if (f.vfioDevice) e["vfioDevice"] = "/dev/vfio/devices/" + *f.vfioDevice;
    // Only for a device that no longer answers, with the power state the kernel shows for it
    // (D3cold: its power is off; D0: it fell off the bus). The others answer, in D0 or, idle on
    // vfio-pci, D3hot: nothing to act on.
    if (f.responsive == false) {
      e["responsive"] = false;
      if (f.powerState) e["powerState"] = *f.powerState;
    }
    j["devices"].push_back(std::move(e));
  }
  j["vgpuDevices"] = ojson::array();
  for (const auto& vg : d.vgpu) {
    j["vgpuDevices"].push_back(
        {{"interface", std::string(toString(vg.device.interface))},
         {"uuid", vg.device.uuid.empty() ? ojson(nullptr) : ojson(vg.device.uuid)},
         {"parent", vg.device.parent ? ojson(vg.device.parent->str()) : ojson(nullptr)},
         {"typeId", vg.device.typeId},
         {"typeName", vg.device.typeName},
         {"resource", vg.resource}});
  }
  j["advertised"] = ojson::object();
  for (const auto& [name, count] : d.advertised) j["advertised"][name] = count;
  // Shaped as the KubeVirt CR's spec.configuration.permittedHostDevices, to paste there; only the
  // lists with entries (an empty list in a merge patch would clear the CR's), and only when any.
  if (!d.permitted.empty()) {
    auto list = [](const std::vector<PermittedDevice>& entries, const char* selectorKey) {
      ojson out = ojson::array();
      for (const auto& e : entries) {
        out.push_back({{selectorKey, e.selector},
                       {"resourceName", e.resourceName},
                       {"externalResourceProvider", true}});
      }
      return out;
    };
    ojson p = ojson::object();
    if (!d.permitted.pci.empty()) p["pciHostDevices"] = list(d.permitted.pci, "pciVendorSelector");
    if (!d.permitted.mediated.empty())
      p["mediatedDevices"] = list(d.permitted.mediated, "mdevNameSelector");
    j["permittedHostDevices"] = std::move(p);
  }
  j["drift"] = ojson::array();
  for (const auto* dv : d.drift()) {
    j["drift"].push_back({{"bdf", dv->fn->bdf.str()},
                          {"driver", opt(dv->fn->driver)},
                          {"wantedDriver", opt(dv->wantedDriver)},
                          {"wantedModule", opt(dv->wantedModule)}});
  }
  j["pciIdsFound"] = d.pciIdsFound;
  j["iommufd"] = d.iommufd;
  return j;
}

std::string nfdFeatures(const StatusDocument& d) {
  std::string p(kNfdPrefix);
  std::string out = "# written by hostprep; see " + std::string(kStatusPath) + "\n";
  out += p + "actual-mode=" + std::string(toString(d.actualMode)) + "\n";
  if (d.desiredMode) out += p + "desired-mode=" + d.desiredSummary() + "\n";
  out += p + "converged=" + (d.converged ? "true" : "false") + "\n";
  // false while a selected device does not answer (DevicesResponsive); absent when unknown.
  if (const Condition* c = d.condition("DevicesResponsive");
      c && c->status != ConditionStatus::kUnknown)
    out +=
        p + "devices-responsive=" + (c->status == ConditionStatus::kTrue ? "true" : "false") + "\n";
  // The declared split, for the cluster side (check-node) to check the node against.
  for (const auto& [m, n] : d.desiredSplit)
    out += p + "gpus." + std::string(toString(m)) + "=" + std::to_string(n) + "\n";
  return out;
}

std::string prometheusText(const StatusDocument& d) {
  std::map<std::string, int> perDriver;
  for (const auto& dv : d.devices) ++perDriver[dv.fn->driver.value_or("none")];
  std::string o;
  o += "# HELP hostprep_devices Selected PCI functions per bound driver (\"none\": unbound).\n";
  o += "# TYPE hostprep_devices gauge\n";
  for (const auto& [drv, n] : perDriver) {
    o += "hostprep_devices{driver=\"" + promEscape(drv) + "\"} " + std::to_string(n) + "\n";
  }
  o += "# HELP hostprep_converged 1 when every selected device is where the desired mode wants "
       "it.\n";
  o += "# TYPE hostprep_converged gauge\n";
  o += std::string("hostprep_converged ") + (d.converged ? "1" : "0") + "\n";
  o += "# HELP hostprep_mode_info The desired and the actual mode of the node.\n";
  o += "# TYPE hostprep_mode_info gauge\n";
  o += "hostprep_mode_info{desired=\"" + (d.desiredMode ? d.desiredSummary() : std::string()) +
       "\",actual=\"" + std::string(toString(d.actualMode)) + "\"} 1\n";
  if (!d.desiredSplit.empty()) {
    o += "# HELP hostprep_desired_gpus GPUs per desired mode (more than one mode: a mixed node).\n";
    o += "# TYPE hostprep_desired_gpus gauge\n";
    for (const auto& [m, n] : d.desiredSplit) {
      o += "hostprep_desired_gpus{mode=\"" + std::string(toString(m)) + "\"} " + std::to_string(n) +
           "\n";
    }
  }
  o += "# HELP hostprep_condition Conditions: 1 True, 0 False, -1 Unknown.\n";
  o += "# TYPE hostprep_condition gauge\n";
  std::time_t last = 0;
  for (const auto& c : d.conditions) {
    const char* v = c.status == ConditionStatus::kTrue    ? "1"
                    : c.status == ConditionStatus::kFalse ? "0"
                                                          : "-1";
    o += "hostprep_condition{type=\"" + promEscape(c.type) + "\"} " + v + "\n";
    last = std::max(last, c.lastTransitionTime);
  }
  // The devices that do not answer, one series each (none while all answer: the condition
  // DevicesResponsive is the gauge to alert on).
  bool header = false;
  for (const auto& dv : d.devices) {
    if (dv.fn->responsive != false) continue;
    if (!header) {
      o += "# HELP hostprep_device_unresponsive A selected device whose config space reads 0xffff, "
           "with its power state.\n";
      o += "# TYPE hostprep_device_unresponsive gauge\n";
      header = true;
    }
    o += "hostprep_device_unresponsive{bdf=\"" + dv.fn->bdf.str() + "\",power_state=\"" +
         promEscape(dv.fn->powerState.value_or("")) + "\"} 1\n";
  }
  o += "# HELP hostprep_last_transition_timestamp_seconds When a condition last changed.\n";
  o += "# TYPE hostprep_last_transition_timestamp_seconds gauge\n";
  o += "hostprep_last_transition_timestamp_seconds " + std::to_string(last) + "\n";
  o += "# HELP hostprep_advertised Devices the device plugins will advertise, per resource.\n";
  o += "# TYPE hostprep_advertised gauge\n";
  for (const auto& [name, n] : d.advertised) {
    o += "hostprep_advertised{resource=\"" + promEscape(name) + "\"} " + std::to_string(n) + "\n";
  }
  return o;
}

std::string formatTime(std::time_t t) {
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return std::string(buf, n);
}

std::optional<std::time_t> parseTime(std::string_view s) {
  if (s.size() != 20 || s[19] != 'Z') return std::nullopt;
  std::tm tm{};
  int y = 0, mo = 0, da = 0, h = 0, mi = 0, se = 0;
  char tail = 0;
  const std::string str(s);
  if (std::sscanf(str.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%c", &y, &mo, &da, &h, &mi, &se, &tail) !=
          7 ||
      tail != 'Z') {
    return std::nullopt;
  }
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = da;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = se;
  return ::timegm(&tm);
}

std::vector<Condition> parseConditions(std::string_view statusJson) {
  std::vector<Condition> out;
  auto j = nlohmann::json::parse(statusJson, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("conditions") ||
      !j["conditions"].is_array()) {
    return out;
  }
  for (const auto& c : j["conditions"]) {
    if (!c.is_object()) continue;
    Condition k;
    k.type = c.value("type", "");
    const std::string st = c.value("status", "");
    k.status = st == "True"    ? ConditionStatus::kTrue
               : st == "False" ? ConditionStatus::kFalse
                               : ConditionStatus::kUnknown;
    k.reason = c.value("reason", "");
    k.message = c.value("message", "");
    k.lastTransitionTime = parseTime(c.value("lastTransitionTime", "")).value_or(0);
    if (!k.type.empty()) out.push_back(std::move(k));
  }
  return out;
}

}  // namespace hostprep

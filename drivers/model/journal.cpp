#include "drivers/model/journal.hpp"

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <utility>

#include "drivers/common/text.hpp"
#include "drivers/common/validate.hpp"
#include "drivers/model/snapshot.hpp"

namespace hostprep {
namespace {

using nlohmann::json;

json optString(const std::optional<std::string>& s) { return s ? json(*s) : json(nullptr); }

}  // namespace

std::string toJson(const Journal& jr) {
  json j;
  j["version"] = kJournalVersion;
  j["mode"] = std::string(toString(jr.mode));
  j["pid"] = jr.pid;
  j["next"] = jr.next;
  for (const auto& d : jr.devices) {
    j["devices"].push_back({{"bdf", d.bdf.str()},
                            {"driver", optString(d.original.driver)},
                            {"driver_override", optString(d.original.driverOverride)},
                            {"pending_unbind", optString(d.pendingUnbind)},
                            {"pending_probe", d.pendingProbe}});
  }
  for (const auto& s : jr.steps) {
    json st{{"kind", std::string(toString(s.kind))}, {"arg", s.arg}};
    st["bdf"] = s.bdf ? json(s.bdf->str()) : json(nullptr);
    st["group"] = s.group ? json(*s.group) : json(nullptr);
    if (!s.uuid.empty()) st["uuid"] = s.uuid;
    j["steps"].push_back(st);
  }
  j["sriov"] = json::array();
  for (const auto& s : jr.sriov) {
    json vfs = json::array();
    for (const auto& vf : s.vfs) {
      vfs.push_back({{"bdf", vf.bdf.str()},
                     {"driver", optString(vf.state.driver)},
                     {"driver_override", optString(vf.state.driverOverride)}});
    }
    j["sriov"].push_back({{"pf", s.pf.str()},
                          {"numvfs", s.numvfs},
                          {"pending_write", s.pendingWrite},
                          {"vfs", std::move(vfs)}});
  }
  j["vgpu_gpus"] = json::array();
  for (const auto& b : jr.vgpuGpus) j["vgpu_gpus"].push_back(b.str());
  j["vgpus"] = json::array();
  for (const auto& v : jr.vgpus) {
    j["vgpus"].push_back({{"interface", std::string(toString(v.iface))},
                          {"parent", v.parent.str()},
                          {"uuid", v.uuid},
                          {"type", v.typeId},
                          {"name", v.typeName},
                          {"group", v.group ? json(*v.group) : json(nullptr)}});
  }
  // Names were validated, so this is ASCII; 'replace' keeps a bug from becoming an exception.
  return j.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

namespace {

Error bad(const std::string& what) { return sysError("journal: " + what, EINVAL); }

// Numbers are read only when they are integers in range: a float or a huge value is an error, not
// a conversion (a double out of int's range is undefined behaviour to convert).
std::optional<int64_t> intField(const json& j, const char* key, int64_t lo, int64_t hi) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  int64_t v = it->is_number_unsigned()
                  ? static_cast<int64_t>(std::min<uint64_t>(it->get<uint64_t>(), INT64_MAX))
                  : it->get<int64_t>();
  if (v < lo || v > hi) return std::nullopt;
  return v;
}

Result<std::optional<std::string>> nameField(const json& j, const char* key,
                                             const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) return bad(where + ": missing \"" + key + "\"");
  if (it->is_null()) return std::optional<std::string>{};
  if (!it->is_string()) return bad(where + ": \"" + key + "\" is not a string or null");
  return std::optional<std::string>(it->get<std::string>());
}

Result<Bdf> bdfField(const json& j, const std::string& where) {
  auto it = j.find("bdf");
  if (it == j.end() || !it->is_string()) return bad(where + ": no \"bdf\" string");
  auto b = parseBdf(it->get<std::string>());
  if (!b)
    return bad(where + ": '" + quoteUntrusted(it->get<std::string>()) + "' is not a PCI address");
  return *b;
}

// {"bdf": ..., "driver": ..., "driver_override": ...}: a device and the state a recovery puts it
// back to.
Result<std::pair<Bdf, DeviceState>> deviceEntry(const json& d, const std::string& where) {
  if (!d.is_object()) return bad(where + ": not an object");
  auto bdf = bdfField(d, where);
  if (!bdf) return bdf.error();
  auto drv = nameField(d, "driver", where);
  if (!drv) return drv.error();
  auto ovr = nameField(d, "driver_override", where);
  if (!ovr) return ovr.error();
  DeviceState st{*drv, *ovr};
  // The journal drives writes during recovery: a name that could leave sysfs stops it here.
  if (auto v = checkDeviceState(bdf->str(), st); !v) return bad(where + ": " + v.error().message);
  return std::pair{*bdf, st};
}

Result<Journal> parseJournalJson(const json& j) {
  Journal jr;
  if (!j.is_object()) return bad("not a JSON object");
  if (!intField(j, "version", 1, kJournalVersion)) return bad("unknown version");
  auto modeIt = j.find("mode");
  if (modeIt == j.end() || !modeIt->is_string()) return bad("no mode");
  auto mode = parseMode(modeIt->get<std::string>());
  if (!mode) return bad("unknown mode '" + quoteUntrusted(modeIt->get<std::string>()) + "'");
  jr.mode = *mode;
  if (j.contains("pid")) {
    auto pid = intField(j, "pid", 0, INT32_MAX);
    if (!pid) return bad("\"pid\" is not a process id");
    jr.pid = static_cast<int>(*pid);
  }
  auto devices = j.value("devices", json::array());
  auto steps = j.value("steps", json::array());
  if (!devices.is_array() || !steps.is_array())
    return bad("\"devices\" and \"steps\" must be arrays");
  for (size_t i = 0; i < devices.size(); ++i) {
    const json& d = devices[i];
    const std::string where = "devices[" + std::to_string(i) + "]";
    auto entry = deviceEntry(d, where);
    if (!entry) return entry.error();
    const auto& [bdf, st] = *entry;
    for (const auto& prev : jr.devices) {
      if (prev.bdf == bdf) return bad(where + ": " + bdf.str() + " is listed twice");
    }
    std::optional<std::string> pending;
    if (d.contains("pending_unbind")) {
      auto p = nameField(d, "pending_unbind", where);
      if (!p) return p.error();
      pending = *p;
      if (pending) {
        if (auto v = checkDriverName(where + " pending_unbind", *pending); !v)
          return bad(v.error().message);
      }
    }
    bool probing = false;
    if (auto p = d.find("pending_probe"); p != d.end()) {
      if (!p->is_boolean()) return bad(where + ": \"pending_probe\" is not true or false");
      probing = p->get<bool>();
    }
    jr.devices.push_back({bdf, st, pending, probing});
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    const json& s = steps[i];
    const std::string where = "steps[" + std::to_string(i) + "]";
    if (!s.is_object()) return bad(where + ": not an object");
    auto kindIt = s.find("kind");
    if (kindIt == s.end() || !kindIt->is_string()) return bad(where + ": no kind");
    auto kind = parseStepKind(kindIt->get<std::string>());
    if (!kind)
      return bad(where + ": unknown step kind '" + quoteUntrusted(kindIt->get<std::string>()) +
                 "'");
    Step st{*kind, std::nullopt, {}, std::nullopt, {}};
    if (auto a = s.find("arg"); a != s.end()) {
      if (!a->is_string()) return bad(where + ": \"arg\" is not a string");
      st.arg = a->get<std::string>();
    }
    if (auto b = s.find("bdf"); b != s.end() && !b->is_null()) {
      auto bdf = bdfField(s, where);
      if (!bdf) return bdf.error();
      st.bdf = *bdf;
    }
    if (auto g = s.find("group"); g != s.end() && !g->is_null()) {
      auto group = intField(s, "group", 0, 999'999);
      if (!group) return bad(where + ": \"group\" is not an IOMMU group number");
      st.group = static_cast<int>(*group);
    }
    if (auto u = s.find("uuid"); u != s.end()) {
      if (!u->is_string() || !isValidUuid(u->get<std::string>()))
        return bad(where + ": \"uuid\" is not a UUID");
      st.uuid = u->get<std::string>();
    }
    if (auto v = checkStep(st); !v) return bad(where + ": " + v.error().message);
    jr.steps.push_back(std::move(st));
  }
  // vm-vgpu (version 2): VF counts and the vGPU devices that existed before the run.
  auto sriov = j.value("sriov", json::array());
  auto vgpuGpus = j.value("vgpu_gpus", json::array());
  auto vgpus = j.value("vgpus", json::array());
  if (!sriov.is_array() || !vgpuGpus.is_array() || !vgpus.is_array()) {
    return bad("\"sriov\", \"vgpu_gpus\" and \"vgpus\" must be arrays");
  }
  auto bdfString = [](const json& v, const std::string& where) -> Result<Bdf> {
    if (!v.is_string()) return bad(where + ": not a PCI address string");
    auto b = parseBdf(v.get<std::string>());
    if (!b)
      return bad(where + ": '" + quoteUntrusted(v.get<std::string>()) + "' is not a PCI address");
    return *b;
  };
  for (size_t i = 0; i < sriov.size(); ++i) {
    const std::string where = "sriov[" + std::to_string(i) + "]";
    if (!sriov[i].is_object() || !sriov[i].contains("pf"))
      return bad(where + ": not an object with \"pf\"");
    auto pf = bdfString(sriov[i].at("pf"), where);
    if (!pf) return pf.error();
    auto n = intField(sriov[i], "numvfs", 0, 4096);
    if (!n) return bad(where + ": \"numvfs\" is not a VF count 0..4096");
    bool pending = false;
    if (auto p = sriov[i].find("pending_write"); p != sriov[i].end()) {
      if (!p->is_boolean()) return bad(where + ": \"pending_write\" is not true or false");
      pending = p->get<bool>();
    }
    // Journals written before "vfs" (and VFs that were all removed anyway) have none.
    std::vector<VfState> vfs;
    auto vfList = sriov[i].value("vfs", json::array());
    if (!vfList.is_array()) return bad(where + ": \"vfs\" is not an array");
    for (size_t v = 0; v < vfList.size(); ++v) {
      auto entry = deviceEntry(vfList[v], where + " vfs[" + std::to_string(v) + "]");
      if (!entry) return entry.error();
      vfs.push_back({entry->first, entry->second});
    }
    jr.sriov.push_back({*pf, static_cast<int>(*n), pending, std::move(vfs)});
  }
  for (size_t i = 0; i < vgpuGpus.size(); ++i) {
    auto b = bdfString(vgpuGpus[i], "vgpu_gpus[" + std::to_string(i) + "]");
    if (!b) return b.error();
    jr.vgpuGpus.push_back(*b);
  }
  for (size_t i = 0; i < vgpus.size(); ++i) {
    const json& v = vgpus[i];
    const std::string where = "vgpus[" + std::to_string(i) + "]";
    if (!v.is_object() || !v.contains("parent") || !v.contains("type") ||
        !v.at("type").is_string()) {
      return bad(where + ": not an object with \"parent\" and \"type\"");
    }
    VgpuDevice d;
    if (auto it = v.find("interface"); it != v.end()) {  // absent: mdev, as version 1 wrote
      if (!it->is_string() || (*it != "mdev" && *it != "per-vf"))
        return bad(where + ": \"interface\" is not \"mdev\" or \"per-vf\"");
      if (*it == "per-vf") d.iface = VgpuInterface::kPerVf;
    }
    auto parent = bdfString(v.at("parent"), where);
    if (!parent) return parent.error();
    d.parent = *parent;
    if (auto u = v.find("uuid"); u != v.end() && u->is_string()) d.uuid = u->get<std::string>();
    d.typeId = v.at("type").get<std::string>();
    if (auto n = v.find("name"); n != v.end() && n->is_string()) d.typeName = n->get<std::string>();
    if (auto g = v.find("group"); g != v.end() && !g->is_null()) {
      auto group = intField(v, "group", 0, 999'999);
      if (!group) return bad(where + ": \"group\" is not an IOMMU group number");
      d.group = static_cast<int>(*group);
    }
    // These become paths on rollback: only what sysfs itself could have named.
    if (d.iface == VgpuInterface::kMdev && !isValidUuid(d.uuid))
      return bad(where + ": \"uuid\" is not a UUID");
    if (auto c = checkPathComponent(where + " type", d.typeId); !c) return bad(c.error().message);
    jr.vgpus.push_back(std::move(d));
  }
  auto next = intField(j, "next", 0, static_cast<int64_t>(jr.steps.size()));
  if (!next) return bad("\"next\" is not a step index 0.." + std::to_string(jr.steps.size()));
  jr.next = static_cast<size_t>(*next);
  return jr;
}

}  // namespace

Result<Journal> parseJournal(std::string_view text) {
  // A journal nests three deep; a hostile one must not make the parser or the destructor recurse
  // a million times.
  if (jsonNesting(text) > 16) return bad("nested too deeply");
  // No exceptions: a journal is input, and a hostile or torn one is an error, not a crash.
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return bad("not valid JSON");
  return parseJournalJson(j);
}

Result<std::optional<Journal>> readJournal(const Host& host) {
  auto text = host.read(kJournalPath);
  if (!text) {
    if (text.error().err == ENOENT) return std::optional<Journal>{};
    return text.error();
  }
  auto j = parseJournal(*text);
  if (!j) {
    Error e = j.error();
    e.message = host.resolve(kJournalPath).string() + ": " + e.message;
    e.advice =
        "the journal of an interrupted run is unreadable; check every GPU's driver by hand "
        "('hostprep status'), then remove the file";
    return e;
  }
  return std::optional<Journal>(std::move(*j));
}

std::set<Bdf> lockedByPendingWrites(const Host& host) {
  std::set<Bdf> out;
  if (!host.exists(kJournalPath)) return out;
  auto jr = readJournal(host);
  if (!jr || !*jr) return out;
  for (const auto& d : (*jr)->devices) {
    if (d.pendingUnbind && unbindStillPending(host, d.bdf, *d.pendingUnbind)) out.insert(d.bdf);
    if (d.pendingProbe && probeStillPending(host, d.bdf)) out.insert(d.bdf);
  }
  for (const auto& sv : (*jr)->sriov) {
    if (!sv.pendingWrite || !numVfsWriteStillPending(host, sv.pf)) continue;
    out.insert(sv.pf);
    for (const auto& vf : vfSlots(host, sv.pf)) out.insert(vf);
  }
  return out;
}

}  // namespace hostprep

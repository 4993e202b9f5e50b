#include "drivers/journal.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

namespace hostprep {
namespace {

using nlohmann::json;

json optString(const std::optional<std::string>& s) { return s ? json(*s) : json(nullptr); }
std::optional<std::string> getOptString(const json& j) {
  if (j.is_null()) return std::nullopt;
  return j.get<std::string>();
}

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
                            {"pending_unbind", optString(d.pendingUnbind)}});
  }
  for (const auto& s : jr.steps) {
    json st{{"kind", std::string(toString(s.kind))}, {"arg", s.arg}};
    st["bdf"] = s.bdf ? json(s.bdf->str()) : json(nullptr);
    st["group"] = s.group ? json(*s.group) : json(nullptr);
    if (!s.uuid.empty()) st["uuid"] = s.uuid;
    j["steps"].push_back(st);
  }
  j["sriov"] = json::array();
  for (const auto& s : jr.sriov) j["sriov"].push_back({{"pf", s.pf.str()}, {"numvfs", s.numvfs}});
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
  return j.dump(1) + "\n";
}

Result<Journal> parseJournal(std::string_view text) {
  Journal jr;
  try {
    auto j = json::parse(text);
    const int version = j.at("version").get<int>();
    if (version < 1 || version > kJournalVersion) return sysError("journal: unknown version", EINVAL);
    auto mode = parseMode(j.at("mode").get<std::string>());
    if (!mode) return sysError("journal: unknown mode", EINVAL);
    jr.mode = *mode;
    jr.pid = j.value("pid", 0);
    jr.next = j.at("next").get<size_t>();
    for (const auto& d : j.value("devices", json::array())) {
      auto bdf = parseBdf(d.at("bdf").get<std::string>());
      if (!bdf) return sysError("journal: bad device address", EINVAL);
      jr.devices.push_back({*bdf,
                            {getOptString(d.at("driver")), getOptString(d.at("driver_override"))},
                            d.contains("pending_unbind") ? getOptString(d.at("pending_unbind"))
                                                         : std::nullopt});
    }
    for (const auto& s : j.value("steps", json::array())) {
      auto kind = parseStepKind(s.at("kind").get<std::string>());
      if (!kind) return sysError("journal: unknown step kind", EINVAL);
      Step st{*kind, std::nullopt, s.value("arg", ""), std::nullopt, s.value("uuid", "")};
      if (!s.at("bdf").is_null()) st.bdf = parseBdf(s.at("bdf").get<std::string>());
      if (!s.at("group").is_null()) st.group = s.at("group").get<int>();
      jr.steps.push_back(st);
    }
    auto bdfAt = [](const json& v) -> Bdf {
      auto b = parseBdf(v.get<std::string>());
      if (!b) throw std::invalid_argument("bad device address");
      return *b;
    };
    for (const auto& s : j.value("sriov", json::array())) {
      jr.sriov.push_back({bdfAt(s.at("pf")), s.at("numvfs").get<int>()});
    }
    for (const auto& b : j.value("vgpu_gpus", json::array())) jr.vgpuGpus.push_back(bdfAt(b));
    for (const auto& v : j.value("vgpus", json::array())) {
      VgpuDevice d;
      d.iface = v.at("interface").get<std::string>() == "per-vf" ? VgpuInterface::kPerVf : VgpuInterface::kMdev;
      d.parent = bdfAt(v.at("parent"));
      d.uuid = v.value("uuid", "");
      d.typeId = v.at("type").get<std::string>();
      d.typeName = v.value("name", "");
      if (!v.at("group").is_null()) d.group = v.at("group").get<int>();
      // These become paths on rollback: only what sysfs itself could have named.
      if ((d.iface == VgpuInterface::kMdev && !isValidUuid(d.uuid)) || d.typeId.empty() ||
          d.typeId.find('/') != std::string::npos || d.typeId.find("..") != std::string::npos) {
        throw std::invalid_argument("bad vGPU device");
      }
      jr.vgpus.push_back(std::move(d));
    }
  } catch (const json::exception& e) {
    return sysError(std::string("journal: ") + e.what(), EINVAL);
  } catch (const std::invalid_argument& e) {
    return sysError(std::string("journal: ") + e.what(), EINVAL);
  }
  return jr;
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
    e.advice = "the journal of an interrupted run is unreadable; check every GPU's driver by hand "
               "('hostprep status'), then remove the file";
    return e;
  }
  return std::optional<Journal>(std::move(*j));
}

Status writeJournal(Host& host, const Journal& j) {
  if (auto s = host.makeDirs(kStateDir, 0700); !s) return s;
  return host.writeFileAtomic(kJournalPath, toJson(j), 0600);
}

Status removeJournal(Host& host) { return host.removeFile(kJournalPath); }

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);
}

Result<RunLock> RunLock::acquire(Host& host, std::chrono::milliseconds timeout) {
  if (auto s = host.makeDirs(kStateDir, 0700); !s) return s.error();
  const std::string path = host.resolve(kLockPath).string();
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return sysError("cannot open lock " + path, errno);
  RunLock lock(fd);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) return sysError("cannot lock " + path, errno);
    if (std::chrono::steady_clock::now() >= deadline) {
      return Error{"another hostprep run holds " + path, EWOULDBLOCK,
                   "wait for it to finish, or raise --lock-timeout", Exit::kRefused};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return lock;
}

}  // namespace hostprep

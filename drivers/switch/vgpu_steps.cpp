#include "drivers/switch/vgpu_steps.hpp"

#include <algorithm>
#include <thread>

#include "drivers/common/text.hpp"
#include "drivers/model/snapshot.hpp"
#include "drivers/model/vgpu.hpp"

namespace hostprep {

using std::chrono::milliseconds;

Error stepError(const Step& st, const Error& cause, std::string advice) {
  Error e = cause;
  e.message = st.describe() + ": " + cause.message;
  if (!advice.empty()) e.advice = std::move(advice);
  e.exit = Exit::kFailed;
  return e;
}

// Waits (briefly) for a condition the kernel settles asynchronously, e.g. a /dev node.
bool waitFor(const std::function<bool()>& cond, milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!cond()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return true;
}

namespace {

int countVirtfns(const Host& h, const Bdf& pf) {
  auto f = readPciFunction(h, pf);
  return f ? static_cast<int>(f->virtfns.size()) : 0;
}

std::vector<MdevType> liveMdevTypes(const Host& h, const Bdf& parent) {
  std::vector<MdevType> out;
  for (const auto& id : h.list(hostPath(pciDevicePath(parent), "mdev_supported_types"))
                            .value_or(std::vector<std::string>{})) {
    const std::string dir = mdevTypePath(parent, id);
    auto avail = parseUnsigned(readTrimmed(h, hostPath(dir, "available_instances")).value_or(""));
    out.push_back({id, readTrimmed(h, hostPath(dir, "name")).value_or(id),
                   avail && *avail < 1'000'000 ? static_cast<int>(*avail) : 0});
  }
  return out;
}

// The step's vGPU type matched none of `types` (ENOENT: "<none> vGPU type X (<listed>: ...)") or
// several of them (EINVAL: "matches more than one ...").
template <class T>
Error unmatchedType(const Step& st, const std::vector<T>& types, size_t matches, const char* none,
                    const char* listed, std::string advice = {}) {
  return stepError(
      st,
      sysError(std::string(matches == 0 ? none : "matches more than one") + " vGPU type " + st.arg +
                   " (" + listed + ": " + describeVgpuTypes(types) + ")",
               matches == 0 ? ENOENT : EINVAL),
      std::move(advice));
}

bool sameVgpu(const VgpuDevice& a, const VgpuDevice& b) {
  return a.iface == b.iface && a.parent == b.parent && a.uuid == b.uuid && a.typeId == b.typeId;
}

}  // namespace

Status setNumVfs(Host& h, const Step& st, const ApplyOptions& opt) {
  const std::string attr = hostPath(pciDevicePath(*st.bdf), "sriov_numvfs");
  auto want = parseUnsigned(st.arg);
  if (!want) return stepError(st, sysError("bad VF count '" + st.arg + "'", EINVAL));
  if (auto s = h.writeAttr(attr, st.arg, opt.unbindTimeout); !s) {
    const int e = s.error().err;
    std::string advice =
        e == ERANGE      ? "the count is above sriov_totalvfs"
        : e == ENOENT    ? "no driver is bound to the PF, or its driver cannot configure SR-IOV; "
                           "see dmesg"
        : e == EBUSY     ? "VFs are enabled already: write 0 first"
        : e == ETIMEDOUT ? "the kernel is still removing or adding a VF, usually because a VM or "
                           "another process holds a VF and its driver's remove() waits for it; "
                           "find it with 'fuser -v /dev/vfio/*', stop it, and run again"
                         : "see dmesg";
    return stepError(st, s.error(), advice);
  }
  const int n = static_cast<int>(*want);
  if (!waitFor([&] { return readTrimmed(h, attr) == st.arg && countVirtfns(h, *st.bdf) == n; },
               milliseconds(5000))) {
    return stepError(st,
                     sysError("sriov_numvfs reads " + readTrimmed(h, attr).value_or("nothing") +
                                  " with " + std::to_string(countVirtfns(h, *st.bdf)) + " VF(s)",
                              EIO),
                     "see dmesg");
  }
  return {};
}

Status createVgpu(Host& h, const Step& st) {
  const Bdf& parent = *st.bdf;
  const std::string mdevDir = hostPath(pciDevicePath(parent), "mdev_supported_types");
  const std::string creatable = perVfPath(parent, "creatable_vgpu_types");
  // A VF's vGPU types appear once the host driver has taken it; give it a moment.
  if (!waitFor([&] { return h.exists(mdevDir) || h.exists(creatable); }, milliseconds(5000))) {
    return stepError(
        st,
        sysError("offers no vGPU types (no mdev_supported_types, no nvidia/creatable_vgpu_types)",
                 ENOENT),
        "is it bound to the vGPU manager's host driver with nvidia_vgpu_vfio loaded? see dmesg");
  }
  if (h.exists(mdevDir)) {
    if (!isValidUuid(st.uuid))
      return stepError(st, sysError("bad mdev UUID '" + st.uuid + "'", EINVAL));
    auto types = liveMdevTypes(h, parent);
    auto m = matchVgpuTypes(types, st.arg);
    if (m.size() != 1) return unmatchedType(st, types, m.size(), "does not offer", "it offers");
    const MdevType& t = types[m[0]];
    const std::string dev = hostPath(kMdevDevices, st.uuid);
    if (h.exists(dev)) {
      if (readLinkName(h, hostPath(dev, "mdev_type")) == t.id) return {};
      return stepError(st, sysError("mdev " + st.uuid + " exists with another type", EEXIST),
                       "remove it: echo 1 > /sys/bus/mdev/devices/" + st.uuid + "/remove");
    }
    if (t.available <= 0) {
      return stepError(
          st, sysError("no instance of " + t.name + " left (available_instances is 0)", EUSERS),
          "another vGPU type or VM holds the GPU; see 'hostprep status'");
    }
    if (auto s = h.writeAttr(hostPath(mdevTypePath(parent, t.id), "create"), st.uuid); !s) {
      return stepError(st, s.error(), "see dmesg for the vGPU manager's message");
    }
    if (!waitFor([&] { return h.exists(dev); }, milliseconds(2000))) {
      return stepError(st, sysError("/" + dev + " did not appear", ENODEV), "see dmesg");
    }
    return {};
  }
  const std::string current = perVfPath(parent, "current_vgpu_type");
  auto offered = parseCreatableVgpuTypes(h.read(creatable).value_or(""));
  auto c = matchVgpuTypes(offered, st.arg);
  if (c.size() != 1) {
    return unmatchedType(st, offered, c.size(), "cannot create", "creatable",
                         "another vGPU type or VM holds the GPU; see 'hostprep status'");
  }
  const std::string id = offered[c[0]].id;
  const std::string now = readTrimmed(h, current).value_or("0");
  if (now == id) return {};
  if (now != "0")
    return stepError(st, sysError("current_vgpu_type is " + now, EBUSY), "write 0 to it first");
  if (auto s = h.writeAttr(current, id); !s) return stepError(st, s.error(), "see dmesg");
  if (readTrimmed(h, current) != id) {
    return stepError(
        st,
        sysError("current_vgpu_type reads " + readTrimmed(h, current).value_or("nothing"), EIO));
  }
  return {};
}

Status removeVgpu(Host& h, const Step& st) {
  if (!st.uuid.empty()) {
    if (!isValidUuid(st.uuid))
      return stepError(st, sysError("bad mdev UUID '" + st.uuid + "'", EINVAL));
    const std::string dev = hostPath(kMdevDevices, st.uuid);
    if (!h.exists(dev)) return {};
    if (auto s = h.writeAttr(hostPath(dev, "remove"), "1"); !s) {
      return stepError(st, s.error(), "a VM may still use it: stop the VM (see /dev/vfio holders)");
    }
    if (!waitFor([&] { return !h.exists(dev); }, milliseconds(2000))) {
      return stepError(st, sysError("it is still there", EBUSY));
    }
    return {};
  }
  const std::string current = perVfPath(*st.bdf, "current_vgpu_type");
  if (readTrimmed(h, current).value_or("0") == "0") return {};
  if (auto s = h.writeAttr(current, "0"); !s) {
    return stepError(st, s.error(), "a VM may still use the VF: stop the VM");
  }
  if (readTrimmed(h, current) != "0")
    return stepError(st, sysError("current_vgpu_type is not 0", EBUSY));
  return {};
}

// The PF and its VFs as they are now.
std::vector<Bdf> liveParents(const Host& h, const std::vector<Bdf>& gpus) {
  std::vector<Bdf> out;
  for (const auto& g : gpus) {
    out.push_back(g);
    if (auto f = readPciFunction(h, g)) out.insert(out.end(), f->virtfns.begin(), f->virtfns.end());
  }
  return out;
}

// Removes every vGPU device on the journal's GPUs that was not there before the run.
Status removeNewVgpus(Kernel& k, const Journal& jr) {
  Status first;
  for (const auto& d : readVgpuDevices(k.host, liveParents(k.host, jr.vgpuGpus))) {
    bool original = false;
    for (const auto& o : jr.vgpus) original = original || sameVgpu(o, d);
    if (original) continue;
    Status s = d.iface == VgpuInterface::kMdev
                   ? k.host.writeAttr(hostPath(kMdevDevices, d.uuid, "remove"), "1")
                   : k.host.writeAttr(perVfPath(d.parent, "current_vgpu_type"), "0");
    if (!s && first.ok()) {
      first = sysError(d.parent.str() + ": cannot remove vGPU " +
                           (d.uuid.empty() ? d.typeId : d.uuid) + ": " + s.error().message,
                       s.error().err, "stop the VM using it, then run again");
    }
  }
  return first;
}

// Creates again every vGPU device the run removed (same UUID, same type).
Status recreateVgpus(Kernel& k, const Journal& jr) {
  Status first;
  auto live = readVgpuDevices(k.host, liveParents(k.host, jr.vgpuGpus));
  for (const auto& o : jr.vgpus) {
    bool there = false;
    for (const auto& d : live) there = there || sameVgpu(o, d);
    if (there) continue;
    Status s = o.iface == VgpuInterface::kMdev
                   ? k.host.writeAttr(hostPath(mdevTypePath(o.parent, o.typeId), "create"), o.uuid)
                   : k.host.writeAttr(perVfPath(o.parent, "current_vgpu_type"), o.typeId);
    if (!s && first.ok()) {
      first =
          sysError(o.parent.str() + ": cannot create vGPU " + (o.uuid.empty() ? o.typeId : o.uuid) +
                       " again: " + s.error().message,
                   s.error().err, "create it by hand, or run 'hostprep prepare --mode vm-vgpu'");
    }
  }
  return first;
}

}  // namespace hostprep

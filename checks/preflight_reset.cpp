#include "checks/preflight_reset.hpp"

#include <algorithm>
#include <utility>

#include "checks/preflight_cmdline.hpp"
#include "drivers/common/text.hpp"
#include "drivers/model/reset.hpp"

namespace hostprep {
namespace {

// What goes with `f` when it leaves a VM: the members of its IOMMU group that prepare moves (a
// VM takes a group whole; a foreign device in it is no target, and prepare refuses the group),
// or `f` alone where the snapshot shows no group.
std::vector<Bdf> movingWith(const Snapshot& s, const Selection& sel, const PciFunction& f) {
  std::vector<Bdf> out;
  if (f.iommuGroup) {
    for (const PciFunction* m : s.groupMembers(*f.iommuGroup)) {
      if (sel.find(m->bdf)) out.push_back(m->bdf);
    }
  }
  if (std::find(out.begin(), out.end(), f.bdf) == out.end()) out.push_back(f.bdf);
  return out;
}

// "flr bus", "bus reset through 0000:00:01.0"; a kernel without reset_method (before Linux 5.15)
// shows only that `reset` is there.
std::string wayText(const ResetOption& o, const PciFunction& f) {
  if (o.way == ResetWay::kFunction && !f.resetMethods)
    return "reset (no reset_method before Linux 5.15: the kernel picks the method)";
  return o.describe();
}

void addUnique(std::vector<std::string>& v, const std::string& s) {
  if (std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
}

// What would give the functions without a reset method a way to be reset, bus by bus: a bridge
// above the bus that offers reset_subordinate, and a bus that carries nothing a bus reset must not
// touch.
class Remedies {
 public:
  void add(const Snapshot& s, const PciFunction& f, const std::vector<Bdf>& moving) {
    const BusId bus = busOf(f.bdf);
    std::vector<std::string> others;
    auto moves = [&](const Bdf& b) {
      return std::find(moving.begin(), moving.end(), b) != moving.end();
    };
    for (const PciFunction* o : functionsOn(s, bus)) {
      if (o->physfn && moves(*o->physfn)) continue;  // the GPU's own VFs: nothing to move
      if (!moves(o->bdf) || isBridge(o->classCode) || o->iommuGroup != f.iommuGroup)
        others.push_back(o->bdf.str());
    }
    const PciFunction* bridge = bridgeOf(s, bus);
    if (!bridge) {
      addUnique(rootBuses_, bus.str());
    } else if (!bridge->resetSubordinate) {
      addUnique(oldKernelBuses_, bus.str());
      addUnique(oldKernelBridges_, bridge->bdf.str());
    }
    if (!others.empty()) {
      addUnique(shared_, "keep bus " + bus.str() + " to the GPU's own functions: move " +
                             join(others, ", ") + " (or the GPU) to another slot");
    }
  }
  std::vector<std::string> list() const {
    std::vector<std::string> out;
    if (rootBuses_.size() == 1) {
      out.push_back(
          "put the GPU behind a PCIe root port or switch port that offers reset_subordinate "
          "(Linux 6.13, 6.12.5, 6.1.120): sysfs shows no bridge above bus " +
          rootBuses_.front());
    } else if (!rootBuses_.empty()) {
      out.push_back(
          "put the GPUs behind PCIe root ports or switch ports that offer reset_subordinate "
          "(Linux 6.13, 6.12.5, 6.1.120): sysfs shows no bridge above buses " +
          join(rootBuses_, ", "));
    }
    if (!oldKernelBuses_.empty()) {
      const bool one = oldKernelBuses_.size() == 1;
      out.push_back(
          "run a kernel that offers reset_subordinate (Linux 6.13, 6.12.5, 6.1.120 or later) so "
          "that " +
          std::string(one ? "bus " : "buses ") + join(oldKernelBuses_, ", ") + " can be reset " +
          (one ? "through " : "through their bridges ") + join(oldKernelBridges_, ", "));
    }
    out.insert(out.end(), shared_.begin(), shared_.end());
    return out;
  }

 private:
  std::vector<std::string> rootBuses_, oldKernelBuses_, oldKernelBridges_, shared_;
};

// Functions with the same text, in order of first appearance: "0000:3b:00.0, 0000:3b:00.1: bus
// reset through 0000:00:01.0".
class Grouped {
 public:
  void add(const std::string& text, const Bdf& b) {
    auto it =
        std::find_if(items_.begin(), items_.end(), [&](const auto& i) { return i.first == text; });
    if (it == items_.end()) {
      items_.emplace_back(text, std::vector<std::string>{b.str()});
    } else {
      it->second.push_back(b.str());
    }
  }
  bool empty() const { return items_.empty(); }
  std::string str() const {
    std::vector<std::string> parts;
    for (const auto& [text, bdfs] : items_) parts.push_back(join(bdfs, ", ") + ": " + text);
    return join(parts, "; ");
  }

 private:
  std::vector<std::pair<std::string, std::vector<std::string>>> items_;
};

}  // namespace

CheckResult checkReset(const PlatformFacts& p, const Snapshot* s, const Selection* sel, Mode mode) {
  const char* id = "gpu.reset";
  if (!vmMode(mode)) return skipForMode(id, mode, "no VM hands a GPU back");
  if (!s || !sel || sel->gpus().empty())
    return makeCheck(id, CheckStatus::kSkip, "no GPU selected (see gpu.present)");

  Grouped ways, none;
  Remedies missing;
  std::vector<std::string> d3cold, inD3cold;
  for (const auto& t : sel->targets) {
    if (t.role == Role::kVf) continue;
    const PciFunction* f = s->find(t.bdf);
    if (!f) continue;
    const std::vector<Bdf> moving = movingWith(*s, *sel, *f);
    const ResetOption o = resetOptionOf(*s, *f, moving);
    if (o.way == ResetWay::kNone) {
      none.add(o.why, f->bdf);
      missing.add(*s, *f, moving);
    } else {
      ways.add(wayText(o, *f), f->bdf);
    }
    if (t.role == Role::kGpu && f->d3coldAllowed == true) {
      d3cold.push_back(f->bdf.str());
      if (f->powerState == "D3cold") inD3cold.push_back(f->bdf.str());
    }
  }

  std::vector<std::string> parts, remedies = missing.list();
  if (!none.empty())
    remedies.push_back("otherwise plan a reboot of the node whenever it leaves VM mode");
  if (!none.empty()) {
    parts.push_back(
        "no way to reset " + none.str() +
        ": a GPU that a VM leaves in a bad state goes back to its host driver unreset, whose "
        "probe can then fail until the host reboots (gnif/vendor-reset issue 38, lxc/incus issue "
        "30)");
  }
  if (!ways.empty()) {
    parts.push_back((none.empty() ? "prepare resets each on its way back from a VM: "
                                  : "reset on the way back: ") +
                    ways.str());
  }

  // vfio-pci's idle power management: D3 for an idle, unused device unless disable_idle_d3
  // (drivers/vfio/pci/vfio_pci.c: "Disable using the PCI D3 low power state for idle, unused
  // devices"); D3cold where d3cold_allowed is 1 and the platform can cut the slot's power.
  const bool idleD0 = p.vfioPciDisableIdleD3 && paramTruthy(*p.vfioPciDisableIdleD3);
  bool d3Warn = false;
  if (!d3cold.empty() && !idleD0) {
    const std::string param = p.vfioPciDisableIdleD3
                                  ? "vfio-pci's disable_idle_d3 is " + *p.vfioPciDisableIdleD3
                                  : "vfio-pci's disable_idle_d3 defaults to N";
    std::string note =
        "d3cold_allowed is 1 on " + join(d3cold, ", ") + " and " + param +
        ": vfio-pci puts an idle GPU in a D3 low power state (drivers/vfio/pci/vfio_pci.c, "
        "disable_idle_d3: \"Disable using the PCI D3 low power state for idle, unused devices\"), "
        "D3cold where the platform can cut the slot's power, and a GPU that does not come back "
        "from D3cold reads all ones until the host reboots (\"Unable to change power state from "
        "D3cold to D0, device inaccessible\": bryansteiner/gpu-passthrough-tutorial issue 39, "
        "gnif/vendor-reset issue 76)";
    if (!inD3cold.empty()) {
      d3Warn = true;
      note += "; " + join(inD3cold, ", ") + (inD3cold.size() == 1 ? " is" : " are") +
              " in D3cold now (power_state)";
      remedies.push_back(
          "keep idle GPUs on vfio-pci in D0: 'options vfio-pci disable_idle_d3=1' in "
          "/etc/modprobe.d/ (at once: echo Y > /sys/module/vfio_pci/parameters/disable_idle_d3), "
          "or echo 0 > /sys/bus/pci/devices/<BDF>/d3cold_allowed at every boot");
    }
    parts.push_back(note);
  }

  if (none.empty() && !d3Warn) return makeCheck(id, CheckStatus::kInfo, join(parts, "; "));
  return makeCheck(id, CheckStatus::kWarn, join(parts, "; "), join(remedies, "; "));
}

}  // namespace hostprep

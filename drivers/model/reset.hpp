// How a PCI function can be reset on its way back from a VM, judged on a snapshot (pure).
//
// A GPU that a VM had is handed back to its host driver in whatever state the guest left it: a
// crashed guest can leave it unable to initialise, which the host driver's probe then reports as
// a dead GPU. libvirt resets a device before it returns it to its host driver
// (src/util/virpci.c virPCIDeviceReset: FLR, then PM reset, then a secondary bus reset); hostprep
// does the same through the kernel's own interfaces (Documentation/ABI/testing/sysfs-bus-pci):
// a function with a reset method is reset through its `reset` file; the functions of a GPU that
// share a bus with nothing else, none of which the kernel can reset alone, are reset together
// through their bridge's `reset_subordinate`. The kernel's own bus method (drivers/pci/pci.c
// pci_parent_bus_reset) works only for a function alone on its bus, though `reset_method` lists
// it for function 0 of a multi-function device too (probed before its other functions were on
// the bus; its `reset` then fails with ENOTTY: Debian's 6.1 and 6.12, tests/vm/README.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "drivers/model/snapshot.hpp"

namespace hostprep {

// A bus, as (domain, bus number): "0000:01".
struct BusId {
  uint32_t domain = 0;
  uint8_t bus = 0;
  auto operator<=>(const BusId&) const = default;
  std::string str() const;
};
inline BusId busOf(const Bdf& b) { return {b.domain, b.bus}; }

// The bridge whose secondary bus is `bus` (secondary_bus_number), if the snapshot shows one.
const PciFunction* bridgeOf(const Snapshot& s, const BusId& bus);
// Every function on a bus, in BDF order.
std::vector<const PciFunction*> functionsOn(const Snapshot& s, const BusId& bus);

enum class ResetWay {
  kFunction,  // the function's own `reset` (the kernel picks among reset_method)
  kBus,       // its bridge's reset_subordinate: every function on the bus at once
  kNone,
};

struct ResetOption {
  ResetWay way = ResetWay::kNone;
  std::optional<Bdf> bridge;         // kBus: the bridge to write
  std::vector<std::string> methods;  // kFunction: reset_method's list where the kernel has it
  std::string why;                   // kNone: what is missing, for people
  std::string describe() const;      // "flr bus", "bus reset through 0000:00:1c.0", "none: ..."
};

// The advice for a function whose config space reads 0xffff (PciFunction::responsive): the plan
// refuses it, the executor checks it again before a probe and after a reset.
std::string notAnsweringAdvice(const Bdf& b);

// How `f` can be reset when the functions `moving` (the whole set a run moves together, `f`
// among them) are all off their drivers: its own method first (not "bus" or "cxl_bus" alone while
// other functions share its bus); else a bus reset, when its bridge
// offers reset_subordinate and every function on the bus is one of `moving`, is no bridge itself
// (a bus reset resets everything below it too) and is in `f`'s IOMMU group.
ResetOption resetOptionOf(const Snapshot& s, const PciFunction& f, const std::vector<Bdf>& moving);

}  // namespace hostprep

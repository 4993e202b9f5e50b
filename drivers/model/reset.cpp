#include "drivers/model/reset.hpp"

#include <algorithm>
#include <cstdio>

#include "drivers/common/text.hpp"

namespace hostprep {

std::string BusId::str() const {
  char buf[16];
  (void)std::snprintf(buf, sizeof buf, "%04x:%02x", domain, bus);
  return buf;
}

const PciFunction* bridgeOf(const Snapshot& s, const BusId& bus) {
  for (const auto& f : s.pci) {
    if (f.bdf.domain == bus.domain && f.secondaryBus && *f.secondaryBus == bus.bus &&
        classPrefix(f.classCode) == classPrefix(pci_class::kPciBridge))
      return &f;
  }
  return nullptr;
}

std::vector<const PciFunction*> functionsOn(const Snapshot& s, const BusId& bus) {
  std::vector<const PciFunction*> out;
  for (const auto& f : s.pci) {
    if (busOf(f.bdf) == bus) out.push_back(&f);
  }
  return out;
}

std::string ResetOption::describe() const {
  switch (way) {
    case ResetWay::kFunction:
      return methods.empty() ? "the kernel's reset" : join(methods, " ");
    case ResetWay::kBus:
      return "bus reset through " + (bridge ? bridge->str() : std::string("?"));
    case ResetWay::kNone:
      return "none: " + why;
  }
  return why;
}

ResetOption resetOptionOf(const Snapshot& s, const PciFunction& f, const std::vector<Bdf>& moving) {
  ResetOption o;
  if (f.resetFile) {
    o.way = ResetWay::kFunction;
    o.methods = f.resetMethods.value_or(std::vector<std::string>{});
    return o;
  }
  const BusId bus = busOf(f.bdf);
  const PciFunction* bridge = bridgeOf(s, bus);
  if (!bridge) {
    o.why = "no reset method, and no bridge above bus " + bus.str() +
            (f.bdf.bus == 0 ? " (a root bus cannot be reset)" : "");
    return o;
  }
  if (!bridge->resetSubordinate) {
    o.why = "no reset method, and the kernel offers no bus reset through " + bridge->bdf.str() +
            " (reset_subordinate: Linux 6.13, 6.12.5, 6.1.120)";
    return o;
  }
  for (const PciFunction* other : functionsOn(s, bus)) {
    const bool moves = std::find(moving.begin(), moving.end(), other->bdf) != moving.end();
    if (!moves || isBridge(other->classCode) || other->iommuGroup != f.iommuGroup ||
        !f.iommuGroup) {
      o.why = "no reset method, and bus " + bus.str() + " also carries " + other->bdf.str() +
              ", which a bus reset would reset too";
      return o;
    }
  }
  o.way = ResetWay::kBus;
  o.bridge = bridge->bdf;
  return o;
}

}  // namespace hostprep

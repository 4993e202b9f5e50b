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

std::string notAnsweringAdvice(const Bdf& b) {
  return "run 'hostprep recover --devices " + b.str() +
         "' (a reset or a remove and rescan); if that fails, reboot the host";
}

ResetOption resetOptionOf(const Snapshot& s, const PciFunction& f, const std::vector<Bdf>& moving) {
  ResetOption o;
  const BusId bus = busOf(f.bdf);
  const auto onBus = functionsOn(s, bus);
  const bool shared = std::any_of(onBus.begin(), onBus.end(),
                                  [&](const PciFunction* x) { return x->bdf != f.bdf; });
  // The kernel's bus methods reset the function's whole bus, and work only while it is alone
  // there (pci_parent_bus_reset checks at the reset): listed beside other functions (function 0
  // of a multi-function device, whose methods the kernel probed before its other functions were
  // on the bus), they fail with ENOTTY, so they are no method of its own.
  std::string listed;
  if (f.resetFile) {
    const auto methods = f.resetMethods.value_or(std::vector<std::string>{});
    const bool own = !f.resetMethods || !shared ||
                     std::any_of(methods.begin(), methods.end(),
                                 [](const std::string& m) { return m != "bus" && m != "cxl_bus"; });
    if (own) {
      o.way = ResetWay::kFunction;
      o.methods = methods;
      return o;
    }
    listed = " of its own (the kernel lists '" + join(methods, " ") +
             "', which needs it alone on its bus)";
  }
  const std::string none = "no reset method" + listed;
  const PciFunction* bridge = bridgeOf(s, bus);
  if (!bridge) {
    o.why = none + ", and no bridge above bus " + bus.str() +
            (f.bdf.bus == 0 ? " (a root bus cannot be reset)" : "");
    return o;
  }
  if (!bridge->resetSubordinate) {
    o.why = none + ", and the kernel offers no bus reset through " + bridge->bdf.str() +
            " (reset_subordinate: Linux 6.13, 6.12.5, 6.1.120)";
    return o;
  }
  for (const PciFunction* other : onBus) {
    const bool moves = std::find(moving.begin(), moving.end(), other->bdf) != moving.end();
    if (!moves || isBridge(other->classCode) || other->iommuGroup != f.iommuGroup ||
        !f.iommuGroup) {
      o.why = none + ", and bus " + bus.str() + " also carries " + other->bdf.str() +
              ", which a bus reset would reset too";
      return o;
    }
  }
  o.way = ResetWay::kBus;
  o.bridge = bridge->bdf;
  return o;
}

}  // namespace hostprep

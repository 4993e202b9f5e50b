// hostprep recover: bring back a GPU whose functions no longer answer (config space reads
// 0xffff: fallen off the bus, stuck in D3cold after a VM) or that sit without a driver after a
// probe failed. The ladder, each rung tried only when the one before did not make every function
// answer: unbind what is still bound; reset each function that has a reset method (its `reset`
// file); reset the bus through its bridge's `reset_subordinate`, only when every function on the
// bus is the GPU's; remove the functions and rescan their bus (the kernel enumerates them again
// as new devices: pci_rescan_bus). Documentation/ABI/testing/sysfs-bus-pci for each file.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "drivers/model/selection.hpp"
#include "drivers/model/snapshot.hpp"
#include "drivers/switch/executor.hpp"

namespace hostprep {

// What one recover run works on: the named GPUs' functions (each GPU with every function of its
// slot), the bridge above their bus and the other functions on that bus.
struct RecoverUnit {
  std::vector<Bdf> gpus;
  std::vector<Bdf> functions;    // every function of the GPUs' slots, in BDF order
  std::optional<Bdf> bridge;     // the bridge above their bus, if the host shows one
  bool bridgeResets = false;     // it offers reset_subordinate
  std::vector<Bdf> othersOnBus;  // functions on the bus that are not the GPUs': no bus reset
  // The functions with a reset method of their own (reset.hpp resetOptionOf: not the kernel's
  // bus method listed for a function that shares its bus, whose reset fails with ENOTTY).
  std::vector<Bdf> ownReset;
};

// The unit of `gpus` (BDFs the selection accepts as GPUs: the caller checked). Every GPU must sit
// on one bus (exit 2 otherwise: recover them one bus at a time).
Result<RecoverUnit> recoverUnit(const Snapshot& s, const std::vector<Bdf>& gpus);

// The functions of the GPUs' slots that are not theirs: neither a GPU the selection takes, nor of
// a GPU's vendor, nor a companion's class (pci.hpp isCompanionClass), as selectDevices judges a
// group. Recovering would unbind, reset and remove them with the GPU: the command refuses.
std::vector<Bdf> notTheGpus(const Snapshot& s, const RecoverUnit& u, const SelectionOptions& opt);

// The rungs the run would try, for people (--dry-run): "unbind 0000:3b:00.1 from vfio-pci",
// "reset 0000:3b:00.0 (flr)", "bus reset through 0000:00:01.0", "not a bus reset: bus 0000:3b
// also carries 0000:3b:00.2", "remove 0000:3b:00.0, 0000:3b:00.1 and rescan bus 0000:3b".
std::vector<std::string> recoverLadder(const Snapshot& s, const RecoverUnit& u);

struct RecoverOutcome {
  bool answers = false;            // every function answers at the end
  std::string by;                  // the rung that did it ("a function reset", ...; "" if none)
  std::vector<std::string> tried;  // what was done, in order, with what it gave
};

// Climbs the ladder on the live host. Once every function answers, the functions it unbound that
// are not the GPUs are probed again (drivers_probe: the kernel's driver, or their override), as
// a rescan's are; the GPUs' driver is the caller's (the mode's), or, with probeGpus (the caller
// has no mode), every GPU still without a driver is probed too. A write that fails or does not
// return in time (opt.unbindTimeout) is an error naming the function; a ladder that ends with a
// function still not answering is an outcome with answers = false (the caller says: reboot the
// host). Before the functions are removed, run/hostprep/rescan names their bus
// (resolveInterruptedRescan), so a run killed between the remove and the rescan loses no device.
Result<RecoverOutcome> climbRecoverLadder(Kernel& k, const RecoverUnit& u, const ApplyOptions& opt,
                                          bool probeGpus = false);

// A recover that died between removing functions and rescanning: rescans the bus it named (the
// whole PCI tree when its bridge is gone) and removes the mark. Every run that takes the lock
// calls it (prepare, the agent, recover). Returns whether there was one.
Result<bool> resolveInterruptedRescan(Host& host);

}  // namespace hostprep

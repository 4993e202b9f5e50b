// The way back: every device a run touched put back on the driver and override it had, with its
// VF count and vGPU devices, after a step failed (the run's own rollback, executor.cpp applyPlan)
// or from the journal of a run that died (recoverJournal). A write that does not return in time
// is journalled as pending, and the device is left alone until the kernel lets it go.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "drivers/common/error.hpp"
#include "drivers/common/pci.hpp"
#include "drivers/model/journal.hpp"
#include "drivers/model/plan.hpp"
#include "drivers/switch/executor.hpp"

namespace hostprep {

// Writes a rollback left running in the kernel (they timed out): unbinds (device, driver),
// binds (device) and sriov_numvfs writes (PF).
struct PendingWrites {
  std::map<Bdf, std::string> unbinds;
  std::set<Bdf> probes;
  std::set<Bdf> numVfs;
};

// Rolls back everything the journal covers, in the order that keeps each write legal: new vGPU
// devices go; VFs the run enabled go (vfio refuses a PF with VFs); drivers go back; VFs the run
// disabled come back; then the vGPU devices it removed. Returns the first error, if any.
// `inRun`: the rollback of the run that wrote the journal, which knows its timed-out writes.
// A write that times out in the rollback itself is added to `pending`.
Status rollBack(Kernel& k, const Journal& jr, const std::vector<JournalDevice>& devices,
                const ApplyOptions& opt, bool inRun, PendingWrites& pending);

// After a rollback whose writes timed out: the journal says so, so that the next run and the
// status read around those devices (their device lock stays taken until the kernel is done).
void markPending(Host& host, Journal jr, const PendingWrites& pending);

// Moves one device to a driver and override, however it is bound now (used by rollback and
// recovery; idempotent). When its unbind times out, `unbindPending` (if given) names the driver
// whose remove() still runs; when its bind times out, `probePending` (if given) is set: the
// device lock stays taken, and a journal must say so.
Status restoreDevice(Kernel& k, const Bdf& bdf, const DeviceState& want, const ApplyOptions& opt,
                     std::optional<std::string>* unbindPending = nullptr,
                     bool* probePending = nullptr);

}  // namespace hostprep

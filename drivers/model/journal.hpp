// The write-ahead journal of a prepare run, as every reader reads it (the executor writes it, and
// takes the lock that serializes runs: drivers/switch/run_state.hpp). The journal lives
// in <root>/run/hostprep/journal.json: written before the first step (and again when an unbind is
// left pending), removed when the run ends cleanly. A journal found at start means a run died
// mid-way; it holds the original driver and override of every device the plan may touch (and
// the VF counts and vGPU devices), which is all the next run needs to put the host back.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "drivers/model/plan.hpp"
#include "drivers/seam/host.hpp"

namespace hostprep {

inline constexpr std::string_view kJournalPath = "run/hostprep/journal.json";

struct JournalDevice {
  Bdf bdf;
  DeviceState original;
  // Set when an unbind from this driver did not return in time: the kernel may still be in the
  // driver's remove(), so the device must not be touched until it has let go.
  std::optional<std::string> pendingUnbind;
  // Set when a bind or drivers_probe write to it did not return in time: a driver's probe() may
  // still run with the device lock taken.
  bool pendingProbe = false;
};

struct JournalSriov {
  Bdf pf;
  int numvfs = 0;  // sriov_numvfs before the run
  // Set when a write to its sriov_numvfs did not return in time: the kernel may still be
  // removing a VF (a VF driver's remove() waits for whoever holds the VF) with the PF's device
  // lock taken (sriov_numvfs_store), so neither the PF nor its VFs may be touched until it is done.
  bool pendingWrite = false;
  // The VFs enabled before the run, with the driver and override each had: a rollback that
  // enables the VFs again puts each one back (the kernel creates them anew, see VfState).
  std::vector<VfState> vfs;
};

// Version 2 adds the vGPU state; version 1 journals (no vGPU keys) still parse.
inline constexpr int kJournalVersion = 2;

struct Journal {
  Mode mode = Mode::kContainer;
  int pid = 0;
  std::vector<JournalDevice> devices;  // every device the plan may touch, in plan order
  std::vector<Step> steps;
  size_t next = 0;                  // 0, or the step whose unbind was left pending (for the reader)
  std::vector<JournalSriov> sriov;  // PFs whose VF count the plan changes, with the original
  std::vector<Bdf> vgpuGpus;        // GPUs whose vGPU devices (on the PF and its VFs) it covers
  std::vector<VgpuDevice> vgpus;    // the vGPU devices on those before the run
};

std::string toJson(const Journal& j);
Result<Journal> parseJournal(std::string_view text);

// The journal a run left, nullopt when there is none (its writes: drivers/switch/run_state.hpp).
Result<std::optional<Journal>> readJournal(const Host& host);

// Devices whose device lock a write the journal records as pending (it timed out) still holds:
// an unbind still running (unbindStillPending), a probe still running (probeStillPending), and a
// PF whose sriov_numvfs write is still running (numVfsWriteStillPending) with its VFs. Reading
// their driver_override or sriov_numvfs would block. Empty without a journal or with an unreadable
// one.
std::set<Bdf> lockedByPendingWrites(const Host& host);

}  // namespace hostprep

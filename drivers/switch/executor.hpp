// The only part of hostprep that writes to the kernel. It applies a plan step by step, journals
// each step before it runs, verifies what the kernel did, and on any failure puts every touched
// device back on its original driver and override.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "drivers/model/plan.hpp"
#include "drivers/seam/holders.hpp"
#include "drivers/seam/host.hpp"
#include "drivers/seam/kmod.hpp"
#include "drivers/switch/run_state.hpp"

namespace hostprep {

// The host as the executor sees it: the root-prefixed seam plus the module loader.
struct Kernel {
  Host& host;
  ModuleLoader& modules;
};

struct ApplyOptions {
  std::chrono::milliseconds unbindTimeout{30'000};
  std::string hostDriver = "nvidia";
  std::vector<std::string> holderNodes{"/dev/nvidia*"};  // holders block unbinding hostDriver
  // Move devices of different IOMMU groups at the same time (one thread per group).
  bool parallel = true;
  // Called once per device when its last step is verified (or when it fails); never
  // concurrently.
  std::function<void(const DeviceMove&, const Status&)> onDevice;
  // Called after step k is done (never concurrently); returning false abandons the run on the spot
  // with no rollback, exactly like a crash (tests use it; test builds also wire it to SIGKILL).
  std::function<bool(size_t k)> afterStep;
  // Starts a lane's thread; unset, std::thread. Tests make it throw std::system_error as
  // pthread_create's EAGAIN would under a pids limit (the lane then runs on the caller's thread).
  std::function<std::thread(std::function<void()>)> startThread;
};

// Processes that would block the plan's unbinds: holders of the host driver's nodes for an
// unbind from it, holders of /dev/vfio/<group> for an unbind from vfio.
std::vector<Holder> planHolders(const Host& host, const Plan& plan, const ApplyOptions& opt);
// The same among descriptors already found (openDeviceNodes, scanned while the plan was made).
std::vector<Holder> planHolders(const Host& host, const Plan& plan, const ApplyOptions& opt,
                                const std::vector<OpenNode>& open);

struct ApplyResult {
  size_t stepsRun = 0;
  bool rolledBack = false;
  // Where the time went (for --log-level debug): each step's write and verification, by plan
  // index, and the journal writes that precede them, in total.
  std::map<size_t, double> stepMs;
  double journalMs = 0;
  size_t journalWrites = 0;
};

// Applies the plan. On failure the error names the device, the step and errno, and every
// touched device is back where it began (or the error says which one could not be restored).
Result<ApplyResult> applyPlan(Kernel& k, const Plan& plan, const ApplyOptions& opt);

// Resolves a journal left by a run that died: puts every device it lists back on its original
// driver and override, then removes the journal. Returns the number of devices restored, or
// nothing when there was no journal.
Result<std::optional<size_t>> recoverJournal(Kernel& k, const ApplyOptions& opt);

}  // namespace hostprep

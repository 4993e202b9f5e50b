// The executor's SR-IOV and vGPU steps, and the vGPU half of its rollback (run_step.cpp and
// rollback.cpp run them; nothing else should). Each step verifies what the kernel did, as the
// driver moves do.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "drivers/model/journal.hpp"
#include "drivers/model/plan.hpp"
#include "drivers/switch/executor.hpp"

namespace hostprep {

// A step's failure: the step named before the cause, advice replaced when given, exit kFailed.
Error stepError(const Step& st, const Error& cause, std::string advice = {});
// Waits (briefly) for a condition the kernel settles asynchronously, e.g. a /dev node.
bool waitFor(const std::function<bool()>& cond, std::chrono::milliseconds limit);

// sriov_numvfs: writes the step's count and waits until the kernel shows that many VFs.
Status setNumVfs(Host& h, const Step& st, const ApplyOptions& opt);
// Creates the step's vGPU device (an mdev, or the per-VF current_vgpu_type) and waits for it.
Status createVgpu(Host& h, const Step& st);
// Removes the step's vGPU device and waits until it is gone.
Status removeVgpu(Host& h, const Step& st);

// The parents (PFs and their VFs) of the journal's GPUs as they are now.
std::vector<Bdf> liveParents(const Host& h, const std::vector<Bdf>& gpus);
// Rollback: removes the vGPU devices the run created (those not in the journal's list).
Status removeNewVgpus(Kernel& k, const Journal& jr);
// Rollback: re-creates the vGPU devices the journal lists that are gone.
Status recreateVgpus(Kernel& k, const Journal& jr);

}  // namespace hostprep

// One step of a plan against the kernel: its write, then the check of what the kernel did, so
// that a step that returns ok is done (executor.cpp runs the steps, in plan order or in lanes;
// the SR-IOV and vGPU steps are vgpu_steps.hpp's).
#pragma once

#include "drivers/common/error.hpp"
#include "drivers/common/pci.hpp"
#include "drivers/model/plan.hpp"
#include "drivers/seam/host.hpp"
#include "drivers/switch/executor.hpp"

namespace hostprep {

// The driver and override of a device as the kernel shows them now: its `driver` link and its
// driver_override, the two attributes a step changes (not the whole function, which is a dozen
// reads more and ran after every override write and every probe). A device that is gone is an
// error, not a device without a driver: it must not verify as having left vfio.
Result<DeviceState> readState(const Host& host, const Bdf& bdf);

// Runs one step and verifies it. A failure names the step, the cause and the advice (stepError);
// an unbind, probe or reset the kernel has not answered in time fails with ETIMEDOUT, touching the
// device no further.
Status runStep(Kernel& k, const Step& st, const ApplyOptions& opt);

}  // namespace hostprep

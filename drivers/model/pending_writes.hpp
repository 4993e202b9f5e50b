// Writes still running in the kernel: an unbind, a probe or an sriov_numvfs write that did not
// return in time holds its device's lock until the kernel is done, and anything that takes the
// lock (a read of driver_override, sriov_numvfs, uevent on some kernels) would wait as long.
// These ask, with timed reads, whether such a write is still running, so that the snapshot, the
// status and the next run read and write around the device instead of blocking on it.
#pragma once

#include <string_view>
#include <vector>

#include "drivers/common/pci.hpp"
#include "drivers/seam/host.hpp"

namespace hostprep {

// Is an unbind of this device from `driver` still running in the kernel? The kernel removes the
// `driver` link before it calls the driver's remove(), so the link cannot say; a timed read of the
// device's uevent can: it does not answer (6.1 takes the device lock the unbind holds), or it
// says DRIVER=<driver> (6.12: dev->driver is cleared only after remove() returns). Without a
// uevent file, a timed read of driver_override (device lock on 6.1) decides. A blocked read leaves
// one child process waiting in the kernel until remove() returns.
bool unbindStillPending(const Host& host, const Bdf& bdf, std::string_view driver);

// Is a probe of this device (a bind or drivers_probe write that did not return) still running?
// A probe holds the device lock (drivers/base/dd.c __driver_attach, __device_attach), so a timed
// read of what waits for it does not answer: the device's uevent on 6.1 (driver_override where
// there is no uevent file), a PF's sriov_numvfs on any kernel since 5.15. On 6.12 neither uevent
// nor driver_override waits, so only a PF tells; a read of the others does not wait there, and a
// later write to them is timed.
bool probeStillPending(const Host& host, const Bdf& bdf);

// Is a write to this PF's sriov_numvfs still running in the kernel? Its show() takes the device
// lock the write holds (drivers/pci/iov.c sriov_numvfs_show, Linux 5.15+), so a timed read of it
// that does not answer means yes. On older kernels the read answers, and the next write (timed)
// finds out. A blocked read leaves one child process waiting in the kernel until it is done.
bool numVfsWriteStillPending(const Host& host, const Bdf& pf);

// Every address a VF of this PF can have: sriov_totalvfs of them, placed by sriov_offset and
// sriov_stride (none of which takes the device lock), and whatever its virtfn links name. Not the
// links alone: pci_iov_remove_virtfn() removes a VF's virtfn and physfn links before the VF
// itself, so the VF a disable waits on is linked to its PF no more.
std::vector<Bdf> vfSlots(const Host& host, const Bdf& pf);

}  // namespace hostprep

// Kernel device events: the only door to libudev (udev.cpp is the one file that includes it).
// The agent waits on an EventSource's descriptor in its poll loop and drains it when readable;
// tests hand it a fake source fed through a pipe.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "drivers/common/error.hpp"

namespace hostprep {

struct DeviceEvent {
  std::string action;     // add, remove, bind, unbind, change, move
  std::string subsystem;  // pci, vfio, mdev, module
  std::string sysname;    // "0000:3b:00.0", a UUID, "vfio0", "vfio_pci"
  std::string driver;     // for bind: the driver; may be empty
};

// The action of a made-up event a source reports when the kernel dropped events (the socket
// overflowed): whoever hears it must read everything again.
inline constexpr std::string_view kEventsLost = "events-lost";

// The subsystems whose events can change the status document. A module's "add" event comes once
// its init has run (kernel/module/main.c do_init_module, since Linux 5.11): after the drivers it
// registers, the devices they bound and the files they made (/dev/iommu, mdev types); "remove"
// once it is gone. Either is read as "anything may have moved".
inline constexpr std::string_view kWatchedSubsystems[] = {"pci", "vfio", "mdev", "module"};
bool isWatchedEvent(const DeviceEvent& e);

class EventSource {
 public:
  virtual ~EventSource() = default;
  // Readable when events are waiting.
  virtual int fd() const = 0;
  // Every event waiting now (never blocks); events of other subsystems are dropped. Lost events
  // show as one with action kEventsLost.
  virtual std::vector<DeviceEvent> drain() = 0;
};

// A netlink monitor of the kernel's own uevents (udev_monitor_new_from_netlink(.., "kernel")):
// it needs no udevd, so it works the same on a systemd host, in a busybox guest and in a pod
// with the host's network namespace. Filtered to kWatchedSubsystems.
Result<std::unique_ptr<EventSource>> openKernelEventMonitor();

}  // namespace hostprep

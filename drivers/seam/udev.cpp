#include "drivers/seam/udev.hpp"

#include <libudev.h>

#include <algorithm>
#include <cerrno>

#include "drivers/seam/c_handle.hpp"

namespace hostprep {

bool isWatchedEvent(const DeviceEvent& e) {
  return std::find(std::begin(kWatchedSubsystems), std::end(kWatchedSubsystems), e.subsystem) !=
         std::end(kWatchedSubsystems);
}

namespace {

using UdevPtr = CHandle<udev, udev_unref>;
using MonitorPtr = CHandle<udev_monitor, udev_monitor_unref>;
using DevicePtr = CHandle<udev_device, udev_device_unref>;

std::string str(const char* s) { return s ? std::string(s) : std::string(); }

class KernelMonitor final : public EventSource {
 public:
  KernelMonitor(UdevPtr u, MonitorPtr m) : udev_(std::move(u)), mon_(std::move(m)) {}

  int fd() const override { return udev_monitor_get_fd(mon_.get()); }

  std::vector<DeviceEvent> drain() override {
    std::vector<DeviceEvent> out;
    // The socket is non-blocking: receive until it is empty. A NULL also means "filtered out",
    // or "overflowed" (ENOBUFS): events were lost, which the caller hears as kEventsLost.
    for (int i = 0; i < 4096; ++i) {
      errno = 0;
      DevicePtr d(udev_monitor_receive_device(mon_.get()));
      if (!d) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == 0) break;
        if (errno == ENOBUFS) out.push_back(DeviceEvent{std::string(kEventsLost), {}, {}, {}});
        continue;
      }
      DeviceEvent e{str(udev_device_get_action(d.get())), str(udev_device_get_subsystem(d.get())),
                    str(udev_device_get_sysname(d.get())), str(udev_device_get_driver(d.get()))};
      if (isWatchedEvent(e)) out.push_back(std::move(e));
    }
    return out;
  }

 private:
  UdevPtr udev_;
  MonitorPtr mon_;
};

}  // namespace

Result<std::unique_ptr<EventSource>> openKernelEventMonitor() {
  UdevPtr u(udev_new());
  if (!u) return sysError("udev: cannot create a context", errno);
  MonitorPtr m(udev_monitor_new_from_netlink(u.get(), "kernel"));
  if (!m) {
    return sysError("udev: cannot open the kernel uevent socket", errno,
                    "the agent needs AF_NETLINK (RestrictAddressFamilies) and the host's network "
                    "namespace (hostNetwork: true in a pod)");
  }
  for (auto s : kWatchedSubsystems) {
    udev_monitor_filter_add_match_subsystem_devtype(m.get(), std::string(s).c_str(), nullptr);
  }
  // A burst of events (SR-IOV enabling 16 VFs, a rollback) must not overflow the socket; the
  // larger buffer needs CAP_NET_ADMIN and is best effort.
  (void)udev_monitor_set_receive_buffer_size(m.get(), 4 * 1024 * 1024);
  int r = udev_monitor_enable_receiving(m.get());
  if (r < 0) return sysError("udev: cannot listen to kernel uevents", -r);
  return std::unique_ptr<EventSource>(new KernelMonitor(std::move(u), std::move(m)));
}

}  // namespace hostprep

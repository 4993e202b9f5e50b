// Notifications to the service manager (sd_notify(3): READY=1, STATUS=..., STOPPING=1).
#pragma once

#include <string>

namespace hostprep {

// Sends `message` with libsystemd's sd_notify when the service manager asked for notifications
// (NOTIFY_SOCKET is set); does nothing otherwise (a pod, a busybox guest, a terminal), and never
// fails the caller: a lost notification is systemd's timeout to report, not ours.
void notifyServiceManager(const std::string& message);

}  // namespace hostprep

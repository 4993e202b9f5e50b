#include "agent/service_notify.hpp"

#include <dlfcn.h>
#include <systemd/sd-daemon.h>

#include <cstdlib>

namespace hostprep {
namespace {

// libsystemd is opened with dlopen(3) on the first notification, and only under a service manager
// that set NOTIFY_SOCKET, not linked: only the agent notifies, and linking it made every command's
// start-up map and relocate libsystemd and what it needs (libgcrypt, libgpg-error, liblz4,
// libzstd, liblzma, libcap on Debian 12). The header gives the type; the function comes by name.
using SdNotify = decltype(&sd_notify);

SdNotify sdNotify() {
  static const SdNotify fn = []() -> SdNotify {
    void* handle = ::dlopen("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL);  // never closed
    if (!handle) return nullptr;
    return reinterpret_cast<SdNotify>(::dlsym(handle, "sd_notify"));
  }();
  return fn;
}

}  // namespace

void notifyServiceManager(const std::string& message) {
  const char* socket = std::getenv("NOTIFY_SOCKET");  // NOLINT(concurrency-mt-unsafe): read-only
  if (socket == nullptr || *socket == '\0') return;
  if (SdNotify fn = sdNotify()) (void)fn(0, message.c_str());
}

}  // namespace hostprep

#include "agent/service_notify.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace {

bool libsystemdMapped() {
  std::ifstream maps("/proc/self/maps");
  std::stringstream all;
  all << maps.rdbuf();
  return all.str().find("libsystemd.so") != std::string::npos;
}

}  // namespace

TEST_CASE("notifications reach NOTIFY_SOCKET, and without one libsystemd is never opened",
          "[agent][notify]") {
  // Without NOTIFY_SOCKET (a pod, a terminal): nothing is sent and libsystemd stays unmapped.
  ::unsetenv("NOTIFY_SOCKET");
  hostprep::notifyServiceManager("READY=1");
  CHECK_FALSE(libsystemdMapped());

  // Under a service manager: the message arrives on its datagram socket.
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("hostprep-notify-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "notify").string();
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  REQUIRE(path.size() < sizeof(addr.sun_path));
  path.copy(addr.sun_path, path.size());
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  ::setenv("NOTIFY_SOCKET", path.c_str(), 1);
  hostprep::notifyServiceManager("READY=1\nSTATUS=converged");
  ::unsetenv("NOTIFY_SOCKET");
  char buf[256] = {};
  const ssize_t n = ::recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
  ::close(fd);
  std::filesystem::remove_all(dir);
  REQUIRE(n > 0);
  CHECK(std::string(buf, static_cast<size_t>(n)) == "READY=1\nSTATUS=converged");
  CHECK(libsystemdMapped());
}

// The validators (drivers/common/validate.cpp): every name read from input or sysfs is checked
// before it becomes part of a path, and messages quote untrusted text safely.
#include "drivers/common/validate.hpp"

#include <catch2/catch.hpp>
#include <string>

using namespace hostprep;
using namespace std::string_literals;

TEST_CASE("path components: empty, too long, relative, '/' and control characters", "[names]") {
  CHECK(pathComponentProblem("vfio-pci").empty());
  CHECK(pathComponentProblem("") == "is empty");
  CHECK(pathComponentProblem(std::string(9, 'a'), 8) == "is longer than 8 bytes");
  CHECK(pathComponentProblem(".") == "is a relative directory");
  CHECK(pathComponentProblem("..") == "is a relative directory");
  CHECK(pathComponentProblem("a/b") == "contains '/'");
  CHECK(pathComponentProblem("a\0b"s) == "contains a NUL byte");
  CHECK(pathComponentProblem("a\nb") == "contains a control character");
  CHECK(pathComponentProblem("a\x7f") == "contains a control character");
  CHECK(isSafePathComponent("..a"));
}

TEST_CASE("host paths: no '..' component, no control character, at most 4095 bytes", "[names]") {
  CHECK(hostPathProblem("sys/bus/pci/devices/0000:3b:00.0/driver").empty());
  CHECK(hostPathProblem("/etc/hostprep/config.yaml").empty());
  CHECK(hostPathProblem("a/..b/c").empty());
  CHECK(hostPathProblem("sys/../../etc") == "contains a '..' component");
  CHECK(hostPathProblem("..") == "contains a '..' component");
  CHECK(hostPathProblem("sys\0x"s) == "contains a NUL byte");
  CHECK(hostPathProblem(std::string(4096, 'a')) == "is longer than 4095 bytes");
}

TEST_CASE("untrusted text is quoted printable and cut at 80 bytes", "[names]") {
  CHECK(quoteUntrusted("nvidia") == "nvidia");
  CHECK(quoteUntrusted("a\nb\\c\x01") == "a\\x0ab\\x5cc\\x01");
  CHECK(quoteUntrusted("\xff") == "\\xff");
  CHECK(quoteUntrusted(std::string(81, 'x')) == std::string(80, 'x') + "...");
}

TEST_CASE("driver names, path components and config paths say what is wrong and the fix",
          "[names]") {
  CHECK(checkDriverName("--host-driver", "nvidia"));
  auto d = checkDriverName("--host-driver", "../x");
  REQUIRE_FALSE(d);
  CHECK(d.error().describe() ==
        "--host-driver: '../x' is not a driver name: contains '/' (a driver or module name has "
        "letters, digits, '_' and '-' only, at most 64 characters)");
  CHECK(d.error().exit == Exit::kUsage);
  CHECK(checkDriverName("x", "nv.idia").error().message ==
        "x: 'nv.idia' is not a driver name: contains a character outside [A-Za-z0-9_-]");
  auto c = checkPathComponent("type", "..");
  REQUIRE_FALSE(c);
  CHECK(c.error().message == "type: '..' is not a safe name: is a relative directory");
  CHECK(checkConfigPath("status.path", "/run/hostprep/status.json"));
  CHECK(checkConfigPath("status.path", "").error().message ==
        "status.path: '' is not a usable path: is empty");
  CHECK(checkConfigPath("status.path", "/run/../etc/x").error().message ==
        "status.path: '/run/../etc/x' is not a usable path: contains a '..' component");
}

TEST_CASE("kernel releases that could leave lib/modules are not releases", "[names]") {
  CHECK(isValidKernelRelease("6.1.0-18-amd64"));
  CHECK(isValidKernelRelease("5.14.0-362.el9.x86_64+debug~1"));
  CHECK_FALSE(isValidKernelRelease(""));
  CHECK_FALSE(isValidKernelRelease(".."));
  CHECK_FALSE(isValidKernelRelease("6.1/../../etc"));
  CHECK_FALSE(isValidKernelRelease(std::string(65, '1')));
}

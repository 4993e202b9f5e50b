#include "drivers/holders.hpp"

#include <fnmatch.h>
#include <unistd.h>

#include "drivers/text.hpp"

namespace hostprep {

std::string Holder::describe() const {
  return "pid " + std::to_string(pid) + " (" + comm + ") holds " + node;
}

std::vector<Holder> findHolders(const Host& host, const std::vector<std::string>& globs) {
  std::vector<Holder> out;
  auto procs = host.list("proc");
  if (!procs) return out;
  const int self = static_cast<int>(::getpid());
  for (const auto& p : *procs) {
    auto pid = parseUnsigned(p);
    if (!pid || *pid > 0x7fffffff || static_cast<int>(*pid) == self) continue;
    const std::string fdDir = hostPath("proc", p, "fd");
    auto fds = host.list(fdDir);  // EACCES/ENOENT: the process is gone or not ours to see
    if (!fds) continue;
    for (const auto& fd : *fds) {
      auto target = host.readLink(hostPath(fdDir, fd));
      if (!target || !startsWith(*target, "/dev/")) continue;
      for (const auto& g : globs) {
        if (::fnmatch(g.c_str(), target->c_str(), FNM_PATHNAME) == 0) {
          std::string comm = readTrimmed(host, hostPath("proc", p, "comm")).value_or("?");
          out.push_back({static_cast<int>(*pid), comm, *target});
          break;
        }
      }
    }
  }
  return out;
}

}  // namespace hostprep

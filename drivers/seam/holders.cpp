#include "drivers/seam/holders.hpp"

#include <fnmatch.h>
#include <unistd.h>

#include "drivers/common/text.hpp"

namespace hostprep {

std::string Holder::describe() const {
  return "pid " + std::to_string(pid) + " (" + comm + ") holds " + node;
}

std::vector<OpenNode> openDeviceNodes(const Host& host) {
  std::vector<OpenNode> out;
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
      if (target && startsWith(*target, "/dev/"))
        out.push_back({static_cast<int>(*pid), std::move(*target)});
    }
  }
  return out;
}

std::vector<Holder> holdersAmong(const Host& host, const std::vector<OpenNode>& open,
                                 const std::vector<std::string>& globs) {
  std::vector<Holder> out;
  for (const auto& o : open) {
    for (const auto& g : globs) {
      if (::fnmatch(g.c_str(), o.node.c_str(), FNM_PATHNAME) == 0) {
        const std::string comm =
            readTrimmed(host, hostPath("proc", std::to_string(o.pid), "comm")).value_or("?");
        out.push_back({o.pid, comm, o.node});
        break;
      }
    }
  }
  return out;
}

std::vector<Holder> findHolders(const Host& host, const std::vector<std::string>& globs) {
  return holdersAmong(host, openDeviceNodes(host), globs);
}

}  // namespace hostprep

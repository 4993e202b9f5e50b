#include "drivers/switch/run_state.hpp"

#include <cerrno>
#include <thread>
#include <utility>

#include "drivers/seam/state_file.hpp"

namespace hostprep {

Status writeJournal(Host& host, const Journal& j) {
  if (auto s = host.makeDirs(kStateDir, 0700); !s) return s;
  return host.writeFileAtomic(kJournalPath, toJson(j), 0600);
}

Status removeJournal(Host& host) { return host.removeFile(kJournalPath); }

Result<RunLock> RunLock::acquire(Host& host, std::chrono::milliseconds timeout) {
  if (auto s = host.makeDirs(kStateDir, 0700); !s) return s.error();
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto lock = host.tryLock(kLockPath);
    if (lock) return RunLock(std::move(*lock));
    if (lock.error().err != EWOULDBLOCK) return lock.error();
    if (std::chrono::steady_clock::now() >= deadline) {
      return Error{"another hostprep run holds " + host.resolve(kLockPath).string(), EWOULDBLOCK,
                   "wait for it to finish, or raise --lock-timeout", Exit::kRefused};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace hostprep

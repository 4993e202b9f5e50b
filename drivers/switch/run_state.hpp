// What a prepare run writes of its own state under <root>/run/hostprep: the journal, before its
// first step and removed when it ends cleanly (its record and its readers:
// drivers/model/journal.hpp), and the lock that makes it the only run.
#pragma once

#include <chrono>

#include "drivers/common/error.hpp"
#include "drivers/model/journal.hpp"
#include "drivers/seam/host.hpp"

namespace hostprep {

inline constexpr std::string_view kLockPath = "run/hostprep/lock";

Status writeJournal(Host& host, const Journal& j);
Status removeJournal(Host& host);

// An exclusive lock on run/hostprep/lock (Host::tryLock), released when destroyed.
class RunLock {
 public:
  // Waits up to `timeout` for another run to finish.
  static Result<RunLock> acquire(Host& host, std::chrono::milliseconds timeout);

 private:
  explicit RunLock(FileLock lock) : lock_(std::move(lock)) {}
  FileLock lock_;
};

}  // namespace hostprep

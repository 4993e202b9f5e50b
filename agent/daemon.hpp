// The agent: converge at start, publish the status, then one poll loop over kernel device events
// and signals. No timers while the node is converged: an idle agent sleeps in poll(-1) and wakes
// up zero times; after a failed convergence, one timer for its retry (kRetryFirst). A burst of
// events is debounced (kDebounceQuiet of quiet, at most kDebounceMax after the first event; a
// burst that has settled, burstSettled, is read at once), so the status is rewritten within
// 100 ms of the event that changed it.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/config.hpp"
#include "agent/converge.hpp"
#include "agent/options.hpp"
#include "agent/status_writer.hpp"
#include "drivers/seam/udev.hpp"

namespace hostprep {

// The quiet that ends a burst. The kernel sends a rebind's unbind and bind events back to back
// (one process's two writes): under QEMU's TCG, some 20 times slower than the hardware, the agent
// gathered both within 1 ms of the first (`time: 2 event(s) gathered in 5.4-6.2 ms` with 5 ms of
// quiet, tests/bench/run), so 2 ms gathers them; a longer quiet is latency paid on every event.
inline constexpr std::chrono::milliseconds kDebounceQuiet{2};
inline constexpr std::chrono::milliseconds kDebounceMax{50};
// After a failed convergence (a GPU held open, a busy lock): the agent tries again after
// kRetryFirst, doubling per failure up to kRetryMax, until one succeeds. A holder closing its
// file sends no kernel event, so only a timer notices; the process stays up (in a pod, exiting
// would be a crash loop with the same back-off, and a restart each time).
inline constexpr std::chrono::milliseconds kRetryFirst{5000};
inline constexpr std::chrono::milliseconds kRetryMax{300000};
// A status the agent could not read or write (EMFILE, ENOMEM, /run full): read whole and written
// again after kRepublishFirst, doubling per failure up to kRetryMax. Without it the status stays
// stale until the next event, and a scoped re-read would build on the read that failed.
inline constexpr std::chrono::milliseconds kRepublishFirst{1000};

// One of the agent's timers: armed by a failure, `first` after the first and twice the last
// delay after each further one (at most kRetryMax), disarmed by a success.
class Backoff {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Backoff(std::chrono::milliseconds first) : first_(first) {}
  void failed() {
    delay_ = delay_ ? std::min(*delay_ * 2, kRetryMax) : first_;
    at_ = Clock::now() + *delay_;
  }
  void reset() { delay_.reset(); }
  // The current delay; nullopt while disarmed.
  std::optional<std::chrono::milliseconds> delay() const { return delay_; }
  // When it fires; nullopt while disarmed.
  std::optional<Clock::time_point> at() const {
    return delay_ ? std::optional<Clock::time_point>(at_) : std::nullopt;
  }
  bool due(Clock::time_point now) const { return delay_ && now >= at_; }

 private:
  std::chrono::milliseconds first_;
  std::optional<std::chrono::milliseconds> delay_;
  Clock::time_point at_{};
};

// The PCI functions a burst of events names, when each event is a bind, unbind or change of a
// PCI function or a vfio group node coming or going with a bind: then the status needs only
// those functions read again (refreshSnapshot). Anything else (a function or VF added or
// removed, an mdev event, lost events): nullopt, read the whole host.
struct ChangedFunctions {
  std::set<Bdf> functions;  // every function the burst names
  std::set<Bdf> rebound;    // those it names only in bind and unbind events
  bool operator==(const ChangedFunctions&) const = default;
};
std::optional<ChangedFunctions> changedFunctions(const std::vector<DeviceEvent>& events);

// Whether a burst has come to rest, so that the agent reads the host without waiting for the
// quiet: its last event binds a PCI function, and every function it unbinds is bound again later
// in it. The driver core sends a function's bind event once the probe has bound it
// (drivers/base/dd.c driver_bound, KOBJ_BIND) and its unbind event once it has let it go
// (__device_release_driver, KOBJ_UNBIND), so a rebind, or a move to another driver, ends with a
// bind. A burst that leaves a function unbound (its bind may follow), or that holds any other
// event than a PCI bind or unbind or a vfio group node coming or going (a function added or
// removed, a change, mdev, lost events), waits for the quiet as before.
bool burstSettled(const std::vector<DeviceEvent>& events);

// Whether a burst may end the wait for the GPU Operator's host driver: `module` appears (a
// module add event: its driver container loaded it) or a waiting GPU is bound to a driver.
bool hostDriverArrived(const std::vector<DeviceEvent>& events, std::string_view module,
                       const std::set<Bdf>& waiting);

// SIGTERM, SIGINT, SIGHUP (and SIGCHLD, to reap timed writes the kernel let go late) as a
// descriptor for the poll loop (signalfd), or a fake in tests.
class SignalSource {
 public:
  virtual ~SignalSource() = default;
  virtual int fd() const = 0;
  virtual std::vector<int> drain() = 0;  // signal numbers waiting now
};
// Blocks SIGTERM, SIGINT, SIGHUP and SIGCHLD in the calling thread and returns a signalfd for them.
Result<std::unique_ptr<SignalSource>> openSignalSource();

class Agent {
 public:
  // `notify` receives sd_notify lines ("READY=1\nSTATUS=..."); a no-op outside systemd.
  Agent(Kernel& k, AgentOptions opt, std::function<void(const std::string&)> notify);

  // Loads the config, resolves a journal, converges, writes the status and reports READY=1.
  // Returns the exit code: 0, 2 for a bad config (host untouched), or the convergence's code
  // (the status is written either way).
  int start();
  // The loop: returns 0 on SIGTERM/SIGINT. Never unbinds anything on the way out.
  int run(EventSource& events, SignalSource& signals);

  // One step of the loop each (the loop calls them; tests too).
  void handleEvents(const std::vector<DeviceEvent>& events);
  void reload();
  // The back-off before the next retry of a failed convergence; nullopt when the last one
  // succeeded (then the loop has no timer at all).
  std::optional<std::chrono::milliseconds> retryDelay() const { return retry_.delay(); }
  // The retry: converge again and publish.
  void retry();
  // The back-off before the status is read and written again; nullopt when the last read and
  // write succeeded.
  std::optional<std::chrono::milliseconds> republishDelay() const { return republish_.delay(); }
  // Reads the host whole and writes the status (the loop calls it when republishDelay is due).
  void republish();

  const StatusDocument* status() const { return last_ ? &last_->doc : nullptr; }
  size_t statusWrites() const { return writes_; }
  size_t convergences() const { return convergences_; }
  // The GPUs the last convergence left waiting for the GPU Operator's host driver (container
  // mode, host-driver-provider operator, its module not loaded): the agent converges again when
  // the module appears or one of them is bound, with or without reconcile.
  const std::set<Bdf>& awaitingDriver() const { return awaitingDriver_; }
  const AgentConfig& config() const { return config_; }

 private:
  std::optional<Mode> mode() const;
  Status convergeNow();
  Status resolveJournal();
  // Reads the host (only `changed` functions when given and there is a previous observation)
  // and writes the status.
  void observeAndPublish(const std::optional<ChangedFunctions>& changed = std::nullopt);
  void republishLater();  // after a failed read or write: arm the republish timer

  Kernel& k_;
  AgentOptions opt_;
  std::function<void(const std::string&)> notify_;
  AgentConfig config_;
  std::optional<std::string> convergeError_;
  std::unique_ptr<Observation> last_;
  std::set<std::string> lastDrift_;
  // PreflightPassed, computed once per convergence: a rebind changes nothing preflight reads.
  // Keyed by the desired mode and its split (a prepare run by hand may change the last split).
  struct PreflightCache {
    std::pair<Mode, std::vector<DeviceRule>> key;
    std::optional<PreflightOutcome> outcome;
  };
  std::optional<PreflightCache> preflightCache_;
  StaticInputs statics_;  // node name, pci.ids, modules.alias: also dropped on convergence
  std::set<std::string> failedDrift_;  // the drift a reconcile already failed on
  std::set<Bdf> awaitingDriver_;
  Backoff retry_{kRetryFirst};          // armed while the last convergence failed
  Backoff republish_{kRepublishFirst};  // armed while the status is stale
  std::atomic<size_t> writes_{0};
  std::atomic<size_t> convergences_{0};
};

}  // namespace hostprep

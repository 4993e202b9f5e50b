#include "agent/daemon.hpp"

#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <ctime>

#include "drivers/common/parsers.hpp"
#include "drivers/common/text.hpp"

namespace hostprep {
namespace {

class SignalFd final : public SignalSource {
 public:
  explicit SignalFd(int fd) : fd_(fd) {}
  ~SignalFd() override { ::close(fd_); }
  SignalFd(const SignalFd&) = delete;
  SignalFd& operator=(const SignalFd&) = delete;
  int fd() const override { return fd_; }
  std::vector<int> drain() override {
    std::vector<int> out;
    signalfd_siginfo si{};
    while (::read(fd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
      out.push_back(static_cast<int>(si.ssi_signo));
    }
    return out;
  }

 private:
  int fd_;
};

// What a drift is: each device off its wanted driver, with the driver it is on and whether an
// unbind of it is still pending (its end changes the drift, so a failed reconcile is retried).
std::set<std::string> driftKeys(const StatusDocument& d) {
  std::set<std::string> out;
  for (const auto* dv : d.drift()) {
    out.insert(dv->fn->bdf.str() + "=" + dv->fn->driver.value_or("none") +
               (dv->fn->unbindPending ? " (unbinding)" : ""));
  }
  return out;
}

// The agent lives for weeks between short bursts of work: a status rewrite or a convergence
// allocates and frees a few hundred KiB (the snapshot, the JSON document, the executor's lane
// threads, each with an arena of its own). glibc keeps freed memory for the next malloc;
// malloc_trim(3) gives the free pages at the top of each arena back to the kernel, so the
// resident size between events is what the agent keeps, not its high-water mark.
void releaseFreeMemory() {
#ifdef __GLIBC__
  ::malloc_trim(0);
#endif
}

}  // namespace

std::optional<ChangedFunctions> changedFunctions(const std::vector<DeviceEvent>& events) {
  ChangedFunctions out;
  std::set<Bdf> changedOtherwise;  // named by a change event (anything may have moved)
  for (const auto& e : events) {
    if (e.subsystem == "vfio" && (e.action == "add" || e.action == "remove")) continue;
    if (e.subsystem != "pci" ||
        (e.action != "bind" && e.action != "unbind" && e.action != "change")) {
      return std::nullopt;
    }
    auto bdf = parseBdf(e.sysname);
    if (!bdf) return std::nullopt;
    out.functions.insert(*bdf);
    if (e.action == "change") changedOtherwise.insert(*bdf);
  }
  for (const auto& b : out.functions) {
    if (changedOtherwise.count(b) == 0) out.rebound.insert(b);
  }
  return out;
}

bool hostDriverArrived(const std::vector<DeviceEvent>& events, std::string_view module,
                       const std::set<Bdf>& waiting) {
  for (const auto& e : events) {
    if (e.subsystem == "module" && e.action == "add" && normalizeModuleName(e.sysname) == module)
      return true;
    if (e.subsystem == "pci" && e.action == "bind") {
      if (auto b = parseBdf(e.sysname); b && waiting.count(*b)) return true;
    }
  }
  return false;
}

bool burstSettled(const std::vector<DeviceEvent>& events) {
  std::set<std::string> unbound;
  const DeviceEvent* last = nullptr;
  for (const auto& e : events) {
    if (e.subsystem == "vfio" && (e.action == "add" || e.action == "remove")) continue;
    if (e.subsystem != "pci") return false;
    if (e.action == "unbind") {
      unbound.insert(e.sysname);
    } else if (e.action == "bind") {
      unbound.erase(e.sysname);
    } else {
      return false;
    }
    last = &e;
  }
  return last && last->action == "bind" && unbound.empty();
}

Result<std::unique_ptr<SignalSource>> openSignalSource() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGCHLD);  // a timed write the kernel let go at last: reap it
  if (::pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0)
    return sysError("cannot block signals", errno);
  int fd = ::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd < 0) return sysError("cannot create a signalfd", errno);
  return std::unique_ptr<SignalSource>(new SignalFd(fd));
}

Agent::Agent(Kernel& k, AgentOptions opt, std::function<void(const std::string&)> notify)
    : k_(k), opt_(std::move(opt)), notify_(std::move(notify)) {}

std::optional<Mode> Agent::mode() const { return opt_.mode ? opt_.mode : config_.mode; }

Status Agent::convergeNow() {
  // After a convergence (start, reload, reconcile) the checks run again and the inputs are read.
  preflightCache_.reset();
  statics_ = {};
  auto m = mode();
  if (!m) {  // nothing to converge to (a reload dropped the mode): no failure left to retry
    convergeError_.reset();
    retry_.reset();
    return {};
  }
  ConvergeOptions co;
  co.mode = *m;
  if (!opt_.mode) co.rules = config_.rules;  // --mode M: every GPU to M
  co.selection = config_.selection;
  co.lockTimeout = opt_.lockTimeout;
  co.unbindTimeout = opt_.unbindTimeout;
  co.resetOnReturn = config_.resetOnReturn && !opt_.noReset;
  co.holderNodes = config_.holderGlob();
  // The vGPU config file is a host path (under --root).
  co.vgpuConfigFile = config_.vgpuConfigFile;
  co.vgpuConfigName = config_.vgpuConfigName;
  co.onDevice = [](const DeviceMove& mv, const Status& s) {
    if (s) {
      spdlog::info("bdf={} step=move {} -> {}", mv.bdf.str(), mv.from.driver.value_or("none"),
                   mv.target());
    } else {
      spdlog::error("bdf={} step=move failed: {}", mv.bdf.str(), s.error().describe());
    }
  };
  ++convergences_;
  auto c = converge(k_, co);
  if (!c.status) {
    convergeError_ = c.status.error().describe();
    retry_.failed();
    spdlog::error("converge to {}: {} (trying again in {} s)",
                  c.plan ? modeSummary(c.plan->split(), *m) : targetText(*m, co.rules),
                  *convergeError_,
                  std::chrono::duration_cast<std::chrono::seconds>(*retry_.delay()).count());
    return c.status;
  }
  convergeError_.reset();
  retry_.reset();
  awaitingDriver_.clear();
  if (c.plan) {
    for (const auto& b : c.plan->awaitingDriver()) awaitingDriver_.insert(b);
    if (auto w = waitingText(*c.plan)) spdlog::info("{}", *w);
  }
  if (c.plan && c.plan->noop()) {
    spdlog::info("{}", nothingToDo(*c.plan));
  } else if (c.plan) {
    spdlog::info("converged to {}: {} step(s) in {:.3f} s", modeSummary(c.plan->split(), *m),
                 c.stepsRun, c.seconds);
  }
  return {};
}

void Agent::observeAndPublish(const std::optional<ChangedFunctions>& changed) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  StatusRequest req;
  if (changed && last_ && !republish_.delay()) {  // after a failure: whole
    req.previous = last_.get();
    req.changed = changed->functions;
    req.rebound = changed->rebound;
  }
  req.statics = &statics_;
  req.config = config_;
  req.modeOverride = opt_.mode;
  req.convergeError = convergeError_;
  req.now = std::time(nullptr);
  req.preflight = [this](const Host& h, const Snapshot& snap, Mode mode,
                         const SelectionOptions& sel, const std::vector<DeviceRule>& rules) {
    if (!preflightCache_ || preflightCache_->key != std::pair{mode, rules}) {
      preflightCache_.emplace(
          PreflightCache{{mode, rules}, preflightOutcome(h, snap, mode, sel, rules)});
    }
    return preflightCache_->outcome;
  };
  auto o = observe(k_.host, req);
  if (!o) {
    spdlog::error("status: {}", o.error().describe());
    republishLater();
    return;
  }
  const auto t1 = Clock::now();
  if (auto s = publish(k_.host, **o, config_, config_.statusPath); !s) {
    spdlog::error("status: {}", s.error().describe());
    republishLater();
  } else {
    ++writes_;
    if (republish_.delay()) spdlog::info("status: written again");
    republish_.reset();
  }
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  spdlog::debug("status: read {} in {:.1f} ms, written in {:.1f} ms",
                req.previous ? std::to_string(req.changed.size()) + " function(s)" : "the host",
                ms(t1 - t0), ms(Clock::now() - t1));
  // Drift is logged when it appears or changes, and when it clears.
  auto drift = driftKeys((*o)->doc);
  if (drift != lastDrift_) {
    if (drift.empty()) {
      spdlog::info("drift cleared: every device on its wanted driver");
    } else {
      for (const auto* dv : (*o)->doc.drift()) {
        spdlog::warn("bdf={} drift: on {}, wants {}", dv->fn->bdf.str(),
                     dv->fn->driver.value_or("no driver"), dv->wanted());
      }
    }
    lastDrift_ = drift;
  }
  last_ = std::move(*o);
  notify_("STATUS=" + summary(last_->doc));
  // A whole read of the host (at start, after a convergence or a reload, or after events it could
  // not scope to a few functions) leaves much more free than it keeps: give that back. A re-read
  // after events frees the same few dozen KiB each time, which stay in malloc's free lists for the
  // next one instead of going back to the kernel and being faulted in again (ten page faults a
  // rebind in the bench's guest).
  if (!req.previous) releaseFreeMemory();
}

void Agent::republishLater() {
  republish_.failed();
  spdlog::warn("status: reading the host and writing it again in {} ms",
               republish_.delay()->count());
}

void Agent::republish() { observeAndPublish(); }

Status Agent::resolveJournal() {
  auto lock = RunLock::acquire(k_.host, opt_.lockTimeout);
  if (!lock) return lock.error();
  ApplyOptions apply;
  apply.unbindTimeout = opt_.unbindTimeout;
  apply.hostDriver = config_.selection.hostDriver;
  apply.holderNodes = {config_.holderGlob()};
  auto rec = recoverJournal(k_, apply);
  if (!rec) {
    spdlog::error("journal: {}", rec.error().describe());
    return rec.error();
  }
  if (*rec) spdlog::warn("rolled back an interrupted run: {} device(s) restored", **rec);
  return {};
}

int Agent::start() {
#ifdef __GLIBC__
  // One malloc arena: the executor's lane threads would each get one (mallopt(3), M_ARENA_MAX),
  // and their freed pages stay resident in it.
  ::mallopt(M_ARENA_MAX, 1);
#endif
  // 1. The config: a bad one stops here, before anything is touched.
  auto c = loadConfig(k_.host, opt_.config.path, opt_.config.given);
  if (!c) {
    spdlog::error("{}", c.error().describe());
    return static_cast<int>(c.error().exit);
  }
  config_ = std::move(*c);
  if (opt_.reconcile) config_.reconcile = true;

  // 2. Converge with the same code as prepare (it resolves a leftover journal first).
  Status conv;
  if (mode()) {
    conv = convergeNow();
  } else {
    spdlog::info("no mode in {} and no --mode: observing only", opt_.config.path);
    conv = resolveJournal();
  }

  // 3. Publish, then tell systemd.
  observeAndPublish();
  notify_("READY=1\nSTATUS=" + (last_ ? summary(last_->doc) : std::string("status unavailable")));
  return conv ? 0 : static_cast<int>(conv.error().exit);
}

void Agent::handleEvents(const std::vector<DeviceEvent>& events) {
  for (const auto& e : events) {
    spdlog::debug("event {} {} {}{}", e.action, e.subsystem, e.sysname,
                  e.driver.empty() ? "" : " driver=" + e.driver);
  }
  observeAndPublish(changedFunctions(events));
  if (!awaitingDriver_.empty() && mode() &&
      hostDriverArrived(events, normalizeModuleName(config_.selection.hostDriver),
                        awaitingDriver_)) {
    // The GPU Operator's driver container loaded the host module: finish the convergence
    // (probe, verify) and publish, whatever reconcile says: it is the run's own work.
    spdlog::info("host driver module {} appeared: converging again",
                 normalizeModuleName(config_.selection.hostDriver));
    (void)convergeNow();
    observeAndPublish();
    return;
  }
  if (!config_.reconcile || !mode() || !last_) return;
  auto drift = driftKeys(last_->doc);
  if (drift.empty() && last_->doc.converged) {
    failedDrift_.clear();
    return;
  }
  if (drift.empty() || drift == failedDrift_) return;  // do not retry the same failure forever
  spdlog::info("reconcile: moving {} device(s) back to {}", drift.size(),
               modeSummary(last_->doc.desiredSplit, *mode()));
  const bool ok = static_cast<bool>(convergeNow());
  observeAndPublish();
  // Not retried until the drift changes: judged on the host as the failed attempt left it (a
  // stuck unbind leaves the device with no driver and its unbind pending).
  if (!ok) failedDrift_ = last_ ? driftKeys(last_->doc) : drift;
}

void Agent::reload() {
  notify_("RELOADING=1");
  statics_ = {};  // a reload also re-reads the node name, pci.ids and modules.alias
  auto c = loadConfig(k_.host, opt_.config.path, opt_.config.given);
  if (!c) {
    spdlog::error("reload: {} (keeping the previous config)", c.error().describe());
  } else {
    config_ = std::move(*c);
    if (opt_.reconcile) config_.reconcile = true;
    spdlog::info("reloaded {}", opt_.config.path);
    failedDrift_.clear();
    (void)convergeNow();
  }
  observeAndPublish();
  notify_("READY=1");
}

void Agent::retry() {
  if (!mode()) {
    retry_.reset();
    return;
  }
  spdlog::info("retrying the convergence to {}",
               targetText(*mode(), opt_.mode ? std::vector<DeviceRule>{} : config_.rules));
  failedDrift_.clear();
  (void)convergeNow();
  observeAndPublish();
}

int Agent::run(EventSource& events, SignalSource& signals) {
  using Clock = std::chrono::steady_clock;
  for (;;) {
    pollfd fds[2] = {{events.fd(), POLLIN, 0}, {signals.fd(), POLLIN, 0}};
    // The next timer: a failed convergence's retry, a failed status's republish.
    std::optional<Clock::time_point> due = retry_.at();
    if (auto r = republish_.at(); r && (!due || *r < *due)) due = r;
    int timeout = -1;
    if (due) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(*due - Clock::now());
      timeout = static_cast<int>(std::max<int64_t>(left.count(), 0));
    }
    int n = ::poll(fds, 2, timeout);
    if (n < 0) {
      if (errno == EINTR) continue;
      spdlog::error("poll: {}", std::strerror(errno));
      return static_cast<int>(Exit::kFailed);
    }
    // A timer's time: on a timeout, or when events or signals kept poll from timing out (a
    // device that sends events without pause must not put a retry off for ever).
    if (retry_.due(Clock::now())) retry();
    if (republish_.due(Clock::now())) republish();
    if (n == 0) continue;
    // Signals first: SIGTERM leaves every device where it is (a VM may be using it).
    if (fds[1].revents & POLLIN) {
      for (int sig : signals.drain()) {
        if (sig == SIGTERM || sig == SIGINT) {
          notify_("STOPPING=1");
          spdlog::info("{}: exiting; devices stay where they are",
                       sig == SIGTERM ? "SIGTERM" : "SIGINT");
          return 0;
        }
        if (sig == SIGHUP) reload();
        if (sig == SIGCHLD) {
          if (size_t left = reapStrayChildren())
            spdlog::debug("{} timed write(s) still waiting in the kernel", left);
        }
      }
    }
    if (!(fds[0].revents & (POLLIN | POLLERR))) continue;
    // Debounce: gather the burst until it settles or is quiet, at most kDebounceMax after its
    // first event.
    auto batch = events.drain();
    const auto first = Clock::now();
    const auto deadline = first + kDebounceMax;
    for (;;) {
      if (burstSettled(batch)) break;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) break;
      pollfd more{events.fd(), POLLIN, 0};
      int m = ::poll(&more, 1, static_cast<int>(std::min(left, kDebounceQuiet).count()));
      if (m <= 0) break;
      auto next = events.drain();
      batch.insert(batch.end(), next.begin(), next.end());
    }
    if (batch.empty()) continue;
    spdlog::debug("time: {} event(s) gathered in {:.1f} ms", batch.size(),
                  std::chrono::duration<double, std::milli>(Clock::now() - first).count());
    handleEvents(batch);
  }
}

}  // namespace hostprep

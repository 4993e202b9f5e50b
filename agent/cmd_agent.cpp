// hostprep agent: the long-running service (and, with --once, the boot oneshot).
#include <spdlog/pattern_formatter.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "agent/commands.hpp"
#include "agent/daemon.hpp"
#include "agent/options.hpp"
#include "agent/service_notify.hpp"
#include "drivers/seam/kmod.hpp"

namespace hostprep {
namespace {

// journald reads "<N>" priority prefixes on stderr (sd-daemon(3)); systemd sets JOURNAL_STREAM
// when stderr is the journal. Elsewhere the plain "level: message" form stays.
class PriorityFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    static constexpr const char* kPrio[] = {"<7>", "<7>", "<6>", "<4>", "<3>", "<2>", "<6>"};
    const auto i = static_cast<size_t>(msg.level);
    const char* p = i < std::size(kPrio) ? kPrio[i] : "<6>";
    dest.append(p, p + 3);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<PriorityFlag>();
  }
};

void useJournalFormat() {
  if (!std::getenv("JOURNAL_STREAM")) return;
  auto f = std::make_unique<spdlog::pattern_formatter>();
  f->add_flag<PriorityFlag>('*').set_pattern("%*%v");
  spdlog::default_logger()->set_formatter(std::move(f));
}

}  // namespace

int cmdAgent(Context& ctx, const std::vector<std::string>& args) {
  AgentOptions opt;
  if (auto rc = exitEarly(ctx, parseAgentOptions(args), opt)) return *rc;
  useJournalFormat();
  // A service of a few MiB takes no transparent huge pages (prctl(2), PR_SET_THP_DISABLE, Linux
  // 3.15): where THP is "always", one 2 MiB page could back a thread stack that glibc keeps for
  // reuse after a convergence's threads exit, 2 MiB resident for the few KiB they used.
  if (::prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0)
    spdlog::debug("prctl(PR_SET_THP_DISABLE): {}", std::strerror(errno));
  RootHost host(ctx.global.root);
  auto release = readTrimmed(host, "proc/sys/kernel/osrelease").value_or("");
  auto modules = makeKmodLoader(host, release);
  Kernel kernel{host, *modules};
  Agent agent(kernel, opt, notifyServiceManager);

  std::unique_ptr<SignalSource> signals;
  std::unique_ptr<EventSource> events;
  if (!opt.once) {
    // 1. Signals before anything else, so a SIGTERM during convergence waits for the loop.
    auto s = openSignalSource();
    if (!s) return fail(ctx, s.error());
    signals = std::move(*s);
    // 2. Listen before converging, so no event between the first status and the loop is lost.
    auto e = openKernelEventMonitor();
    if (!e) return fail(ctx, e.error());
    events = std::move(*e);
  }
  // 3. Converge, publish, READY=1.
  int rc = agent.start();
  if (opt.once || rc == static_cast<int>(Exit::kUsage)) return rc;
  // 4. The loop, until SIGTERM.
  return agent.run(*events, *signals);
}

}  // namespace hostprep

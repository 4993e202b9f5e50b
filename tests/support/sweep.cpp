#include "tests/support/sweep.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>

#include "drivers/model/journal.hpp"
#include "drivers/model/snapshot.hpp"
#include "drivers/switch/executor.hpp"
#include "tests/support/fake_kernel.hpp"
#include "tests/support/fixture.hpp"

namespace hostprep::test {
namespace {

using State = std::map<std::string, std::string>;

std::string describeDiff(const State& want, const State& got) {
  std::string out;
  for (const auto& [k, v] : want) {
    auto it = got.find(k);
    if (it == got.end()) {
      out += " " + k + " gone;";
    } else if (it->second != v) {
      out += " " + k + "='" + it->second + "' (was '" + v + "');";
    }
  }
  for (const auto& [k, v] : got) {
    if (!want.count(k)) out += " " + k + " appeared;";
  }
  if (out.size() > 300) out = out.substr(0, 300) + "...";
  return out;
}

// One fresh copy of the host with the fake kernel, moved to the case's starting mode.
struct Rig {
  std::unique_ptr<Fixture> fx;
  std::unique_ptr<FakeKernel> kernel;
  std::unique_ptr<FakeModules> modules;
  Kernel k;
  ApplyOptions opt;
  size_t writeBase = 0, mutationBase = 0, fileWriteBase = 0;

  static std::unique_ptr<Fixture> makeFixture(const SweepCase& c) {
    if (!c.scenario.empty()) return std::make_unique<Fixture>(c.scenario);
    return std::make_unique<Fixture>(Fixture::HostYaml{c.hostYaml});
  }

  explicit Rig(const SweepCase& c)
      : fx(makeFixture(c)),
        kernel(std::make_unique<FakeKernel>(fx->root())),
        modules(std::make_unique<FakeModules>(*kernel)),
        k{*kernel, *modules} {
    opt.unbindTimeout = std::chrono::milliseconds(200);
    // The sweeps number every kernel write and host mutation from a probe run, so the order must
    // repeat exactly: one lane at a time. (The parallel lanes get their own fault sweep in
    // tests/drivers/switch/executor_test.cpp, which needs no numbering to check the end state.)
    opt.parallel = false;
    if (c.from) {
      auto res = applyPlan(k, plan(*c.from, c.fromRules, c.selection), opt);
      if (!res)
        throw std::runtime_error(
            c.name + ": the move to the starting mode failed: " + res.error().describe());
    }
    if (c.setupKernel) c.setupKernel(*kernel);
    writeBase = kernel->writeCount();
    fileWriteBase = kernel->fileWriteCount();
    mutationBase = kernel->mutationCount();
  }

  Plan plan(Mode mode, const std::vector<DeviceRule>& rules, const SelectionOptions& so) {
    auto s = readSnapshot(*kernel);
    if (!s) throw std::runtime_error("snapshot: " + s.error().describe());
    auto sel = selectDevices(*s, so);
    if (!sel) throw std::runtime_error("selection: " + sel.error().describe());
    PlanInputs in{
        mode, "nvidia",
        kernel->read(hostPath("lib/modules", s->kernelRelease, "modules.alias")).value_or("")};
    in.modes = resolveModes(*s, *sel, mode, rules).modes;
    auto p = makePlan(*s, *sel, in);
    if (!p) throw std::runtime_error("plan: " + p.error().describe());
    return *p;
  }

  bool journal() const { return kernel->exists(kJournalPath); }
  size_t writes() const { return kernel->writeCount() - writeBase; }
  size_t mutations() const { return kernel->mutationCount() - mutationBase; }
};

// A clean run of the case: what it starts from, where it ends, and how much it does.
struct Probe {
  State before, after;
  size_t steps = 0, writes = 0, mutations = 0;
  size_t fileWrites = 0;  // journal writes
};

Probe probe(const SweepCase& c) {
  Rig r(c);
  Probe p;
  p.before = r.fx->deviceState();
  Plan plan = r.plan(c.mode, c.rules, c.selection);
  if (plan.noop()) throw std::runtime_error(c.name + ": the plan is a no-op; nothing to sweep");
  p.steps = plan.steps.size();
  auto res = applyPlan(r.k, plan, r.opt);
  if (!res) throw std::runtime_error(c.name + ": the clean run failed: " + res.error().describe());
  p.after = r.fx->deviceState();
  p.writes = r.writes();
  p.mutations = r.mutations();
  p.fileWrites = r.kernel->fileWriteCount() - r.fileWriteBase;
  return p;
}

// The promise after any interruption: the next run's recovery puts the host back where it began,
// leaves no journal, and the run after that completes.
bool recoversAndCompletes(Rig& r, const SweepCase& c, const Probe& p, SweepTally& t,
                          const std::string& where) {
  r.kernel->noCrash();
  auto rec = recoverJournal(r.k, r.opt);
  if (!rec) return t.fail(where + ": recovery failed: " + rec.error().describe()), false;
  if (r.journal()) return t.fail(where + ": the journal survived recovery"), false;
  State now = r.fx->deviceState();
  if (now != p.before)
    return t.fail(where + ": stranded after recovery:" + describeDiff(p.before, now)), false;
  auto res = applyPlan(r.k, r.plan(c.mode, c.rules, c.selection), r.opt);
  if (!res) return t.fail(where + ": the next run failed: " + res.error().describe()), false;
  now = r.fx->deviceState();
  if (now != p.after)
    return t.fail(where + ": the next run ended elsewhere:" + describeDiff(p.after, now)), false;
  return true;
}

template <class F>
void point(SweepTally& t, const std::string& where, F&& body) {
  ++t.points;
  try {
    body();
  } catch (const FakeKernel::Crash& crash) {
    t.fail(where + ": an unexpected crash at mutation " + std::to_string(crash.at));
  } catch (const std::exception& e) {
    t.fail(where + ": " + e.what());
  }
}

}  // namespace

void SweepTally::fail(const std::string& what) {
  ++stranded;
  if (failures.size() < 10) failures.push_back(what);
}

SweepTally& SweepTally::operator+=(const SweepTally& o) {
  points += o.points;
  stranded += o.stranded;
  for (const auto& f : o.failures) {
    if (failures.size() < 10) failures.push_back(f);
  }
  return *this;
}

SweepCase fixtureCase(std::string scenario, Mode mode, std::optional<Mode> from,
                      SelectionOptions sel) {
  std::string name = scenario + (from ? " (" + std::string(toString(*from)) + ")" : "") + " -> " +
                     std::string(toString(mode));
  for (const auto& b : sel.devices) name += " --devices " + b.str();
  SweepCase c;
  c.name = std::move(name);
  c.scenario = std::move(scenario);
  c.from = from;
  c.mode = mode;
  c.selection = std::move(sel);
  return c;
}

std::vector<SweepCase> fixtureCases() {
  const auto pt = Mode::kVmPassthrough;
  const auto ct = Mode::kContainer;
  SelectionOptions one;
  one.devices = {*parseBdf("0000:86:00.0")};
  return {
      fixtureCase("two-a10", pt, std::nullopt, {}),
      fixtureCase("two-a10", pt, std::nullopt, one),
      fixtureCase("two-a10", ct, pt, {}),
      fixtureCase("passthrough-done", ct, std::nullopt, {}),
      fixtureCase("turing-usb-ucsi", pt, std::nullopt, {}),
      fixtureCase("turing-usb-ucsi", ct, pt, {}),
      fixtureCase("held-device", pt, std::nullopt, {}),
      fixtureCase("nvme-shared-group", pt, std::nullopt, {}),  // what --force would do
      fixtureCase("return-from-vm", ct, std::nullopt, {}),     // function and bus resets
      // vm-vgpu plans: fixtureCase("<scenario>", Mode::kVmVgpu, std::nullopt, {}),
  };
}

SweepCase bothWaysCase() {
  const Bdf a = *parseBdf("0000:3b:00.0"), b = *parseBdf("0000:86:00.0");
  SweepCase c = fixtureCase("two-a10", Mode::kContainer, Mode::kContainer, {});
  c.name = "two-a10 (3b:00.0 vm-passthrough) -> 86:00.0 vm-passthrough, 3b:00.0 container";
  c.fromRules = {{{a, {}, {}, {}}, Mode::kVmPassthrough}};
  c.rules = {{{b, {}, {}, {}}, Mode::kVmPassthrough}};
  return c;
}

std::string generatedTopology(int gpus, int companions, int vfioEvery) {
  struct Kind {
    const char* id;
    const char* cls;
    const char* driver;
  };
  const Kind kinds[] = {{"10de:1aef", "040300", "snd_hda_intel"},
                        {"10de:1ad6", "0c0330", "xhci_hcd"},
                        {"10de:1ad7", "0c8000", "ucsi_ccg"}};
  std::string y =
      "kernel: 6.1.0-test-amd64\n"
      "cmdline: BOOT_IMAGE=/vmlinuz root=/dev/nvme0n1p2 ro intel_iommu=on iommu=pt\n"
      "modules: [nvidia, snd_hda_intel, xhci_hcd, ucsi_ccg, nvme, e1000e]\n"
      "available_modules: [vfio, vfio_pci]\n"
      "root_disk: 0000:01:00.0\n"
      "devices:\n"
      "  - {bdf: \"0000:01:00.0\", id: \"144d:a80a\", class: \"010802\", driver: nvme, group: 1}\n"
      "  - {bdf: \"0000:02:00.0\", id: \"8086:1521\", class: \"020000\", driver: e1000e, group: "
      "2}\n";
  char line[256];
  for (int g = 0; g < gpus; ++g) {
    const int bus = 0x10 + g;
    const bool vfio = vfioEvery > 0 && g % vfioEvery == 0;
    const char* ovr = vfio ? ", driver_override: vfio-pci" : "";
    std::snprintf(line, sizeof line,
                  "  - {bdf: \"0000:%02x:00.0\", id: \"10de:2236\", class: \"030200\", driver: "
                  "%s%s, group: %d}\n",
                  bus, vfio ? "vfio-pci" : "nvidia", ovr, 100 + g);
    y += line;
    for (int f = 1; f <= companions && f < 8; ++f) {
      const Kind& k = kinds[(f - 1) % 3];
      std::snprintf(
          line, sizeof line,
          "  - {bdf: \"0000:%02x:00.%d\", id: \"%s\", class: \"%s\", driver: %s%s, group: %d}\n",
          bus, f, k.id, k.cls, vfio ? "vfio-pci" : k.driver, ovr, 100 + g);
      y += line;
    }
  }
  return y;
}

SweepTally faultSweep(const SweepCase& c, const std::vector<int>& errnos) {
  SweepTally t;
  const Probe p = probe(c);
  for (int e : errnos) {
    for (size_t w = 0; w < p.writes; ++w) {
      const std::string where =
          c.name + ", write " + std::to_string(w) + " fails with " + std::strerror(e);
      point(t, where, [&] {
        Rig r(c);
        r.kernel->failWrite(r.writeBase + w, e);
        auto res = applyPlan(r.k, r.plan(c.mode, c.rules, c.selection), r.opt);
        State now = r.fx->deviceState();
        if (res) return t.fail(where + ": the run reported success");
        if (r.journal())
          return t.fail(where + ": the journal was left behind: " + res.error().describe());
        if (now != p.before) return t.fail(where + ": stranded:" + describeDiff(p.before, now));
      });
    }
  }
  return t;
}

SweepTally journalFaultSweep(const SweepCase& c) {
  SweepTally t;
  const Probe p = probe(c);
  if (p.fileWrites == 0) throw std::runtime_error(c.name + ": the clean run wrote no journal");
  for (size_t s = 0; s < p.fileWrites; ++s) {
    const std::string where = c.name + ", journal write " + std::to_string(s) + " of " +
                              std::to_string(p.fileWrites) + " fails";
    point(t, where, [&] {
      Rig r(c);
      r.kernel->failFileWrite(r.fileWriteBase + s,
                              ENOSPC);  // every journal write the clean run made
      auto res = applyPlan(r.k, r.plan(c.mode, c.rules, c.selection), r.opt);
      State now = r.fx->deviceState();
      if (res) return t.fail(where + ": the run reported success");
      if (now != p.before) return t.fail(where + ": stranded:" + describeDiff(p.before, now));
      // A journal from before the failed write may remain; the next run resolves it.
      recoversAndCompletes(r, c, p, t, where);
    });
  }
  return t;
}

SweepTally crashSweep(const SweepCase& c) {
  SweepTally t;
  const Probe p = probe(c);
  for (size_t s = 0; s < p.steps; ++s) {
    const std::string where = c.name + ", SIGKILL after step " + std::to_string(s);
    point(t, where, [&] {
      Rig r(c);
      r.opt.afterStep = [s](size_t i) { return i != s; };
      auto res = applyPlan(r.k, r.plan(c.mode, c.rules, c.selection), r.opt);
      r.opt.afterStep = nullptr;
      if (res) return t.fail(where + ": the run did not stop");
      if (!r.journal()) return t.fail(where + ": no journal was left for the next run");
      recoversAndCompletes(r, c, p, t, where);
    });
  }
  return t;
}

SweepTally mutationCrashSweep(const SweepCase& c) {
  SweepTally t;
  const Probe p = probe(c);
  for (size_t m = 0; m < p.mutations; ++m) {
    const std::string where = c.name + ", SIGKILL before host mutation " + std::to_string(m);
    point(t, where, [&] {
      Rig r(c);
      r.kernel->crashAt(r.mutationBase + m);
      bool crashed = false;
      try {
        (void)applyPlan(r.k, r.plan(c.mode, c.rules, c.selection), r.opt);
      } catch (const FakeKernel::Crash&) {
        crashed = true;
      }
      if (!crashed) return t.fail(where + ": the run never reached that mutation");
      recoversAndCompletes(r, c, p, t, where);
    });
  }
  return t;
}

SweepTally rollbackCrashSweep(const SweepCase& c) {
  SweepTally t;
  const Probe p = probe(c);
  for (size_t w = 0; w < p.writes; ++w) {
    // How many mutations the rollback after a failure at write w makes.
    size_t failedAt = 0, end = 0;
    {
      Rig r(c);
      r.kernel->failWrite(r.writeBase + w);
      (void)applyPlan(r.k, r.plan(c.mode, c.rules, c.selection), r.opt);
      if (!r.kernel->failedMutation()) continue;
      failedAt = *r.kernel->failedMutation();
      end = r.kernel->mutationCount();
    }
    for (size_t m = failedAt + 1; m < end; ++m) {
      const std::string where = c.name + ", write " + std::to_string(w) +
                                " fails, SIGKILL at rollback mutation " +
                                std::to_string(m - failedAt - 1);
      point(t, where, [&] {
        Rig r(c);
        r.kernel->failWrite(r.writeBase + w);
        r.kernel->crashAt(m);
        bool crashed = false;
        try {
          (void)applyPlan(r.k, r.plan(c.mode, c.rules, c.selection), r.opt);
        } catch (const FakeKernel::Crash&) {
          crashed = true;
        }
        if (!crashed) return t.fail(where + ": the rollback never reached that mutation");
        recoversAndCompletes(r, c, p, t, where);
      });
    }
  }
  return t;
}

SweepTally recoveryCrashSweep(const SweepCase& c) {
  SweepTally t;
  const Probe p = probe(c);
  for (size_t s = 0; s < p.steps; ++s) {
    size_t start = 0, end = 0;
    {
      Rig r(c);
      r.opt.afterStep = [s](size_t i) { return i != s; };
      (void)applyPlan(r.k, r.plan(c.mode, c.rules, c.selection), r.opt);
      start = r.kernel->mutationCount();
      (void)recoverJournal(r.k, r.opt);
      end = r.kernel->mutationCount();
    }
    for (size_t m = start; m < end; ++m) {
      const std::string where = c.name + ", SIGKILL after step " + std::to_string(s) +
                                ", SIGKILL again at recovery mutation " + std::to_string(m - start);
      point(t, where, [&] {
        Rig r(c);
        r.opt.afterStep = [s](size_t i) { return i != s; };
        (void)applyPlan(r.k, r.plan(c.mode, c.rules, c.selection), r.opt);
        r.opt.afterStep = nullptr;
        r.kernel->crashAt(m);
        bool crashed = false;
        try {
          (void)recoverJournal(r.k, r.opt);
        } catch (const FakeKernel::Crash&) {
          crashed = true;
        }
        if (!crashed) return t.fail(where + ": the recovery never reached that mutation");
        recoversAndCompletes(r, c, p, t, where);
      });
    }
  }
  return t;
}

SweepTally doubleFaultSweep(const SweepCase& c) {
  SweepTally t;
  const Probe p = probe(c);
  for (size_t w = 0; w < p.writes; ++w) {
    size_t end = 0;
    {
      Rig r(c);
      r.kernel->failWrite(r.writeBase + w);
      (void)applyPlan(r.k, r.plan(c.mode, c.rules, c.selection), r.opt);
      end = r.writes();
    }
    for (size_t j = w + 1; j < end; ++j) {
      const std::string where = c.name + ", write " + std::to_string(w) +
                                " fails, rollback write " + std::to_string(j) + " fails too";
      point(t, where, [&] {
        Rig r(c);
        r.kernel->failWrite(r.writeBase + w);
        r.kernel->failWrite(r.writeBase + j);
        auto res = applyPlan(r.k, r.plan(c.mode, c.rules, c.selection), r.opt);
        if (res) return t.fail(where + ": the run reported success");
        recoversAndCompletes(r, c, p, t, where);
      });
    }
  }
  return t;
}

}  // namespace hostprep::test

// hostprep_sweep: the fault and crash sweeps of tests/reliability/sweep_test.cpp, over every
// fixture plan and over generated hosts (1..N GPUs x 0..C companions, all on nvidia, all on
// vfio, or mixed), with more errnos. Prints the figures in tests/README.md (Reliability) and
// exits 1 if any point stranded a device.
//   hostprep_sweep [--gpus N] [--companions C] [--quick]
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/support/sweep.hpp"

using namespace hostprep;
using namespace hostprep::test;

int main(int argc, char** argv) {
  int gpus = 4, companions = 3;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--gpus" && i + 1 < argc) {
      gpus = std::atoi(argv[++i]);
    } else if (a == "--companions" && i + 1 < argc) {
      companions = std::atoi(argv[++i]);
    } else if (a == "--quick") {
      quick = true;
    } else {
      std::fprintf(stderr, "usage: hostprep_sweep [--gpus N] [--companions C] [--quick]\n");
      return 2;
    }
  }
  if (gpus < 1 || gpus > 16 || companions < 0 || companions > 7) {
    std::fprintf(stderr, "hostprep_sweep: --gpus 1..16, --companions 0..7\n");
    return 2;
  }
  std::vector<SweepCase> cases = fixtureCases();
  for (int g = 1; g <= gpus; ++g) {
    for (int c = 0; c <= companions; ++c) {
      const std::string host =
          "generated " + std::to_string(g) + " GPU(s) x " + std::to_string(c) + " companion(s)";
      auto add = [&](const std::string& what, int vfioEvery, std::optional<Mode> from, Mode to) {
        SweepCase sc;
        sc.name = host + ", " + what;
        sc.hostYaml = generatedTopology(g, c, vfioEvery);
        sc.from = from;
        sc.mode = to;
        cases.push_back(sc);
      };
      add("nvidia -> vm-passthrough", 0, std::nullopt, Mode::kVmPassthrough);
      add("vfio -> container", 0, Mode::kVmPassthrough, Mode::kContainer);
      if (g > 1) {
        add("mixed -> vm-passthrough", 2, std::nullopt, Mode::kVmPassthrough);
        add("mixed -> container", 2, std::nullopt, Mode::kContainer);
      }
    }
  }
  const std::vector<int> errnos =
      quick ? std::vector<int>{EIO} : std::vector<int>{EIO, EBUSY, ENODEV, ETIMEDOUT, EINVAL};

  struct Row {
    const char* name;
    SweepTally tally;
  };
  Row rows[] = {{"fault points (kernel writes x errnos)", {}},
                {"journal write faults", {}},
                {"crash points (SIGKILL after every step)", {}},
                {"crash points (before every host mutation)", {}},
                {"crash points during rollback", {}},
                {"crash points during recovery", {}},
                {"double faults (rollback fails too)", {}}};
  const auto start = std::chrono::steady_clock::now();
  size_t done = 0;
  for (const auto& c : cases) {
    try {
      rows[0].tally += faultSweep(c, errnos);
      rows[1].tally += journalFaultSweep(c);
      rows[2].tally += crashSweep(c);
      rows[3].tally += mutationCrashSweep(c);
      if (!quick) {
        rows[4].tally += rollbackCrashSweep(c);
        rows[5].tally += recoveryCrashSweep(c);
        rows[6].tally += doubleFaultSweep(c);
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", c.name.c_str(), e.what());
      return 1;
    }
    std::fprintf(stderr, "\r%zu/%zu plans", ++done, cases.size());
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "\n");
  std::printf(
      "%zu plans (%zu fixture plans + generated hosts up to %d GPUs x %d companions), %.0f s\n",
      cases.size(), fixtureCases().size(), gpus, companions, secs);
  size_t stranded = 0, points = 0;
  for (const auto& r : rows) {
    if (r.tally.points == 0) continue;
    std::printf("  %-45s %7zu points, %zu stranded\n", r.name, r.tally.points, r.tally.stranded);
    for (const auto& f : r.tally.failures) std::printf("    %s\n", f.c_str());
    stranded += r.tally.stranded;
    points += r.tally.points;
  }
  std::printf("total: %zu points, %zu stranded\n", points, stranded);
  return stranded == 0 ? 0 : 1;
}

// Where a command's time goes: one debug line per phase ("time: <phase> <ms> ms"), printed with
// `hostprep --log-level debug <command> ...`. Used by prepare (converge), preflight, status and
// the agent (each status it writes).
#pragma once

#include <spdlog/spdlog.h>

#include <chrono>
#include <string_view>

namespace hostprep {

class PhaseClock {
 public:
  void lap(std::string_view phase) {
    const auto now = std::chrono::steady_clock::now();
    spdlog::debug("time: {} {:.1f} ms", phase,
                  std::chrono::duration<double, std::milli>(now - last_).count());
    last_ = now;
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

}  // namespace hostprep

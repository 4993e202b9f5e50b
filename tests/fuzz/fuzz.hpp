// Shared bits of the libFuzzer targets: each fuzz_<name>.cpp defines LLVMFuzzerTestOneInput for
// one parser and checks the parser's promises with FUZZ_CHECK, so a broken promise is a finding
// (a crash with a reproducer) just like a sanitizer report.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#define FUZZ_CHECK(cond)                                                                   \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "FUZZ_CHECK failed: %s at %s:%d\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                        \
    }                                                                                      \
  } while (0)

namespace hostprep::fuzz {

inline std::string_view asText(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Splits the input at the first '\n': two independent strings from one input.
inline std::pair<std::string_view, std::string_view> splitFirstLine(std::string_view s) {
  auto nl = s.find('\n');
  if (nl == std::string_view::npos) return {s, {}};
  return {s.substr(0, nl), s.substr(nl + 1)};
}

}  // namespace hostprep::fuzz

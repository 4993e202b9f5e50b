// Small pure string helpers shared by the parsers.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace hostprep {

inline bool startsWith(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}
inline bool endsWith(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

inline std::string_view trim(std::string_view s) {
  const char* ws = " \t\r\n\v\f";
  auto b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  auto e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

// Splits on '\n'; a trailing newline does not make an empty last line.
std::vector<std::string_view> splitLines(std::string_view s);
// Calls f(line) for each line of text (split on `separator`) without copying or collecting them;
// a trailing separator does not make an empty last line. An f that returns bool ends the walk by
// returning false.
template <typename F>
void eachLine(std::string_view text, char separator, F&& f) {
  while (!text.empty()) {
    const size_t end = text.find(separator);
    if constexpr (std::is_same_v<std::invoke_result_t<F&, std::string_view>, bool>) {
      if (!f(text.substr(0, end))) return;
    } else {
      f(text.substr(0, end));
    }
    if (end == std::string_view::npos) return;
    text.remove_prefix(end + 1);
  }
}
// Splits on runs of whitespace; no empty fields.
std::vector<std::string_view> splitWords(std::string_view s);
// Splits on a separator, keeping empty fields.
std::vector<std::string_view> split(std::string_view s, char sep);

// Parses an unsigned number in the given base, with an optional "0x" prefix for base 16.
// The whole (trimmed) string must be consumed.
std::optional<uint64_t> parseUnsigned(std::string_view s, int base = 10);
std::optional<int64_t> parseSigned(std::string_view s);

std::string toLower(std::string_view s);
std::string join(const std::vector<std::string>& parts, std::string_view sep);
// `v` in lower-case hex, zero-padded to `width` digits: hexDigits(0x2236, 4) == "2236".
std::string hexDigits(uint64_t v, int width);

// How deeply arrays and objects nest in a JSON text (the top one is level 1; brackets inside
// strings do not count), in one pass over the bytes, before a parser builds a tree that
// nlohmann-json would copy, compare and print recursively.
size_t jsonNesting(std::string_view text);

}  // namespace hostprep

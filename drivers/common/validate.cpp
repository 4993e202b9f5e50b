#include "drivers/common/validate.hpp"

#include <algorithm>
#include <cstdio>

#include "drivers/common/parsers.hpp"
#include "drivers/common/text.hpp"

namespace hostprep {
namespace {

bool isControl(char c) {
  auto u = static_cast<unsigned char>(c);
  return u < 0x20 || u == 0x7f;
}

std::string controlProblem(std::string_view s) {
  if (s.find('\0') != std::string_view::npos) return "contains a NUL byte";
  if (std::any_of(s.begin(), s.end(), isControl)) return "contains a control character";
  return {};
}

}  // namespace

std::string pathComponentProblem(std::string_view name, size_t maxLen) {
  if (name.empty()) return "is empty";
  if (name.size() > maxLen) return "is longer than " + std::to_string(maxLen) + " bytes";
  if (name == "." || name == "..") return "is a relative directory";
  if (name.find('/') != std::string_view::npos) return "contains '/'";
  return controlProblem(name);
}

std::string hostPathProblem(std::string_view path) {
  if (path.size() > 4095) return "is longer than 4095 bytes";
  if (auto p = controlProblem(path); !p.empty()) return p;
  for (auto part : split(path, '/')) {
    if (part == "..") return "contains a '..' component";
  }
  return {};
}

std::string quoteUntrusted(std::string_view s) {
  std::string out;
  const size_t n = std::min<size_t>(s.size(), 80);
  for (size_t i = 0; i < n; ++i) {
    auto u = static_cast<unsigned char>(s[i]);
    if (u >= 0x20 && u < 0x7f && u != '\\') {
      out += s[i];
    } else {
      out += "\\x" + hexDigits(u, 2);
    }
  }
  if (s.size() > n) out += "...";
  return out;
}

Status checkDriverName(std::string_view what, std::string_view name) {
  if (isValidModuleName(name)) return {};
  std::string why = pathComponentProblem(name, 64);
  if (why.empty()) why = "contains a character outside [A-Za-z0-9_-]";
  return usageError(
      std::string(what) + ": '" + quoteUntrusted(name) + "' is not a driver name: " + why,
      "a driver or module name has letters, digits, '_' and '-' only, at most 64 "
      "characters");
}

Status checkPathComponent(std::string_view what, std::string_view name, size_t maxLen) {
  auto why = pathComponentProblem(name, maxLen);
  if (why.empty()) return {};
  return usageError(
      std::string(what) + ": '" + quoteUntrusted(name) + "' is not a safe name: " + why,
      "a name must not contain '/', NUL or control characters, nor be '.' or '..'");
}

Status checkConfigPath(std::string_view what, std::string_view path) {
  std::string why = path.empty() ? "is empty" : hostPathProblem(path);
  if (why.empty()) return {};
  return usageError(
      std::string(what) + ": '" + quoteUntrusted(path) + "' is not a usable path: " + why,
      "give the path without '..' components");
}

bool isValidKernelRelease(std::string_view r) {
  if (r.empty() || r.size() > 64 || r == "." || r == "..") return false;
  return std::all_of(r.begin(), r.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-' || c == '+' || c == '~';
  });
}

}  // namespace hostprep

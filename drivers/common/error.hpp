// Errors and results for the whole core. Exceptions stop at main; inside, functions return
// Result<T>: a value or an Error that carries errno, the subject, and advice for the operator.
#pragma once

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace hostprep {

// Process exit codes, documented in the README.
enum class Exit : int {
  kOk = 0,       // done, or nothing to do
  kFailed = 1,   // failed; the host was left as it was
  kUsage = 2,    // usage error or bad input
  kRefused = 3,  // refused: device in use, unsafe IOMMU group
};

struct Error {
  std::string message;  // "subject: problem: detail"
  int err = 0;          // errno, 0 if none
  std::string advice;   // what the operator can do about it; may be empty
  Exit exit = Exit::kFailed;

  // The one-line form shown to users: message, errno text, advice in parentheses.
  std::string describe() const {
    std::string s = message;
    if (err != 0) s += std::string(": ") + std::strerror(err);
    if (!advice.empty()) s += " (" + advice + ")";
    return s;
  }
};

inline Error sysError(std::string message, int err, std::string advice = {}) {
  return Error{std::move(message), err, std::move(advice), Exit::kFailed};
}
inline Error usageError(std::string message, std::string advice = {}) {
  return Error{std::move(message), 0, std::move(advice), Exit::kUsage};
}
inline Error refusal(std::string message, std::string advice = {}) {
  return Error{std::move(message), 0, std::move(advice), Exit::kRefused};
}

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(v_); }
  T value_or(T fallback) const { return ok() ? value() : std::move(fallback); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : e_(std::move(error)) {}  // NOLINT(google-explicit-constructor)
  bool ok() const { return !e_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return *e_; }

 private:
  std::optional<Error> e_;
};

using Status = Result<void>;

}  // namespace hostprep

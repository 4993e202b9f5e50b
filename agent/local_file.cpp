#include "agent/local_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace hostprep {

namespace {

// "1 GiB", "16 MiB", or a count of bytes.
std::string sizeText(size_t n) {
  if (n >= (size_t{1} << 30) && n % (size_t{1} << 30) == 0) return std::to_string(n >> 30) + " GiB";
  if (n >= (size_t{1} << 20) && n % (size_t{1} << 20) == 0) return std::to_string(n >> 20) + " MiB";
  return std::to_string(n) + " bytes";
}

}  // namespace

std::string localFileName(const std::string& path) { return path == "-" ? "standard input" : path; }

std::string underRoot(const Host& host, std::string_view path) {
  if (host.root() == "/") return "";
  return " under --root " + host.root().string() + " (read as " + host.resolve(path).string() + ")";
}

Result<std::string> readHostFile(const Host& host, std::string_view option, std::string_view path,
                                 size_t cap) {
  auto text = host.read(path, cap);
  if (text) return text;
  const std::string shown = (path.substr(0, 1) == "/" ? "" : "/") + std::string(path);
  const std::string where = std::string(option) + ": " + shown + underRoot(host, path);
  if (text.error().err == EFBIG) {
    return Error{where + ": larger than " + sizeText(cap), EFBIG, "pass a smaller file",
                 Exit::kUsage};
  }
  return Error{std::string(option) + ": cannot read " + shown + underRoot(host, path),
               text.error().err, "check the path: a file option names a host path, under --root",
               Exit::kUsage};
}

Result<std::string> readLocalFile(const std::string& path, size_t cap) {
  const bool stdinput = path == "-";
  int fd = stdinput ? 0 : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error{path + ": cannot open", errno, "check the path", Exit::kUsage};
  struct Closer {
    int fd;
    ~Closer() {
      if (fd != 0) ::close(fd);
    }
  } closer{fd};
  std::string text;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return Error{localFileName(path) + ": cannot read", errno, "pass a regular file",
                   Exit::kUsage};
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > cap) {
      return Error{localFileName(path) + ": larger than " + sizeText(cap), EFBIG,
                   "pass a smaller file", Exit::kUsage};
    }
  }
  return text;
}

}  // namespace hostprep

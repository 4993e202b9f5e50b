#include "drivers/host.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <memory>
#include <mutex>
#include <vector>

#include "drivers/c_handle.hpp"
#include "drivers/text.hpp"
#include "drivers/validate.hpp"

namespace hostprep {
namespace {

struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

// Host paths are built from names that were validated; this is the last line of defence against
// one that was not ("../", NUL): such a path is refused before it reaches the filesystem.
std::optional<Error> unsafePath(std::string_view p) {
  auto why = hostPathProblem(p);
  if (why.empty()) return std::nullopt;
  return sysError("refusing host path '" + quoteUntrusted(p) + "': " + why, EINVAL,
                  "this is a bug or hostile input: a name read from input was not validated");
}

Status writeAll(int fd, std::string_view data) {
  // sysfs takes one write per attribute: a short write is an error, not a reason to loop.
  ssize_t n = ::write(fd, data.data(), data.size());
  if (n < 0) return sysError("write", errno);
  if (static_cast<size_t>(n) != data.size()) return sysError("short write", EIO);
  return {};
}

// Children a timed operation gave up on (reapStrayChildren).
std::mutex gStrayMutex;
std::vector<pid_t> gStrays;

// Waits at most until `deadline` for child `pid`: 0 or the errno it exited with; ETIMEDOUT when
// it is still running (it is then left to finish on its own: it may be in uninterruptible sleep
// in the kernel, where no signal reaches it, and is reaped by reapStrayChildren); EIO when it
// died.
int waitChild(pid_t pid, std::chrono::steady_clock::time_point deadline) {
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  FdCloser closer{pidfd};
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : EIO;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      std::lock_guard<std::mutex> g(gStrayMutex);
      gStrays.push_back(pid);
      return ETIMEDOUT;
    }
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(std::min<long>(left.count(), 1000)));
    } else {
      ::usleep(static_cast<useconds_t>(std::min<long>(left.count(), 10) * 1000));
    }
  }
}

std::string seconds(std::chrono::milliseconds t) {
  return std::to_string(static_cast<double>(t.count()) / 1000.0) + " s";
}

// Runs one write in a child process and waits at most `timeout` for it. The child does only
// async-signal-safe work (open, write, _exit), so forking from a threaded process is fine.
Status timedWrite(const std::string& path, std::string_view data,
                  std::chrono::milliseconds timeout) {
  (void)reapStrayChildren();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  pid_t pid = ::fork();
  if (pid < 0) return sysError("fork", errno);
  if (pid == 0) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) ::_exit(errno & 0xff);
    ssize_t n = ::write(fd, data.data(), data.size());
    int e = n < 0 ? errno : (static_cast<size_t>(n) == data.size() ? 0 : EIO);
    ::_exit(e & 0xff);
  }
  int e = waitChild(pid, deadline);
  if (e == ETIMEDOUT) return sysError("write did not return in " + seconds(timeout), ETIMEDOUT);
  if (e != 0) return sysError("write", e);
  return {};
}

// The same for a read of at most kTimedReadCap bytes: the child reads into a pipe (which holds
// more than that, so it never waits on us) and exits; the parent reads the pipe once it has.
constexpr size_t kTimedReadCap = 4096;
Result<std::string> timedRead(const std::string& path, std::chrono::milliseconds timeout) {
  (void)reapStrayChildren();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return sysError("pipe", errno);
  FdCloser rd{fds[0]};
  std::array<char, kTimedReadCap + 1> buf{};
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    ::close(fds[1]);
    return sysError("fork", e);
  }
  if (pid == 0) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) ::_exit(errno & 0xff);
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) ::_exit(errno & 0xff);
    if (static_cast<size_t>(n) > kTimedReadCap) ::_exit(EFBIG);
    if (n > 0 && ::write(fds[1], buf.data(), static_cast<size_t>(n)) != n) ::_exit(EIO);
    ::_exit(0);
  }
  ::close(fds[1]);
  int e = waitChild(pid, deadline);
  if (e == ETIMEDOUT) return sysError("read did not return in " + seconds(timeout), ETIMEDOUT);
  if (e != 0) return sysError("read", e);
  std::string out;
  for (;;) {
    ssize_t n = ::read(fds[0], buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf.data(), static_cast<size_t>(n));
  }
  return out;
}

}  // namespace

size_t reapStrayChildren() {
  std::lock_guard<std::mutex> g(gStrayMutex);
  std::erase_if(gStrays, [](pid_t pid) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    return r == pid || (r < 0 && errno == ECHILD);
  });
  return gStrays.size();
}

std::filesystem::path Host::resolve(std::string_view hostPath) const {
  while (startsWith(hostPath, "/")) hostPath.remove_prefix(1);
  if (hostPath.empty()) return root();
  return root() / std::filesystem::path(hostPath);
}

RootHost::RootHost(std::filesystem::path root) : root_(std::move(root)) {}

Result<std::string> RootHost::read(std::string_view path, size_t cap) const {
  if (auto e = unsafePath(path)) return *e;
  const std::string p = resolve(path);
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return sysError("cannot read " + p, errno);
  FdCloser closer{fd};
  std::string out;
  std::array<char, 4096> buf{};
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return sysError("cannot read " + p, errno);
    }
    if (n == 0) break;
    if (out.size() + static_cast<size_t>(n) > cap) {
      return sysError("cannot read " + p + ": larger than " + std::to_string(cap) + " bytes",
                      EFBIG);
    }
    out.append(buf.data(), static_cast<size_t>(n));
  }
  return out;
}

Result<std::string> RootHost::readLink(std::string_view path) const {
  if (auto e = unsafePath(path)) return *e;
  const std::string p = resolve(path);
  std::array<char, 4096> buf{};
  ssize_t n = ::readlink(p.c_str(), buf.data(), buf.size() - 1);
  if (n < 0) return sysError("cannot read link " + p, errno);
  return std::string(buf.data(), static_cast<size_t>(n));
}

Result<std::vector<std::string>> RootHost::list(std::string_view dir) const {
  if (auto e = unsafePath(dir)) return *e;
  const std::string p = resolve(dir);
  CHandle<DIR, ::closedir> d(::opendir(p.c_str()));
  if (!d) return sysError("cannot list " + p, errno);
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d.get())) {
    std::string_view n = e->d_name;
    if (n == "." || n == "..") continue;
    names.emplace_back(n);
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool RootHost::exists(std::string_view path) const {
  if (unsafePath(path)) return false;
  struct stat st {};
  return ::lstat(resolve(path).c_str(), &st) == 0;
}

Result<FileOwnership> RootHost::ownership(std::string_view path) const {
  if (auto e = unsafePath(path)) return *e;
  const std::string p = resolve(path);
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return sysError("cannot stat " + p, errno);
  return FileOwnership{st.st_uid, st.st_mode};
}

Result<std::string> RootHost::readAttr(std::string_view path,
                                       std::chrono::milliseconds timeout) const {
  if (auto e = unsafePath(path)) return *e;
  const std::string p = resolve(path);
  auto r = timedRead(p, timeout);
  if (!r) return sysError("cannot read " + p + ": " + r.error().message, r.error().err);
  return r;
}

Status RootHost::writeAttr(std::string_view path, std::string_view data,
                           std::optional<std::chrono::milliseconds> timeout) {
  if (auto e = unsafePath(path)) return *e;
  const std::string p = resolve(path);
  if (timeout) {
    auto s = timedWrite(p, data, *timeout);
    if (!s)
      return sysError("cannot write '" + std::string(trim(data)) + "' to " + p, s.error().err);
    return s;
  }
  int fd = ::open(p.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return sysError("cannot open " + p, errno);
  FdCloser closer{fd};
  auto s = writeAll(fd, data);
  if (!s) return sysError("cannot write '" + std::string(trim(data)) + "' to " + p, s.error().err);
  return {};
}

Status RootHost::writeFileAtomic(std::string_view path, std::string_view data, mode_t mode) {
  if (auto e = unsafePath(path)) return *e;
  const std::filesystem::path p = resolve(path);
  std::string tmpl = (p.parent_path() / ("." + p.filename().string() + ".XXXXXX")).string();
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0) return sysError("cannot create a temporary file beside " + p.string(), errno);
  bool ok = false;
  {
    FdCloser closer{fd};
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::write(fd, data.data() + off, data.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    ok = off == data.size() && ::fchmod(fd, mode) == 0 && ::fsync(fd) == 0;
  }
  int e = errno;
  if (!ok || ::rename(tmpl.c_str(), p.c_str()) != 0) {
    e = ok ? errno : e;
    ::unlink(tmpl.c_str());
    return sysError("cannot write " + p.string(), e);
  }
  // Make the rename itself durable.
  int dfd = ::open(p.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return {};
}

Status RootHost::makeDirs(std::string_view path, mode_t mode) {
  if (auto e = unsafePath(path)) return *e;
  std::error_code ec;
  const auto p = resolve(path);
  std::filesystem::create_directories(p, ec);
  if (ec) return sysError("cannot create directory " + p.string(), ec.value());
  ::chmod(p.c_str(), mode);
  return {};
}

Status RootHost::removeFile(std::string_view path) {
  if (auto e = unsafePath(path)) return *e;
  const std::string p = resolve(path);
  if (::unlink(p.c_str()) != 0 && errno != ENOENT) return sysError("cannot remove " + p, errno);
  return {};
}

Result<FileLock> RootHost::tryLock(std::string_view path) {
  if (auto e = unsafePath(path)) return *e;
  const std::string p = resolve(path);
  int fd = ::open(p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return sysError("cannot open lock " + p, errno);
  FileLock lock(fd);
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    return sysError("cannot lock " + p, errno);
  }
  return lock;
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);
}

std::optional<std::string> readTrimmed(const Host& host, std::string_view path) {
  auto r = host.read(path, size_t{64} * 1024);
  if (!r) return std::nullopt;
  return std::string(trim(*r));
}

std::optional<std::string> readLinkName(const Host& host, std::string_view path) {
  auto r = host.readLink(path);
  if (!r) return std::nullopt;
  std::string_view t = *r;
  while (endsWith(t, "/")) t.remove_suffix(1);
  auto slash = t.rfind('/');
  return std::string(slash == std::string_view::npos ? t : t.substr(slash + 1));
}

std::string hostPath(std::string_view a, std::string_view b) {
  std::string out(a);
  while (!out.empty() && out.back() == '/') out.pop_back();
  while (startsWith(b, "/")) b.remove_prefix(1);
  if (!out.empty()) out += '/';
  out += b;
  return out;
}

}  // namespace hostprep

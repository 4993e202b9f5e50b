#include "drivers/seam/timed_io.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "drivers/seam/host.hpp"

namespace hostprep {
namespace {

// A timed read or write runs in a child process, so that one the kernel does not answer (an
// unbind waiting for a driver's remove(), a driver_override read waiting for the device lock)
// cannot hang hostprep: the child is left in the kernel and hostprep goes on. The child shares
// hostprep's memory (clone(2) with CLONE_VM, as posix_spawn(3) starts its children) instead of
// being a fork(2): no page tables to copy and no copy-on-write faults afterwards, so a timed write
// costs about as much as starting a thread. The child lives on a mapping of its own (its stack,
// the request and the answer), unmapped only once the child has been reaped, and makes raw system
// calls only: the C library's wrappers set errno, which in a CLONE_VM child is the parent
// thread's. Elsewhere than x86-64 and arm64 the child is a fork(2) as before; the mapping is
// MAP_SHARED, so the answer comes back the same way.
#if defined(__x86_64__) || defined(__aarch64__)
constexpr bool kCloneVm = true;
#else
constexpr bool kCloneVm = false;
#endif

// The system call `n`: its result, or -errno; never touches errno.
[[gnu::always_inline]] inline long sys(long n, long a = 0, long b = 0, long c = 0, long d = 0) {
#if defined(__x86_64__)
  long ret;
  register long r10 __asm__("r10") = d;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10)
                   : "rcx", "r11", "memory");
  return ret;
#elif defined(__aarch64__)
  register long x8 __asm__("x8") = n;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  register long x3 __asm__("x3") = d;
  __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory", "cc");
  return x0;
#else
  long r = ::syscall(n, a, b, c, d);  // a forked child: its errno is its own
  return r < 0 ? -errno : r;
#endif
}

constexpr size_t kTimedReadCap = 4096;
enum class ChildOp { kWrite, kRead };
// What a child is asked to do and what it answers, above the child's stack in its mapping; the
// data (what to write, or what was read) follows it.
struct ChildJob {
  ChildOp op = ChildOp::kWrite;
  size_t size = 0;                // bytes of data
  std::array<char, 4096> path{};  // NUL-terminated (PATH_MAX, with its NUL)
  char* data() { return reinterpret_cast<char*>(this + 1); }
};
constexpr size_t kChildStack = size_t{64} * 1024;

#ifndef SYS_close_range
#define SYS_close_range 436  // Linux 5.9, the same number on x86-64 and arm64
#endif

// The child: one open and one write or read; its exit status is the errno (0: done).
__attribute__((no_sanitize("address", "undefined"), noinline)) int childMain(void* arg) {
  auto* job = static_cast<ChildJob*>(arg);
  // The child has a copy of hostprep's descriptors (clone without CLONE_FILES, like fork), and
  // the kernel may keep it for as long as a remove() waits. Nothing of hostprep's may stay with
  // it: not the run lock (a flock(2) lock holds while any descriptor of its open file is open, so
  // every later run would find the lock taken), not a pipe its caller reads to the end. Kernels
  // before 5.9 have no close_range(2): the first 1024 descriptors, where hostprep's are.
  if (sys(SYS_close_range, 0, static_cast<long>(UINT32_MAX), 0) == -ENOSYS) {
    for (long fd = 0; fd < 1024; ++fd) sys(SYS_close, fd);
  }
  if (job->path.back() != '\0') return ENAMETOOLONG;  // what open(2) says to a path this long
  const bool write = job->op == ChildOp::kWrite;
  const long flags =
      write ? (O_WRONLY | O_CLOEXEC) : (O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  long fd = sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>(job->path.data()), flags);
  if (fd < 0) return static_cast<int>(-fd) & 0xff;
  if (write) {
    // sysfs takes one write per attribute: a short write is an error, not a reason to loop.
    long n = sys(SYS_write, fd, reinterpret_cast<long>(job->data()), static_cast<long>(job->size));
    if (n < 0) return static_cast<int>(-n) & 0xff;
    return static_cast<size_t>(n) == job->size ? 0 : EIO;
  }
  long n =
      sys(SYS_read, fd, reinterpret_cast<long>(job->data()), static_cast<long>(kTimedReadCap + 1));
  if (n < 0) return static_cast<int>(-n) & 0xff;
  if (static_cast<size_t>(n) > kTimedReadCap) return EFBIG;
  job->size = static_cast<size_t>(n);
  return 0;
}

// A child and its mapping (stack, job, data).
struct Child {
  pid_t pid = -1;
  void* mapping = nullptr;
  size_t length = 0;
  ChildJob* job = nullptr;
};

// Children a timed operation gave up on (reapStrayChildren), with their mappings.
std::mutex gStrayMutex;
std::vector<Child> gStrays;

void unmap(const Child& c) {
  if (c.mapping) ::munmap(c.mapping, c.length);
}

// A mapping with the job in it, ready for startChild.
Result<Child> newChild(ChildOp op, const std::string& path, std::string_view data) {
  const size_t length = kChildStack + sizeof(ChildJob) + std::max(data.size(), kTimedReadCap + 1);
  void* m = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_STACK,
                   -1, 0);
  if (m == MAP_FAILED) return sysError("mmap", errno);
  Child c{-1, m, length, new (static_cast<char*>(m) + kChildStack) ChildJob};
  c.job->op = op;
  std::copy_n(path.begin(), std::min(path.size(), c.job->path.size()), c.job->path.begin());
  std::copy(data.begin(), data.end(), c.job->data());
  c.job->size = data.size();
  return c;
}

// Starts the child with every signal blocked (it must not run hostprep's handlers on its stack;
// SIGKILL still ends it, as it would a forked child).
Status startChild(Child& c) {
  sigset_t all, old;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  pid_t pid = -1;
  if constexpr (kCloneVm) {
    pid =
        ::clone(childMain, static_cast<char*>(c.mapping) + kChildStack, CLONE_VM | SIGCHLD, c.job);
  } else {
    pid = ::fork();
    if (pid == 0) ::_exit(childMain(c.job));
  }
  const int e = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) {
    unmap(c);
    return sysError(kCloneVm ? "clone" : "fork", e);
  }
  c.pid = pid;
  return {};
}

// Waits at most until `deadline` for child `c`: 0 or the errno it exited with; ETIMEDOUT when
// it is still running (it is then left to finish on its own: it may be in uninterruptible sleep
// in the kernel, where no signal reaches it, and is reaped, its mapping unmapped, by
// reapStrayChildren); EIO when it died.
int waitChild(const Child& c, std::chrono::steady_clock::time_point deadline) {
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, c.pid, 0));
  struct Closer {
    int fd;
    ~Closer() {
      if (fd >= 0) ::close(fd);
    }
  } closer{pidfd};
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(c.pid, &status, WNOHANG);
    if (r == c.pid) return WIFEXITED(status) ? WEXITSTATUS(status) : EIO;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      std::lock_guard<std::mutex> g(gStrayMutex);
      gStrays.push_back(c);
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

// Is an earlier timed read of `path` still waiting in the kernel? A new one would wait on the
// same lock (a device lock an unbind holds), so it is answered ETIMEDOUT at once instead of
// starting another child: while the kernel stays stuck, a caller that re-reads (the agent, at
// every event) leaves one waiting child per attribute, not one per read.
bool readStillWaiting(const std::string& path) {
  std::lock_guard<std::mutex> g(gStrayMutex);
  return std::any_of(gStrays.begin(), gStrays.end(), [&](const Child& c) {
    const auto& p = c.job->path;
    return c.job->op == ChildOp::kRead &&
           std::string_view(p.data(), ::strnlen(p.data(), p.size())) == path;
  });
}

// Runs one job in a child and waits at most `timeout` for it: the child's errno (ETIMEDOUT: it
// has not answered), or why no child could start. On 0, `answer` (when given) receives what a
// read returned.
Result<int> runChild(ChildOp op, const std::string& path, std::string_view data,
                     std::chrono::milliseconds timeout, std::string* answer = nullptr) {
  (void)reapStrayChildren();
  if (op == ChildOp::kRead && readStillWaiting(path))
    return sysError("an earlier read of it has not returned yet", ETIMEDOUT);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto c = newChild(op, path, data);
  if (!c) return c.error();
  if (auto s = startChild(*c); !s) return s.error();
  int e = waitChild(*c, deadline);
  if (e == ETIMEDOUT) return e;  // the mapping went with the child to gStrays
  if (e == 0 && answer) answer->assign(c->job->data(), c->job->size);
  unmap(*c);
  return e;
}

std::string seconds(std::chrono::milliseconds t) {
  return std::to_string(static_cast<double>(t.count()) / 1000.0) + " s";
}

}  // namespace

Status timedWrite(const std::string& path, std::string_view data,
                  std::chrono::milliseconds timeout) {
  auto e = runChild(ChildOp::kWrite, path, data, timeout);
  if (!e) return e.error();
  if (*e == ETIMEDOUT) return sysError("write did not return in " + seconds(timeout), ETIMEDOUT);
  if (*e != 0) return sysError("write", *e);
  return {};
}

Result<std::string> timedRead(const std::string& path, std::chrono::milliseconds timeout) {
  std::string out;
  auto e = runChild(ChildOp::kRead, path, {}, timeout, &out);
  if (!e) return e.error();
  if (*e == ETIMEDOUT) return sysError("read did not return in " + seconds(timeout), ETIMEDOUT);
  if (*e != 0) return sysError("read", *e);
  return out;
}

size_t reapStrayChildren() {
  std::lock_guard<std::mutex> g(gStrayMutex);
  std::erase_if(gStrays, [](const Child& c) {
    int status = 0;
    pid_t r = ::waitpid(c.pid, &status, WNOHANG);
    if (r != c.pid && !(r < 0 && errno == ECHILD)) return false;
    unmap(c);
    return true;
  });
  return gStrays.size();
}

}  // namespace hostprep

#include "drivers/seam/host.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <memory>
#include <utility>
#include <vector>

#include "drivers/common/text.hpp"
#include "drivers/common/validate.hpp"
#include "drivers/seam/timed_io.hpp"

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

}  // namespace

std::filesystem::path Host::resolve(std::string_view hostPath) const {
  while (startsWith(hostPath, "/")) hostPath.remove_prefix(1);
  if (hostPath.empty()) return root();
  return root() / std::filesystem::path(hostPath);
}

Status checkRootDir(const std::filesystem::path& root) {
  const std::string advice =
      "pass the root of a host (/), of a mounted image, or the host's / as a pod mounts it "
      "(e.g. /host)";
  struct stat st {};
  if (::stat(root.c_str(), &st) != 0) {
    const int e = errno;
    return Error{"--root: cannot use '" + root.string() + "'", e, advice, Exit::kUsage};
  }
  if (!S_ISDIR(st.st_mode)) {
    return usageError("--root: '" + root.string() + "' is not a directory", advice);
  }
  return {};
}

Status checkLiveHost(const Host& host) {
  if (host.exists("sys/bus/pci/devices")) return {};
  const std::string root = host.root().string();
  return usageError("--root: '" + root + "' is not the root of a running Linux host: it has no " +
                        host.resolve("sys/bus/pci/devices").string(),
                    "pass /, or the host's / as a pod mounts it with /sys under it (e.g. /host); "
                    "to check an image root, use 'hostprep preflight --image'");
}

Status checkFileTarget(const Host& host, std::string_view path, std::string_view what) {
  if (auto o = host.ownership(path); o && S_ISDIR(o->mode)) {
    return usageError(std::string(what) + ": '" + std::string(path) + "' is a directory",
                      "name the file to write in it, e.g. " +
                          (std::filesystem::path(path) / "status.json").string());
  }
  return {};
}

RootHost::RootHost(std::filesystem::path root) : root_(std::move(root)) {}

namespace {

// Opens a host path to read; sets `resolved` to where it lives on this machine.
Result<int> openToRead(const Host& host, std::string_view path, std::string& resolved) {
  if (auto e = unsafePath(path)) return *e;
  resolved = host.resolve(path);
  int fd = ::open(resolved.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return sysError("cannot read " + resolved, errno);
  return fd;
}

size_t regularFileSize(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 0) return 0;
  return static_cast<size_t>(st.st_size);
}

// Reads an open file straight into the string. `size` is its size from fstat, or 0 when not
// known: then the first read is a page, which holds any sysfs attribute (the most common read,
// one system call fewer), and a file that fills it is sized with fstat once. A regular file is
// read into one buffer of its size (a module index is megabytes, and growing a string by appends
// copied it and faulted in fresh pages at every doubling); procfs files, which report 0, grow by
// doubling. With `shortIsEnd` (a sysfs attribute), a read that returns less than it asked for is
// the end, and the read that would return 0 is saved too; unless it returned whole pages: kernfs
// gives a binary attribute at most a page per read (fs/kernfs/file.c, kernfs_file_read_iter).
Result<std::string> readOpened(int fd, const std::string& p, size_t size, size_t cap,
                               bool shortIsEnd = false) {
  bool sized = size > 0;
  std::string out(sized ? std::min(size, cap) + 1 : 4096 + 1, '\0');  // +1: sees EOF in one read
  size_t used = 0;
  for (;;) {
    if (used == out.size()) {
      size_t next = used * 2;
      if (!sized) {
        sized = true;
        if (const size_t s = regularFileSize(fd); s >= used) next = std::min(s, cap) + 1;
      }
      out.resize(next);
    }
    const size_t asked = out.size() - used;
    ssize_t n = ::read(fd, out.data() + used, asked);
    if (n < 0) {
      if (errno == EINTR) continue;
      return sysError("cannot read " + p, errno);
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
    if (used > cap) {
      return sysError("cannot read " + p + ": larger than " + std::to_string(cap) + " bytes",
                      EFBIG);
    }
    if (shortIsEnd && static_cast<size_t>(n) < asked && static_cast<size_t>(n) % 4096 != 0) break;
  }
  out.resize(used);
  return out;
}

}  // namespace

Result<std::string> RootHost::read(std::string_view path, size_t cap) const {
  std::string p;
  auto fd = openToRead(*this, path, p);
  if (!fd) return fd.error();
  FdCloser closer{*fd};
  // sysfs fills an attribute's whole value on the first read ("On read(2), the show() method
  // should fill the entire buffer", Documentation/filesystems/sysfs.rst); a regular file under a
  // fixture root returns less than asked only at its end (read(2)).
  std::string_view rel = path;
  while (startsWith(rel, "/")) rel.remove_prefix(1);
  return readOpened(*fd, p, 0, cap, startsWith(rel, "sys/"));
}

Result<std::string> Host::readHead(std::string_view path, size_t n) const {
  auto t = read(path);
  if (!t) return t.error();
  if (t->size() > n) t->resize(n);
  return t;
}

Result<std::string> RootHost::readHead(std::string_view path, size_t n) const {
  std::string p;
  auto fd = openToRead(*this, path, p);
  if (!fd) return fd.error();
  FdCloser closer{*fd};
  std::string out(n, '\0');
  ssize_t got;
  do {
    got = ::pread(*fd, out.data(), n, 0);
  } while (got < 0 && errno == EINTR);
  if (got < 0) return sysError("cannot read " + p, errno);
  out.resize(static_cast<size_t>(got));
  return out;
}

FileText FileText::mapped(const void* data, size_t size) {
  FileText t;
  t.map_ = static_cast<const char*>(data);
  t.mapSize_ = size;
  return t;
}

FileText::FileText(FileText&& o) noexcept
    : text_(std::move(o.text_)), map_(std::exchange(o.map_, nullptr)), mapSize_(o.mapSize_) {}

FileText& FileText::operator=(FileText&& o) noexcept {
  std::swap(text_, o.text_);  // o unmaps what this held
  std::swap(map_, o.map_);
  std::swap(mapSize_, o.mapSize_);
  return *this;
}

FileText::~FileText() {
  if (map_) ::munmap(const_cast<char*>(map_), mapSize_);
}

Result<FileText> Host::readText(std::string_view path, size_t cap) const {
  auto t = read(path, cap);
  if (!t) return t.error();
  return FileText(std::move(*t));
}

Result<FileText> RootHost::readText(std::string_view path, size_t cap) const {
  // Below this a copy costs less than a mapping's set-up and tear-down.
  constexpr size_t kMapFrom = size_t{64} << 10;
  std::string p;
  auto fd = openToRead(*this, path, p);
  if (!fd) return fd.error();
  FdCloser closer{*fd};
  const size_t size = regularFileSize(*fd);
  if (size >= kMapFrom && size <= cap) {
    // MAP_POPULATE maps the page cache's pages up front: no fault per page while scanning.
    // depmod replaces its files by rename, so the mapped inode is never truncated under us.
    void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, *fd, 0);
    if (m != MAP_FAILED) return FileText::mapped(m, size);
  }
  auto t = readOpened(*fd, p, size, cap);  // small, too big (EFBIG), or not mappable
  if (!t) return t.error();
  return FileText(std::move(*t));
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
  auto names = listUnordered(dir);
  if (names) std::sort(names->begin(), names->end());
  return names;
}

Result<std::vector<std::string>> RootHost::listUnordered(std::string_view dir) const {
  if (auto e = unsafePath(dir)) return *e;
  const std::string p = resolve(dir);
  // getdents64(2) on the directory, not opendir(3): opendir fstat()s the directory to size its
  // buffer, one system call more per listing (a PCI function's directory, an IOMMU group's), which
  // under an emulator costs as much as reading an attribute.
  FdCloser d{::open(p.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (d.fd < 0) return sysError("cannot list " + p, errno);
  std::vector<std::string> names;
  alignas(dirent64) std::array<char, 32768> buf;
  for (;;) {
    const long n = ::syscall(SYS_getdents64, d.fd, buf.data(), buf.size());
    if (n < 0) return sysError("cannot list " + p, errno);
    if (n == 0) break;
    // Room for as many names as this buffer can hold (an entry takes at least 24 bytes), so that
    // a directory of 4,098 PCI functions is not moved through a dozen reallocations.
    names.reserve(names.size() + static_cast<size_t>(n) / 24);
    for (long at = 0; at < n;) {
      const auto* e = reinterpret_cast<const dirent64*>(buf.data() + at);
      at += e->d_reclen;
      std::string_view name = e->d_name;
      if (name == "." || name == "..") continue;
      names.emplace_back(name);
    }
  }
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

namespace {

// Writes all of `data` to fd, sets its mode and makes it durable.
bool fillFile(int fd, std::string_view data, mode_t mode) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return ::fchmod(fd, mode) == 0 && ::fsync(fd) == 0;
}

// Gives the unnamed file fd (O_TMPFILE) the name `name`: linkat(2) of /proc/self/fd/N with
// AT_SYMLINK_FOLLOW, as open(2) shows for O_TMPFILE. A name of this process's pid that exists
// was left by a dead process with the same pid (killed between this link and its rename): it
// goes. False, with errno, when the file cannot be named (no /proc).
bool nameUnnamed(int fd, const std::string& name) {
  const std::string self = "/proc/self/fd/" + std::to_string(fd);
  for (int tries = 0; tries < 2; ++tries) {
    if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW) == 0)
      return true;
    if (errno != EEXIST) return false;
    ::unlink(name.c_str());
  }
  return false;
}

}  // namespace

// The new content goes to an unnamed file in the target's directory (O_TMPFILE), is made durable,
// then gets a temporary name and is renamed over the target, whose directory entry is made
// durable too. A run killed while it writes (SIGKILL, power loss) leaves nothing behind: an
// unnamed file goes with its last descriptor; only a kill between the link and the rename leaves
// a `.NAME.PID.N` file. Where the filesystem has no O_TMPFILE (EOPNOTSUPP; EISDIR before Linux
// 3.11) or /proc is missing, a mkstemp(3) file `.NAME.XXXXXX` is written and renamed instead.
Status RootHost::writeFileAtomic(std::string_view path, std::string_view data, mode_t mode) {
  if (auto e = unsafePath(path)) return *e;
  const std::filesystem::path p = resolve(path);
  const std::string base = (p.parent_path() / ("." + p.filename().string() + ".")).string();
  static std::atomic<unsigned> serial{0};
  std::string tmp = base + std::to_string(::getpid()) + "." + std::to_string(serial++);
  int err = 0;
  bool ok = false;
  int fd = ::open(p.parent_path().c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
  if (fd >= 0) {
    FdCloser closer{fd};
    if (!fillFile(fd, data, mode)) return sysError("cannot write " + p.string(), errno);
    ok = nameUnnamed(fd, tmp);
  }
  if (!ok) {  // no O_TMPFILE here, or it could not be named: a named temporary file
    tmp = base + "XXXXXX";
    fd = ::mkstemp(tmp.data());
    if (fd < 0) return sysError("cannot create a temporary file beside " + p.string(), errno);
    FdCloser closer{fd};
    ok = fillFile(fd, data, mode);
    err = errno;
  }
  if (!ok || ::rename(tmp.c_str(), p.c_str()) != 0) {
    err = ok ? errno : err;
    ::unlink(tmp.c_str());
    return sysError("cannot write " + p.string(), err);
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

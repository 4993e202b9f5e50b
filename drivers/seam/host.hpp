// The one seam between hostprep and the operating system. Every sysfs, procfs, /dev, /run and
// /etc access goes through a Host rooted at a directory (--root, default "/"), the way ninja's
// builder only sees a DiskInterface. Paths given to a Host are host paths without the leading
// slash ("sys/bus/pci/devices"); the Host prefixes its root. Tests hand the core a fake kernel
// that implements this interface over a fixture tree.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "drivers/common/error.hpp"

namespace hostprep {

// Never trust st_size on sysfs: read to EOF, but never more than this.
inline constexpr size_t kDefaultReadCap = 1u << 20;

// Who owns a file, its type and its permission bits (stat(2) st_uid, st_mode).
struct FileOwnership {
  uid_t owner = 0;
  mode_t mode = 0;
};

// An exclusive lock on a file (flock(2) LOCK_EX), held until destroyed.
class FileLock {
 public:
  explicit FileLock(int fd) : fd_(fd) {}
  FileLock(FileLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  FileLock& operator=(FileLock&&) = delete;
  FileLock(const FileLock&) = delete;
  ~FileLock();

 private:
  int fd_ = -1;
};

// A file's bytes held for reading in place: a read-only mapping of a large regular file, or a
// string. Move-only.
class FileText {
 public:
  FileText() = default;
  explicit FileText(std::string text) : text_(std::move(text)) {}
  static FileText mapped(const void* data, size_t size);  // takes the mapping over
  FileText(FileText&& o) noexcept;
  FileText& operator=(FileText&& o) noexcept;
  FileText(const FileText&) = delete;
  FileText& operator=(const FileText&) = delete;
  ~FileText();

  std::string_view view() const { return map_ ? std::string_view(map_, mapSize_) : text_; }

 private:
  std::string text_;
  const char* map_ = nullptr;
  size_t mapSize_ = 0;
};

class Host {
 public:
  virtual ~Host() = default;

  // The directory every host path lives under.
  virtual const std::filesystem::path& root() const = 0;
  // Where a host path lives on this machine.
  std::filesystem::path resolve(std::string_view hostPath) const;

  // Reads a whole file up to `cap` bytes (ENOENT when absent, EFBIG when longer than cap).
  virtual Result<std::string> read(std::string_view path, size_t cap = kDefaultReadCap) const = 0;
  // The same bytes to scan in place (module indexes are megabytes): RootHost maps a large
  // regular file instead of copying it; every other Host reads it.
  virtual Result<FileText> readText(std::string_view path, size_t cap = kDefaultReadCap) const;
  // The first `n` bytes of a file (fewer at its end), and no more: a function's `config` is read
  // from the device itself, one dword at a time, and one that no longer answers makes each of
  // them wait for a completion timeout. By default the whole file, cut.
  virtual Result<std::string> readHead(std::string_view path, size_t n) const;
  // The target of a symbolic link, as stored.
  virtual Result<std::string> readLink(std::string_view path) const = 0;
  // Names in a directory, sorted; ENOENT when absent.
  virtual Result<std::vector<std::string>> list(std::string_view dir) const = 0;
  // The same names in no particular order, for a caller that keys or sorts them itself (the
  // snapshot's listings of every PCI function and IOMMU group: sorting 4,098 names as strings
  // was 6% of a preflight on 4,098 functions). By default the sorted list.
  virtual Result<std::vector<std::string>> listUnordered(std::string_view dir) const {
    return list(dir);
  }
  virtual bool exists(std::string_view path) const = 0;
  // The owner and mode of a file, following symbolic links.
  virtual Result<FileOwnership> ownership(std::string_view path) const = 0;
  // A read of a kernel attribute that may block: a PCI device's driver_override and sriov_numvfs
  // take the device lock, which a pending unbind holds for as long as the driver's remove()
  // runs. The read runs in a child process; one the kernel has not answered in time returns
  // ETIMEDOUT (the child is left to finish on its own). At most 4 KiB.
  virtual Result<std::string> readAttr(std::string_view path,
                                       std::chrono::milliseconds timeout) const = 0;

  // A write to a kernel attribute (sysfs, procfs). With a timeout, the write runs in a child
  // process (a clone(2) sharing hostprep's memory, not a fork: see timed_io.cpp); one the kernel
  // has not answered in time returns ETIMEDOUT and is left to finish on its own, so hostprep
  // reports instead of hanging (an nvidia unbind can block forever).
  virtual Status writeAttr(std::string_view path, std::string_view data,
                           std::optional<std::chrono::milliseconds> timeout = std::nullopt) = 0;

  // Files hostprep owns (journal, status, config): temp file in the same directory, fsync,
  // rename, so a reader never sees a torn or missing file.
  virtual Status writeFileAtomic(std::string_view path, std::string_view data,
                                 mode_t mode = 0644) = 0;
  virtual Status makeDirs(std::string_view path, mode_t mode = 0755) = 0;
  virtual Status removeFile(std::string_view path) = 0;
  // Takes an exclusive lock on a file hostprep owns, creating it (mode 0600) when absent, without
  // waiting: EWOULDBLOCK when another holder has it.
  virtual Result<FileLock> tryLock(std::string_view path) = 0;
};

// Whether `root` can be a RootHost's root: a directory that exists. Anything else is bad input
// (exit 2, naming --root): a typo or a missing mount, not a host that failed.
Status checkRootDir(const std::filesystem::path& root);

// Whether `host` is a running Linux host: its sys/bus/pci/devices is there (sysfs mounted under
// the root). A mounted image or an empty directory is not: commands that read or move devices
// (all but preflight and check-node) refuse it as bad input (exit 2) before they take the lock or
// write anything under it, instead of failing every read (the agent: for ever).
Status checkLiveHost(const Host& host);

// Whether a host path names a file hostprep may write (status file): not an existing directory.
// `what` names the input (--write, status.path in the config) in the error.
Status checkFileTarget(const Host& host, std::string_view path, std::string_view what);

// The real operating system under a root directory.
class RootHost final : public Host {
 public:
  explicit RootHost(std::filesystem::path root);

  const std::filesystem::path& root() const override { return root_; }
  Result<std::string> read(std::string_view path, size_t cap = kDefaultReadCap) const override;
  Result<FileText> readText(std::string_view path, size_t cap = kDefaultReadCap) const override;
  Result<std::string> readHead(std::string_view path, size_t n) const override;
  Result<std::string> readLink(std::string_view path) const override;
  Result<std::vector<std::string>> list(std::string_view dir) const override;
  Result<std::vector<std::string>> listUnordered(std::string_view dir) const override;
  bool exists(std::string_view path) const override;
  Result<FileOwnership> ownership(std::string_view path) const override;
  Result<std::string> readAttr(std::string_view path,
                               std::chrono::milliseconds timeout) const override;
  Status writeAttr(std::string_view path, std::string_view data,
                   std::optional<std::chrono::milliseconds> timeout = std::nullopt) override;
  Status writeFileAtomic(std::string_view path, std::string_view data, mode_t mode = 0644) override;
  Status makeDirs(std::string_view path, mode_t mode = 0755) override;
  Status removeFile(std::string_view path) override;
  Result<FileLock> tryLock(std::string_view path) override;

 private:
  std::filesystem::path root_;
};

// A timed read or write whose child the kernel has not answered is left behind (no signal
// reaches uninterruptible sleep) and becomes a zombie once the kernel lets it go. This collects
// those that have finished and returns how many are still waiting in the kernel. The agent calls
// it when SIGCHLD arrives; every timed read and write calls it first (timed_io.cpp).
size_t reapStrayChildren();

// Convenience reads for sysfs attributes: trimmed text, or nullopt when absent or unreadable.
std::optional<std::string> readTrimmed(const Host& host, std::string_view path);
// The last path component of a link target ("../../../bus/pci/drivers/nvidia" -> "nvidia").
std::optional<std::string> readLinkName(const Host& host, std::string_view path);

// Joins host path components with '/'.
std::string hostPath(std::string_view a, std::string_view b);
template <class... Rest>
std::string hostPath(std::string_view a, std::string_view b, const Rest&... rest) {
  return hostPath(hostPath(a, b), rest...);
}

}  // namespace hostprep

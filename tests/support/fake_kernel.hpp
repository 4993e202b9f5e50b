// A fake kernel over a fixture tree. Reads go to the files as they are (the same seam as
// production); writes to kernel attributes get the kernel's semantics (kernel
// Documentation/ABI/testing/sysfs-bus-pci), and the
// fake keeps its world consistent: a bind moves the `driver` link and the driver's device link,
// creates /dev/vfio/<group> (and, when fake/vfio-device-cdev exists, the VFIO device file
// /dev/vfio/devices/vfioN with its vfio-dev/vfioN/dev entry); a module load creates sys/module/<m>,
// the driver directory and the proc/modules line. Any write can be made to fail on demand.
//
// SR-IOV and vGPU (sysfs-bus-pci; NVIDIA's sriov-manage): sriov_numvfs creates and removes VF
// functions (physfn / virtfnN links, their own IOMMU groups, autoprobe binding) with the kernel's
// errors (ERANGE above the total, ENOENT without a PF driver or with nvidia, which has no
// sriov_configure, EBUSY from one non-zero count to another). A VF bound to nvidia gets the vGPU
// types its PF's template (fake/sriov/<PF>/vf/, written by the fixture) gives it. mdev `create` /
// `remove` make and drop sys/bus/mdev/devices/<uuid> with its mdev_type link, IOMMU group and
// /dev/vfio node; available_instances and creatable_vgpu_types follow what the GPU holds (one type
// per GPU, at most fake/vgpu/<PF>/max/<type> of it, one per VF). The nvidia unbindLock lives in
// proc/driver/nvidia/gpus/<BDF>/ while the GPU is on nvidia.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "drivers/common/pci.hpp"
#include "drivers/seam/host.hpp"
#include "drivers/seam/kmod.hpp"

namespace hostprep::test {

class FakeKernel final : public Host {
 public:
  explicit FakeKernel(std::filesystem::path root);

  // Host: reads pass through; writeAttr applies kernel semantics.
  const std::filesystem::path& root() const override { return fs_.root(); }
  // A read of an attribute whose show() takes the device lock (driver_override, sriov_numvfs)
  // while an unbind of that device is pending would block forever on the real kernel: the fake
  // records it in blockedAccesses() and fails it with EDEADLK; readAttr() times out instead.
  Result<std::string> read(std::string_view path, size_t cap = kDefaultReadCap) const override;
  Result<std::string> readAttr(std::string_view path,
                               std::chrono::milliseconds timeout) const override;
  Result<std::string> readLink(std::string_view path) const override { return fs_.readLink(path); }
  Result<std::vector<std::string>> list(std::string_view dir) const override {
    return fs_.list(dir);
  }
  bool exists(std::string_view path) const override { return fs_.exists(path); }
  Result<FileOwnership> ownership(std::string_view path) const override {
    return fs_.ownership(path);
  }
  Status writeAttr(std::string_view path, std::string_view data,
                   std::optional<std::chrono::milliseconds> timeout = std::nullopt) override;
  // Files hostprep owns (the journal): atomic like RootHost's (temp + rename) but without fsync,
  // which only matters for power loss and would make the sweeps' thousands of runs slow.
  Status writeFileAtomic(std::string_view path, std::string_view data, mode_t mode = 0644) override;
  Status makeDirs(std::string_view path, mode_t mode = 0755) override {
    return fs_.makeDirs(path, mode);
  }
  Status removeFile(std::string_view path) override;
  // The run lock is a real flock on the fixture's file, so concurrent runs in one test process
  // exclude each other as separate processes would. Taking it is not a mutation.
  Result<FileLock> tryLock(std::string_view path) override { return fs_.tryLock(path); }

  // Fault injection: the n-th kernel write (0-based, counting every writeAttr) fails with err
  // and has no effect. Several calls make several writes fail.
  void failWrite(size_t n, int err = EIO) { failAt_.emplace(n, err); }
  // The n-th file write (writeFileAtomic: the journal) fails with err and has no effect.
  void failFileWrite(size_t n, int err = ENOSPC) { failFileAt_.emplace(n, err); }

  // Crash injection: right before the n-th mutation (0-based; every writeAttr, writeFileAtomic,
  // removeFile and module load counts) the fake throws Crash, which unwinds through hostprep like
  // a SIGKILL: nothing after it runs, and everything before it has happened. Only destructors
  // run, and hostprep's do not write.
  struct Crash {
    size_t at;
  };
  void crashAt(size_t n) { crashAt_ = n; }
  void noCrash() { crashAt_.reset(); }
  size_t mutationCount() const { return mutations_; }
  size_t fileWriteCount() const { return fileWrites_; }
  // The mutation index of the last write that failed by injection.
  std::optional<size_t> failedMutation() const { return failedMutation_; }
  // Every write whose path contains `needle` fails with err.
  void failWritesTo(std::string needle, int err) {
    failPaths_.emplace_back(std::move(needle), err);
  }
  // An unbind of this device blocks (returns ETIMEDOUT, as the real write would never return).
  // As on the real kernel, the `driver` links go at once (__device_release_driver() removes them
  // before it calls remove()), and the device lock stays taken until releaseDevice(). A held VF
  // blocks its PF's sriov_numvfs write that disables it the same way: sriov_numvfs_store() holds
  // the PF's device lock while pci_disable_sriov() removes the VFs in order, so the VFs before
  // it are gone, it waits in its driver's remove() with its links gone, and both locks stay
  // taken until releaseDevice(VF), which finishes the write.
  void holdDevice(const Bdf& b) { held_.insert(b); }
  // The next bind of this device (a bind or drivers_probe write) blocks in the driver's probe():
  // the device is bound (really_probe() links the driver before it calls probe()), the write
  // returns ETIMEDOUT, and the device lock stays taken until releaseDevice(). A VF's autoprobe
  // while its PF's sriov_numvfs write enables it blocks that write the same way (with the PF's
  // lock), and releaseDevice(VF) lets the enable go on.
  void stallProbe(const Bdf& b) { stallProbe_.insert(b); }
  // The holder lets go: a pending unbind of this device completes, as the real remove() would;
  // a stalled probe returns.
  void releaseDevice(const Bdf& b);
  // The device is removed (a surprise hot-unplug): its driver lets go of it, and it leaves
  // sys/bus/pci/devices, its IOMMU group and, with the group's last vfio device, /dev/vfio.
  void unplug(const Bdf& b);
  // The device stops answering (a crashed VM left it in D3cold, it fell off the bus): its config
  // space reads all ones and its power_state, where it has one, D3cold. What brings it back is
  // fake/recover/<BDF> (the fixture's recovers_by).
  void stopAnswering(const Bdf& b);
  // This driver's probe() fails for this device (EINVAL), as vfio-pci does for some devices.
  void refuseBind(const Bdf& b, std::string driver) { refused_.emplace(b, std::move(driver)); }
  // Accesses that would have blocked on a device lock held by a pending unbind ("read
  // sys/.../driver_override"): hostprep must make none.
  std::vector<std::string> blockedAccesses() const {
    std::lock_guard<std::recursive_mutex> g(mu_);
    return blocked_;
  }
  size_t writeCount() const {
    std::lock_guard<std::recursive_mutex> g(mu_);
    return writes_.size();
  }
  const std::vector<std::string>& writes() const { return writes_; }

  // Kernel-side operations, also used by FakeModules.
  Status loadModule(const std::string& module);
  // Loads `module` whether or not the fixture's lib/modules lists it: what the GPU Operator's
  // driver container does with its own nvidia.ko (insmod from the container's root).
  Status insmod(const std::string& module);
  bool bind(const Bdf& b, const std::string& driver, int* err);

 private:
  friend class FakeModules;  // a module load is a mutation
  Status apply(const std::string& path, const std::string& data);
  std::optional<std::string> boundDriver(const Bdf& b) const;
  void unbindNow(const Bdf& b, const std::string& driver);
  bool driverMatches(const std::string& driver, const PciFunction& f) const;
  std::set<PciId> vfioPciIds() const;
  void refreshVfioNode(const PciFunction& f);
  void resetNow(const Bdf& b, std::string_view how);  // counts it in fake/reset/<BDF>
  void recoverIf(const Bdf& b, std::string_view how);
  void rescanBus(std::optional<uint32_t> domain, std::optional<uint8_t> bus);
  void refreshVfioDeviceFile(const Bdf& b);
  std::set<int> takenVfioIndex_;  // vfio-dev indexes in use (the kernel's ida frees them)
  Status setNumVfs(const Bdf& pf, int n);
  Status addVfs(const PciFunction& pf, int from, int n);
  void addVf(const PciFunction& pf, int index);
  void removeVf(const Bdf& pf, const Bdf& vf, int index);
  void vgpuTypesOn(const Bdf& vf, bool present);
  Status createMdev(const Bdf& parent, const std::string& type, const std::string& uuid);
  Status removeMdev(const std::string& uuid);
  Status setVgpuType(const Bdf& vf, const std::string& id);
  void recomputeVgpu(const Bdf& gpu);
  Bdf gpuOf(const Bdf& parent) const;
  void putFile(const std::string& path, const std::string& text, mode_t mode = 0644);
  bool batching_ = false;  // VFs being probed: recompute vGPU availability once, after

  Status put(std::string_view path, std::string_view data, mode_t mode);  // no fsync, no counting
  void mutation();  // counts a mutation; throws Crash at the chosen one

  RootHost fs_;
  std::vector<std::string> writes_;
  std::map<size_t, int> failAt_;
  std::map<size_t, int> failFileAt_;
  size_t fileWrites_ = 0;
  size_t mutations_ = 0;
  std::optional<size_t> crashAt_;
  std::optional<size_t> failedMutation_;
  std::vector<std::pair<std::string, int>> failPaths_;
  std::set<Bdf> held_;
  std::map<Bdf, std::string> pendingUnbind_;  // unbinds that "never returned"
  // A PF's sriov_numvfs write that "never returned": the VF whose remove() (a disable) or probe()
  // (an enable) holds it up and, for an enable, the VFs it has still to add.
  struct PendingNumVfs {
    Bdf vf;
    std::optional<std::pair<int, int>> enable;  // (the next VF to add, the count)
  };
  std::map<Bdf, PendingNumVfs> pendingNumVfs_;  // by PF
  std::set<Bdf> stallProbe_;                    // their next probe blocks
  std::set<Bdf> pendingProbe_;                  // probes that "never returned"
  bool lockHeld(const Bdf& b) const {
    return pendingUnbind_.count(b) != 0 || pendingNumVfs_.count(b) != 0 ||
           pendingProbe_.count(b) != 0;
  }
  // A bind that stallProbe() named: bound, and its probe still running.
  bool stalls(const Bdf& b) {
    if (!stallProbe_.count(b) || !boundDriver(b)) return false;
    stallProbe_.erase(b);
    pendingProbe_.insert(b);
    return true;
  }
  mutable std::vector<std::string> blocked_;  // accesses that would have blocked
  // The device whose lock a pending unbind holds, if `path` is one of its attributes that takes it.
  std::optional<Bdf> lockedBy(const std::string& path) const;
  mutable std::recursive_mutex mu_;  // the executor writes from several threads
  std::set<std::pair<Bdf, std::string>> refused_;
};

// libkmod's stand-in: loads modules into the fake kernel; a module is available when the
// fixture's lib/modules/<release>/modules.dep names it.
class FakeModules final : public ModuleLoader {
 public:
  explicit FakeModules(FakeKernel& k) : k_(k) {}
  Status load(const std::string& module) override;
  bool available(const std::string& module) const override;

 private:
  FakeKernel& k_;
};

// The drivers a module registers in the fake world ("vfio_pci" -> "vfio-pci"; "nvidia" -> "nvidia"
// and "nvidia-nvswitch", as nvidia.ko does), and the module of a driver.
std::vector<std::string> fakeDriversOfModule(const std::string& module);
std::string fakeModuleOfDriver(const std::string& driver);
// A registered driver's directory: its bind, unbind, new_id and remove_id files, and its module
// link to sys/module/<module> (drivers/base/module.c module_add_driver).
void addFakeDriver(const std::filesystem::path& root, const std::string& driver,
                   const std::string& module);

}  // namespace hostprep::test

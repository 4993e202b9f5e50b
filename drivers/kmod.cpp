#include "drivers/kmod.hpp"

#include <libkmod.h>
#include <linux/magic.h>
#include <sys/vfs.h>

#include "drivers/c_handle.hpp"

namespace hostprep {
namespace {

using CtxPtr = CHandle<kmod_ctx, kmod_unref>;
using ModPtr = CHandle<kmod_module, kmod_module_unref>;
using ListPtr = CHandle<kmod_list, kmod_module_unref_list>;

class KmodLoader final : public ModuleLoader {
 public:
  KmodLoader(const Host& host, const std::string& release) : host_(host), release_(release) {
    const std::string dir = host.resolve("lib/modules/" + release).string();
    const std::string conf = host.resolve("etc/modprobe.d").string();
    const std::string libconf = host.resolve("lib/modprobe.d").string();
    const char* configs[] = {conf.c_str(), libconf.c_str(), nullptr};
    ctx_.reset(kmod_new(dir.c_str(), configs));
    if (ctx_) kmod_set_log_priority(ctx_.get(), 0);
  }

  Status load(const std::string& module) override {
    struct statfs fs {};
    if (::statfs(host_.resolve("sys").c_str(), &fs) != 0 || fs.f_type != SYSFS_MAGIC) {
      return sysError("cannot load module " + module + ": " + host_.resolve("sys").string() +
                          " is not a live sysfs",
                      0, "--root points at an image or a fixture; load modules on the live host");
    }
    auto list = lookup(module);
    if (!list) {
      return sysError("cannot load module " + module + ": not found for kernel " + release_, ENOENT,
                      "install the module for this kernel, then run depmod");
    }
    kmod_list* it = nullptr;
    kmod_list_foreach(it, list.get()) {
      ModPtr mod(kmod_module_get_module(it));
      int err = kmod_module_probe_insert_module(mod.get(), 0, nullptr, nullptr, nullptr, nullptr);
      if (err < 0) {
        return sysError("cannot load module " + module, -err,
                        err == -ENOENT ? "see dmesg" : "see dmesg; is Secure Boot blocking it?");
      }
    }
    return {};
  }

  bool available(const std::string& module) const override {
    auto list = lookup(module);
    if (!list) return false;
    kmod_list* it = nullptr;
    kmod_list_foreach(it, list.get()) {
      ModPtr mod(kmod_module_get_module(it));
      if (kmod_module_get_path(mod.get()) != nullptr) return true;
      if (kmod_module_get_initstate(mod.get()) == KMOD_MODULE_BUILTIN) return true;
    }
    return false;
  }

 private:
  ListPtr lookup(const std::string& module) const {
    if (!ctx_) return nullptr;
    kmod_list* list = nullptr;
    if (kmod_module_new_from_lookup(ctx_.get(), module.c_str(), &list) < 0) return nullptr;
    return ListPtr(list);
  }

  const Host& host_;
  std::string release_;
  CtxPtr ctx_;
};

}  // namespace

std::unique_ptr<ModuleLoader> makeKmodLoader(const Host& host, const std::string& kernelRelease) {
  return std::make_unique<KmodLoader>(host, kernelRelease);
}

}  // namespace hostprep

#include "drivers/seam/kmod.hpp"

#include <dlfcn.h>
#include <libkmod.h>
#include <linux/magic.h>
#include <sys/vfs.h>

#include <memory>
#include <string>
#include <type_traits>

#include "drivers/seam/module_index.hpp"

namespace hostprep {
namespace {

// libkmod is opened with dlopen(3) on the first module lookup, not linked: most runs never load
// a module (the drivers are there already), and libkmod brings libcrypto (module signatures),
// libzstd and liblzma, whose relocations every start-up paid for and whose pages stayed resident
// in the agent. The header gives the types; the functions come from the library by name.
struct Libkmod {
  void* handle = nullptr;
  std::string error;  // dlerror(), when it could not be opened
  decltype(&kmod_new) newCtx = nullptr;
  decltype(&kmod_unref) unref = nullptr;
  decltype(&kmod_set_log_priority) setLogPriority = nullptr;
  decltype(&kmod_module_new_from_lookup) lookup = nullptr;
  decltype(&kmod_list_next) listNext = nullptr;
  decltype(&kmod_module_get_module) getModule = nullptr;
  decltype(&kmod_module_unref) moduleUnref = nullptr;
  decltype(&kmod_module_unref_list) unrefList = nullptr;
  decltype(&kmod_module_probe_insert_module) probeInsert = nullptr;
  decltype(&kmod_module_get_path) getPath = nullptr;
  decltype(&kmod_module_get_initstate) getInitstate = nullptr;
};

// Debian's libkmod2 (kmod 30) ships libkmod.so.2; never closed: loaded once per process.
const Libkmod& libkmod() {
  static const Libkmod lib = [] {
    Libkmod l;
    l.handle = ::dlopen("libkmod.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!l.handle) {
      const char* e = ::dlerror();
      l.error = e ? e : "libkmod.so.2: cannot open";
      return l;
    }
    bool all = true;
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(l.handle, name));
      if (!fn) all = false;
    };
    sym(l.newCtx, "kmod_new");
    sym(l.unref, "kmod_unref");
    sym(l.setLogPriority, "kmod_set_log_priority");
    sym(l.lookup, "kmod_module_new_from_lookup");
    sym(l.listNext, "kmod_list_next");
    sym(l.getModule, "kmod_module_get_module");
    sym(l.moduleUnref, "kmod_module_unref");
    sym(l.unrefList, "kmod_module_unref_list");
    sym(l.probeInsert, "kmod_module_probe_insert_module");
    sym(l.getPath, "kmod_module_get_path");
    sym(l.getInitstate, "kmod_module_get_initstate");
    if (!all) {
      l.error = "libkmod.so.2 lacks a function hostprep uses";
      l.handle = nullptr;  // left loaded: it may be in use elsewhere in the process
    }
    return l;
  }();
  return lib;
}

struct ModuleUnref {
  void operator()(kmod_module* m) const { libkmod().moduleUnref(m); }
};
struct ListUnref {
  void operator()(kmod_list* l) const { libkmod().unrefList(l); }
};
struct CtxUnref {
  void operator()(kmod_ctx* c) const { libkmod().unref(c); }
};
using CtxPtr = std::unique_ptr<kmod_ctx, CtxUnref>;
using ModPtr = std::unique_ptr<kmod_module, ModuleUnref>;
using ListPtr = std::unique_ptr<kmod_list, ListUnref>;

class KmodLoader final : public ModuleLoader {
 public:
  KmodLoader(const Host& host, const std::string& release) : host_(host), release_(release) {}

  Status load(const std::string& module) override {
    struct statfs fs {};
    if (::statfs(host_.resolve("sys").c_str(), &fs) != 0 || fs.f_type != SYSFS_MAGIC) {
      return sysError("cannot load module " + module + ": " + host_.resolve("sys").string() +
                          " is not a live sysfs",
                      0, "--root points at an image or a fixture; load modules on the live host");
    }
    const Libkmod& k = libkmod();
    if (!k.handle) {
      return sysError("cannot load module " + module + ": " + k.error, ENOENT,
                      "install libkmod2 (the kmod package)");
    }
    auto list = lookup(module);
    if (!list) {
      return sysError("cannot load module " + module + ": not found for kernel " + release_, ENOENT,
                      "install the module for this kernel, then run depmod");
    }
    for (kmod_list* it = list.get(); it; it = k.listNext(list.get(), it)) {
      ModPtr mod(k.getModule(it));
      int err = k.probeInsert(mod.get(), 0, nullptr, nullptr, nullptr, nullptr);
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
    const Libkmod& k = libkmod();
    for (kmod_list* it = list.get(); it; it = k.listNext(list.get(), it)) {
      ModPtr mod(k.getModule(it));
      if (k.getPath(mod.get()) != nullptr) return true;
      if (k.getInitstate(mod.get()) == KMOD_MODULE_BUILTIN) return true;
    }
    return false;
  }

 private:
  // The context over <root>/lib/modules/<release>, made on the first lookup.
  kmod_ctx* ctx() const {
    if (ctxTried_) return ctx_.get();
    ctxTried_ = true;
    const Libkmod& k = libkmod();
    if (!k.handle) return nullptr;
    const std::string dir = host_.resolve("lib/modules/" + release_).string();
    const std::string conf = host_.resolve(kModprobeConfigDirs[0]).string();
    const std::string libconf = host_.resolve(kModprobeConfigDirs[1]).string();
    const char* configs[] = {conf.c_str(), libconf.c_str(), nullptr};
    ctx_.reset(k.newCtx(dir.c_str(), configs));
    if (ctx_) k.setLogPriority(ctx_.get(), 0);
    return ctx_.get();
  }

  ListPtr lookup(const std::string& module) const {
    kmod_ctx* c = ctx();
    if (!c) return nullptr;
    kmod_list* list = nullptr;
    if (libkmod().lookup(c, module.c_str(), &list) < 0) return nullptr;
    return ListPtr(list);
  }

  const Host& host_;
  std::string release_;
  mutable bool ctxTried_ = false;
  mutable CtxPtr ctx_;
};

}  // namespace

std::unique_ptr<ModuleLoader> makeKmodLoader(const Host& host, const std::string& kernelRelease) {
  return std::make_unique<KmodLoader>(host, kernelRelease);
}

}  // namespace hostprep

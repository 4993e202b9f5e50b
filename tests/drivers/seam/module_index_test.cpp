// The text module index: which names depmod's text files list, which an alias or a modprobe.d
// line could resolve, and readPlatform asking libkmod (here a counting loader) only about those.
#include "drivers/seam/module_index.hpp"

#include <catch2/catch.hpp>
#include <string>

#include "drivers/model/platform.hpp"
#include "tests/support/fixture.hpp"

using namespace hostprep;
using hostprep::test::Fixture;

namespace {

using Names = std::set<std::string>;

// A loader that records what it is asked and knows only `known`.
class CountingLoader final : public ModuleLoader {
 public:
  explicit CountingLoader(Names known) : known_(std::move(known)) {}
  Status load(const std::string&) override { return {}; }
  bool available(const std::string& m) const override {
    asked.insert(m);
    return known_.count(m) != 0;
  }
  mutable Names asked;

 private:
  Names known_;
};

constexpr const char* kRelease = "6.1.0-test-amd64";
const std::string kDir = std::string("lib/modules/") + kRelease + "/";

}  // namespace

TEST_CASE("namesListedIn: module names of modules.dep and modules.builtin lines", "[modindex]") {
  const char* dep =
      "kernel/drivers/vfio/pci/vfio-pci.ko.xz: kernel/drivers/vfio/vfio.ko.xz\n"
      "kernel/drivers/vfio/vfio.ko.zst:\n"
      "updates/dkms/nvidia.ko:\n"
      "kernel/drivers/pci/pci-stub.ko\n"
      "garbage line\n"
      "kernel/arch/x86/kvm/kvm-amd.ko";  // no final newline
  const Names asked{"nvidia", "pci_stub", "vfio", "vfio_pci", "kvm_amd", "kvm", "garbage"};
  CHECK(namesListedIn(dep, asked) == Names{"kvm_amd", "nvidia", "pci_stub", "vfio", "vfio_pci"});
  // A dependency is not a listing: vfio_virqfd appears only after the colon.
  CHECK(namesListedIn("kernel/vfio-pci.ko: kernel/vfio_virqfd.ko\n", {"vfio_virqfd"}).empty());
  CHECK(namesListedIn("", asked).empty());
}

TEST_CASE("aliasMayMatch: libkmod's normalisation, then fnmatch", "[modindex]") {
  struct Case {
    const char* pattern;
    const char* name;
    bool match;
  };
  const Case cases[] = {
      {"nvidia", "nvidia", true},
      {"nvidia-current", "nvidia_current", true},  // '-' is '_'
      {"nvidia", "nvidia_uvm", false},
      {"nvidia_uvm", "nvidia", false},
      {"nvidia*", "nvidia_vgpu_vfio", true},
      {"nv?dia", "nvidia", true},
      {"nv[h-j]dia", "nvidia", true},  // a '-' inside [...] stays a range
      {"nv[a-c]dia", "nvidia", false},
      {"*", "kvm", true},
      {"pci:v000010DEd*sv*sd*bc03sc*i*", "nvidia", false},
      {"vfio_pci:v*", "vfio_pci", false},
      {"", "kvm", false},
      // Too many '*' to evaluate cheaply: libkmod decides.
      {"*a*b*c*d*e*f*g*h*i*j*k*l*m*n*o*p*q*r", "zzz", true},
      {"z*a*b*c*d*e*f*g*h*i*j*k*l*m*n*o*p*q", "kvm", false},  // its head already fails
  };
  for (const auto& c : cases) {
    INFO(c.pattern << " ~ " << c.name);
    CHECK(aliasMayMatch(c.pattern, c.name) == c.match);
  }
}

TEST_CASE("alias sources: modules.alias, the built-in aliases, modprobe.d", "[modindex]") {
  const Names asked{"nvidia", "nvidia_vgpu_vfio", "kvm_amd", "nouveau"};
  CHECK(namesMatchedByAliases("alias pci:v000010DEd*sv*sd*bc03sc*i* nvidia\n"
                              "alias nvidia-vgpu* nvidia_vgpu_vfio\n"
                              "# alias nouveau nouveau\n"
                              "aliasnouveau x\n",
                              asked) == Names{"nvidia_vgpu_vfio"});

  const std::string modinfo = std::string("vfio_pci.alias=pci:*\0", 21) +
                              std::string("kvm_amd.license=GPL\0", 20) + "kvm.alias=kvm-amd";
  CHECK(namesMatchedByBuiltinAliases(modinfo, asked) == Names{"kvm_amd"});

  CHECK(namesInModprobeConfig("# Debian's nvidia-kernel-dkms\n"
                              "alias nvidia nvidia-current\n"
                              "install nvidia-vgpu-vfio /bin/true\n"
                              "blacklist nouveau\n"
                              "options kvm_amd nested=1\n",
                              asked) == Names{"nvidia", "nvidia_vgpu_vfio"});
  // A line continued with a backslash is one line, as kmod reads it.
  CHECK(namesInModprobeConfig("alias \\\n  kvm-amd other\n", asked) == Names{"kvm_amd"});
  CHECK(namesInModprobeConfig("#alias nouveau x\n  # install nouveau y\n", asked).empty());
}

TEST_CASE("readPlatform asks libkmod only what the text index cannot answer", "[modindex]") {
  Fixture fx;
  fx.write(kDir + "modules.dep", "kernel/drivers/vfio/vfio.ko:\n");
  fx.write(kDir + "modules.builtin", "kernel/arch/x86/kvm/kvm.ko\n");
  fx.write(kDir + "modules.alias", "alias pci:v000010DEd* nvidia_current\n");
  fx.write(kDir + "modules.builtin.modinfo", std::string("kvm.alias=devname:kvm\0", 22));
  fx.write("proc/modules", "snd_hda_intel 61440 0 - Live 0x0\n");
  RootHost host(fx.root());
  const std::vector<std::string> asked{"vfio", "kvm", "snd-hda-intel", "nvidia",
                                       "nvidia_vgpu_vfio"};

  SECTION("every name answered by the text: libkmod is never asked") {
    CountingLoader loader({"nvidia"});
    auto p = readPlatform(host, kRelease, loader, asked);
    CHECK(loader.asked.empty());
    CHECK(p.modules.at("vfio").available());
    CHECK(p.modules.at("kvm").available());
    CHECK(p.modules.at("snd_hda_intel").available());  // loaded, not listed
    CHECK_FALSE(p.modules.at("nvidia").available());
    CHECK_FALSE(p.modules.at("nvidia_vgpu_vfio").available());
  }
  SECTION("a modprobe.d alias may resolve a name: libkmod is asked about it alone") {
    fx.write("etc/modprobe.d/nvidia.conf", "alias nvidia nvidia-current\n");
    fx.write("lib/modprobe.d/.hidden.conf", "alias nvidia_vgpu_vfio x\n");         // kmod skips it
    fx.write("lib/modprobe.d/notes.txt", "install nvidia_vgpu_vfio /bin/true\n");  // not *.conf
    CountingLoader loader({"nvidia"});
    auto p = readPlatform(host, kRelease, loader, asked);
    CHECK(loader.asked == Names{"nvidia"});
    CHECK(p.modules.at("nvidia").available());
    CHECK_FALSE(p.modules.at("nvidia_vgpu_vfio").available());
  }
  SECTION("a modules.alias or built-in alias pattern may resolve a name") {
    fx.write(kDir + "modules.alias", "alias nvidia_vgpu* nvidia_vgpu_vfio_new\n");
    fx.write(kDir + "modules.builtin.modinfo", std::string("nvidia_drm.alias=nvidia\0", 24));
    CountingLoader loader({"nvidia_vgpu_vfio"});
    auto p = readPlatform(host, kRelease, loader, asked);
    CHECK(loader.asked == Names{"nvidia", "nvidia_vgpu_vfio"});
    CHECK(p.modules.at("nvidia_vgpu_vfio").available());
    CHECK_FALSE(p.modules.at("nvidia").available());
  }
  SECTION("a binary index without its text: every unknown name goes to libkmod") {
    const std::pair<const char*, const char*> twins[] = {
        {"modules.alias", "modules.alias.bin"},
        {"modules.builtin.modinfo", "modules.builtin.alias.bin"}};
    for (const auto& [text, binary] : twins) {
      INFO(binary << " without " << text);
      Fixture f2;
      f2.write(kDir + "modules.dep", "kernel/drivers/vfio/vfio.ko:\n");
      for (const auto& other : twins) {
        if (other.first != text) f2.write(kDir + other.first, "");
      }
      f2.write(kDir + binary, "binary");
      RootHost h2(f2.root());
      CountingLoader loader({});
      readPlatform(h2, kRelease, loader, asked);
      CHECK(loader.asked == Names{"kvm", "nvidia", "nvidia_vgpu_vfio", "snd_hda_intel"});
    }
    Fixture f3;
    f3.write(kDir + "modules.dep.bin", "binary");
    RootHost h3(f3.root());
    CountingLoader loader({"vfio"});
    auto p = readPlatform(h3, kRelease, loader, asked);
    CHECK(loader.asked.count("vfio"));
    CHECK(p.modules.at("vfio").available());
  }
  SECTION("no release: nothing is looked up") {
    CountingLoader loader({"vfio"});
    auto p = readPlatform(host, "", loader, asked);
    CHECK(loader.asked.empty());
    CHECK_FALSE(p.modules.at("vfio").available());
  }
}

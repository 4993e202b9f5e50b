#include "checks/preflight_cc.hpp"

#include "checks/preflight_cmdline.hpp"
#include "drivers/common/text.hpp"

namespace hostprep {

CcCapable ccCapable(PciId id) {
  if (id.vendor != kNvidiaVendor) return CcCapable::kNo;
  if (id.device >= 0x2300 && id.device <= 0x23ff) return CcCapable::kHopper;
  if (id.device >= 0x2900) return CcCapable::kBlackwell;
  return CcCapable::kNo;
}

CheckResult checkConfidentialComputing(const PlatformFacts& p, const Snapshot* s,
                                       const Selection* sel, Mode mode, CcMode cc) {
  const char* id = "gpu.cc";
  if (cc == CcMode::kOff)
    return makeCheck(id, CheckStatus::kSkip, "confidential computing not asked for (cc-mode off)");
  if (!vmMode(mode)) return skipForMode(id, mode, "confidential computing runs in VMs");
  const std::string asked = "cc-mode " + std::string(toString(cc));
  const bool tdx = p.kvmTdx && paramTruthy(*p.kvmTdx);
  const bool snp = p.kvmSevSnp && paramTruthy(*p.kvmSevSnp);
  if (!tdx && !snp) {
    std::string seen = p.kvmTdx      ? "kvm_intel tdx=" + *p.kvmTdx
                       : p.kvmSevSnp ? "kvm_amd sev_snp=" + *p.kvmSevSnp
                                     : "neither kvm_intel's tdx nor kvm_amd's sev_snp parameter "
                                       "exists (module not loaded, or a kernel without them)";
    return makeCheck(
        id, CheckStatus::kFail, asked + ", but the host runs no confidential VMs: " + seen,
        p.cpu.vendor == CpuVendor::kAmd
            ? "enable SEV-SNP in the BIOS/UEFI setup, boot a kernel with CONFIG_KVM_AMD_SEV and "
              "load kvm_amd with sev_snp=1 (the line \"options kvm_amd sev_snp=1\" in "
              "/etc/modprobe.d/kvm.conf)"
            : "enable TDX in the BIOS/UEFI setup, boot a kernel with CONFIG_INTEL_TDX_HOST and "
              "kvm_intel.tdx=1 (the line \"options kvm_intel tdx=1\" in /etc/modprobe.d/kvm.conf)");
  }
  const std::string host =
      tdx ? "TDX enabled (kvm_intel tdx=Y)" : "SEV-SNP enabled (kvm_amd sev_snp=Y)";
  if (!s || !sel || sel->gpus().empty())
    return makeCheck(id, CheckStatus::kSkip, host + "; no GPU selected (see gpu.present)");
  std::vector<std::string> bad, ok;
  for (const auto& b : sel->gpus()) {
    const auto* f = s->find(b);
    if (!f || isNvSwitch(*f)) continue;
    switch (ccCapable(f->id)) {
      case CcCapable::kNo:
        bad.push_back(describeFunction(*s, b));
        break;
      case CcCapable::kHopper:
        ok.push_back(b.str() + " Hopper");
        break;
      case CcCapable::kBlackwell:
        ok.push_back(b.str() + " Blackwell");
        break;
    }
  }
  if (!bad.empty()) {
    return makeCheck(id, CheckStatus::kFail,
                     asked + ": " + join(bad, ", ") + " cannot run in CC mode (Hopper and newer)",
                     "select only Hopper or newer GPUs (--gpu-ids / --devices), or set cc-mode: "
                     "off in /etc/hostprep/config.yaml");
  }
  return makeCheck(id, CheckStatus::kPass, asked + ": " + host + "; CC-capable: " + join(ok, ", "));
}

}  // namespace hostprep

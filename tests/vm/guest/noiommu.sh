#!/bin/sh
# Booted with intel_iommu=off: preflight must say so, prepare must not half-move anything.
. /tests/lib.sh
for m in e1000e nvme snd_hda_intel standin; do modprobe $m || echo "HPVM: modprobe $m failed"; done
for i in 1 2 3 4 5 6 7 8 9 10; do [ "$(drv $HDA_C)" = snd_hda_intel ] && break; usleep 200000; done
pci_state > $T/state.boot
if [ -x /usr/bin/hostprep ]; then
    run_test noiommu.preflight_reports_iommu_off hp_t_noiommu_preflight
    run_test noiommu.prepare_fails_cleanly hp_t_noiommu_prepare
fi
summary

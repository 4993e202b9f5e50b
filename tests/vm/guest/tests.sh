#!/bin/sh
# The VM suite: one PASS/FAIL line per test, then "N passed, N failed".
. /tests/lib.sh

# Host drivers as a real node would have them (no udev here, so load them by hand).
for m in e1000e nvme snd_hda_intel standin; do
    modprobe $m || echo "HPVM: modprobe $m failed"
done
# The stand-in binds asynchronously only for nvme/hda; give probes a moment.
for i in 1 2 3 4 5 6 7 8 9 10; do
    [ "$(drv $HDA_C)" = snd_hda_intel ] && [ "$(drv $NVME)" = nvme ] && break
    usleep 200000
done
pci_state > $T/state.boot

run_test kernel.iommu t_iommu
run_test kernel.topology t_topology
run_test kernel.drivers t_drivers
run_test standin.remove_blocks_while_open t_standin_remove_blocks
run_test standin.remove_delay t_standin_remove_delay
run_test standin.switch_is_a_second_driver ". /tests/nvswitch.sh; t_standin_switch"
run_test abi.unbind_wrong_driver_enodev t_abi_unbind_enodev
run_test abi.drivers_probe_nothing_binds t_abi_probe_nothing_binds
run_test vfio.manual_round_trip t_vfio_manual_round_trip
run_test vfio.group_not_viable t_vfio_group_not_viable
run_test sriov.numvfs t_sriov
run_test sriov.vfio_refuses_pf_with_vfs t_sriov_vfio_refuses_pf
run_test mdev.mtty_create_remove t_mdev
run_test kernel.differences t_kernel_differences 90
run_test kernel.differences.device_lock t_kernel_differences_lock 60
run_test kernel.differences.vfio_dev t_kernel_differences_vfio_dev 60
run_test kernel.reset_facts ". /tests/reset.sh; t_reset_facts" 60

if [ -x /usr/bin/hostprep ]; then
    . /tests/hostprep-tests.sh
else
    echo "HPVM: no hostprep binary in the initramfs; hostprep tests not run"
fi

# Whatever the tests did, the node must be back where it booted.
if state_diff $T/state.boot > $T/final.diff; then
    echo "PASS final.state_restored"; NPASS=$((NPASS + 1))
else
    echo "FAIL final.state_restored: $(tr '\n' ';' < $T/final.diff)"; NFAIL=$((NFAIL + 1))
fi
summary

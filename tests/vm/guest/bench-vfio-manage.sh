#!/bin/sh
# Baseline for the slow-teardown benchmark: the per-device sequence of NVIDIA's vfio-manage
# (NVIDIA/k8s-driver-manager), device after device: clear driver_override, unbind from the
# current driver, write the override, write the BDF to vfio-pci's bind. No waits, no checks.
#   sh bench-vfio-manage.sh BDF...
P=/sys/bus/pci/devices
for b in "$@"; do
    echo > $P/$b/driver_override
    [ -e $P/$b/driver ] && echo $b > $P/$b/driver/unbind
    echo vfio-pci > $P/$b/driver_override
    echo $b > /sys/bus/pci/drivers/vfio-pci/bind
done

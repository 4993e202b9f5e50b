// SPDX-License-Identifier: MIT
/*
 * vfio-group-status: is VFIO group N viable, and can it be attached to a type1 container?
 *
 *   vfio-group-status [--attach] N
 *   vfio-group-status --hold BDF N
 *
 * Opens /dev/vfio/vfio and /dev/vfio/N, runs VFIO_GROUP_GET_STATUS (driver-api/vfio.rst).
 * A group is viable when every member is driverless, on vfio, on pci-stub, or a bridge.
 * With --attach it also does VFIO_GROUP_SET_CONTAINER + VFIO_SET_IOMMU(TYPE1v2), which is what a
 * VMM does first; without interrupt remapping this fails with EPERM.
 * With --hold BDF it attaches, opens the device (VFIO_GROUP_GET_DEVICE_FD), as a VM using it does,
 * prints "held <pid>" and sleeps until a signal: while the device is open, vfio-pci's remove()
 * waits for it (vfio_unregister_group_dev), so an unbind or a VF disable does not return.
 * Exit: 0 viable (and attached), 1 not viable (or attach refused), 2 error.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/vfio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int attach = 0, argi = 1;
	const char *hold = NULL;
	char path[64];

	if (argc > 1 && strcmp(argv[1], "--attach") == 0) {
		attach = 1;
		argi++;
	} else if (argc > 2 && strcmp(argv[1], "--hold") == 0) {
		attach = 1;
		hold = argv[2];
		argi += 2;
	}
	if (argc != argi + 1) {
		fprintf(stderr, "usage: %s [--attach | --hold BDF] GROUP\n", argv[0]);
		return 2;
	}
	int container = open("/dev/vfio/vfio", O_RDWR);
	if (container < 0) {
		fprintf(stderr, "open /dev/vfio/vfio: %s\n", strerror(errno));
		return 2;
	}
	if (ioctl(container, VFIO_GET_API_VERSION) != VFIO_API_VERSION) {
		fprintf(stderr, "unknown VFIO API version\n");
		return 2;
	}
	snprintf(path, sizeof(path), "/dev/vfio/%s", argv[argi]);
	int group = open(path, O_RDWR);
	if (group < 0) {
		fprintf(stderr, "open %s: %s\n", path, strerror(errno));
		return 2;
	}
	struct vfio_group_status status = { .argsz = sizeof(status) };
	if (ioctl(group, VFIO_GROUP_GET_STATUS, &status) < 0) {
		fprintf(stderr, "VFIO_GROUP_GET_STATUS: %s\n", strerror(errno));
		return 2;
	}
	if (!(status.flags & VFIO_GROUP_FLAGS_VIABLE)) {
		printf("group %s: not viable\n", argv[argi]);
		return 1;
	}
	if (!attach) {
		printf("group %s: viable\n", argv[argi]);
		return 0;
	}
	if (ioctl(group, VFIO_GROUP_SET_CONTAINER, &container) < 0) {
		printf("group %s: viable, SET_CONTAINER failed: %s\n", argv[argi], strerror(errno));
		return 1;
	}
	if (ioctl(container, VFIO_SET_IOMMU, VFIO_TYPE1v2_IOMMU) < 0) {
		printf("group %s: viable, SET_IOMMU failed: %s\n", argv[argi], strerror(errno));
		return 1;
	}
	if (hold) {
		if (ioctl(group, VFIO_GROUP_GET_DEVICE_FD, hold) < 0) {
			fprintf(stderr, "VFIO_GROUP_GET_DEVICE_FD %s: %s\n", hold, strerror(errno));
			return 2;
		}
		printf("held %d\n", (int)getpid());
		fflush(stdout);
		for (;;)
			pause();
	}
	printf("group %s: viable, attached to a type1v2 container\n", argv[argi]);
	return 0;
}

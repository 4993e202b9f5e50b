// SPDX-License-Identifier: MIT
/*
 * pci-config: read or write one 32-bit register of a PCI function's config space through sysfs
 * (<dev>/config, one pread(2)/pwrite(2) of 4 bytes, which the kernel does as one dword access).
 *
 *   pci-config DEV WHERE            prints the register as 0x%08x
 *   pci-config DEV WHERE VALUE      writes VALUE (hex or decimal), prints nothing
 *
 * DEV is /sys/bus/pci/devices/<BDF>. WHERE is an offset (0x44), or capID+K: the offset of the
 * standard capability with that ID (walked from 0x34) plus K, e.g. cap5+4 is MSI's address. Exit
 * 0, 1 when the capability is missing, 2 on a usage or I/O error. The VM tests mark a function
 * with a scratch value that only a real reset clears (see tests/vm/README.md, "Resets").
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rd(int fd, long off, unsigned n, uint32_t *v)
{
	uint8_t b[4] = {0};
	if (pread(fd, b, n, off) != (ssize_t)n)
		return -1;
	*v = b[0] | b[1] << 8 | b[2] << 16 | (uint32_t)b[3] << 24;
	return 0;
}

int main(int argc, char **argv)
{
	char path[512];
	uint32_t v;
	long off;
	int fd;

	if (argc != 3 && argc != 4) {
		fprintf(stderr, "usage: %s DEV WHERE [VALUE]\n", argv[0]);
		return 2;
	}
	snprintf(path, sizeof path, "%s/config", argv[1]);
	fd = open(path, argc == 4 ? O_RDWR : O_RDONLY);
	if (fd < 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return 2;
	}
	if (strncmp(argv[2], "cap", 3) == 0) {
		char *end;
		unsigned long id = strtoul(argv[2] + 3, &end, 0);
		long k = *end == '+' ? strtol(end + 1, NULL, 0) : 0;
		uint32_t p, hdr;
		int hops = 0;
		if (rd(fd, 0x34, 1, &p) < 0)
			goto io;
		for (p &= 0xfc; p && hops < 48; hops++) {
			if (rd(fd, p, 2, &hdr) < 0)
				goto io;
			if ((hdr & 0xff) == id)
				break;
			p = (hdr >> 8) & 0xfc;
		}
		if (!p || hops == 48) {
			fprintf(stderr, "%s: no capability %lu\n", argv[1], id);
			return 1;
		}
		off = p + k;
	} else {
		off = strtol(argv[2], NULL, 0);
	}
	if (argc == 3) {
		if (rd(fd, off, 4, &v) < 0)
			goto io;
		printf("0x%08x\n", v);
		return 0;
	}
	v = strtoul(argv[3], NULL, 0);
	uint8_t b[4] = { v, v >> 8, v >> 16, v >> 24 };
	if (pwrite(fd, b, 4, off) != 4)
		goto io;
	return 0;
io:
	fprintf(stderr, "%s: %s\n", path, strerror(errno));
	return 2;
}

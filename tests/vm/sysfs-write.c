// SPDX-License-Identifier: MIT
/*
 * sysfs-write: write one value to a file in a single write(2) and report the errno by name.
 *
 *   sysfs-write PATH VALUE      (VALUE is written as given, followed by a newline)
 *
 * Prints "OK" or the errno name (ERANGE, EBUSY, ENOENT, ...) and exits 0 or the errno, so guest
 * tests can check kernel ABI error paths exactly instead of parsing shell messages.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *errname(int e)
{
	switch (e) {
	case EPERM: return "EPERM";
	case ENOENT: return "ENOENT";
	case EIO: return "EIO";
	case ENXIO: return "ENXIO";
	case E2BIG: return "E2BIG";
	case EAGAIN: return "EAGAIN";
	case ENOMEM: return "ENOMEM";
	case EACCES: return "EACCES";
	case EBUSY: return "EBUSY";
	case EEXIST: return "EEXIST";
	case ENODEV: return "ENODEV";
	case EINVAL: return "EINVAL";
	case ENOSPC: return "ENOSPC";
	case ERANGE: return "ERANGE";
	case ENOSYS: return "ENOSYS";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case ENOTTY: return "ENOTTY";
	case ETIMEDOUT: return "ETIMEDOUT";
	default: return NULL;
	}
}

int main(int argc, char **argv)
{
	char buf[4096];

	if (argc != 3) {
		fprintf(stderr, "usage: %s PATH VALUE\n", argv[0]);
		return 2;
	}
	int fd = open(argv[1], O_WRONLY);
	int e = 0;
	if (fd < 0) {
		e = errno;
	} else {
		int n = snprintf(buf, sizeof(buf), "%s\n", argv[2]);
		if (write(fd, buf, (size_t)n) < 0)
			e = errno;
		close(fd);
	}
	if (!e) {
		puts("OK");
		return 0;
	}
	const char *name = errname(e);
	if (name)
		puts(name);
	else
		printf("errno%d\n", e);
	return e;
}

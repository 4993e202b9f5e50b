// SPDX-License-Identifier: MIT
/*
 * hold: keep device nodes open until killed (models nvidia-persistenced holding /dev/nvidia0).
 *
 *   hold PATH... &     prints "held <pid>" once every PATH is open, then sleeps until a signal.
 * Exit 2 if a PATH cannot be opened.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s PATH...\n", argv[0]);
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		if (open(argv[i], O_RDONLY) < 0) {
			fprintf(stderr, "hold: open %s: %s\n", argv[i], strerror(errno));
			return 2;
		}
	}
	printf("held %d\n", (int)getpid());
	fflush(stdout);
	for (;;)
		pause();
}

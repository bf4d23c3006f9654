/* pread1: pread the first 4 kB of the task's own 4 kB file. */
#include "wis.h"

#define BUFLEN 4096

static void task(struct wis_task *t)
{
	char buf[BUFLEN];
	memset(buf, 0, sizeof buf);
	int fd = wis_private_file(BUFLEN, 0);
	wis_ready(t);
	for (;;) {
		if (pread(fd, buf, BUFLEN, 0) != BUFLEN)
			wis_die_errno("pread");
		wis_count(t, 1);
	}
}

static const struct wis_testcase testcase = {
	.name = "pread1",
	.description = "pread of 4 kB at offset 0 of a per-task file",
	.task = task,
};

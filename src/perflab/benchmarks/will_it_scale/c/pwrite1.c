/* pwrite1: pwrite 4 kB at offset 0 of the task's own file. */
#include "wis.h"

#define BUFLEN 4096

static void task(struct wis_task *t)
{
	char buf[BUFLEN];
	memset(buf, 0, sizeof buf);
	int fd = wis_private_file(0, 0);
	wis_ready(t);
	for (;;) {
		if (pwrite(fd, buf, BUFLEN, 0) != BUFLEN)
			wis_die_errno("pwrite");
		wis_count(t, 1);
	}
}

static const struct wis_testcase testcase = {
	.name = "pwrite1",
	.description = "pwrite of 4 kB at offset 0 of a per-task file",
	.task = task,
};

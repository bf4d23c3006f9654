/* lseek1: seek to the start of the task's own 4 kB file. */
#include "wis.h"

#define BUFLEN 4096

static void task(struct wis_task *t)
{
	int fd = wis_private_file(BUFLEN, 0);
	wis_ready(t);
	for (;;) {
		if (lseek(fd, 0, SEEK_SET) != 0)
			wis_die_errno("lseek");
		wis_count(t, 1);
	}
}

static const struct wis_testcase testcase = {
	.name = "lseek1",
	.description = "lseek to offset 0 of a per-task file",
	.task = task,
};

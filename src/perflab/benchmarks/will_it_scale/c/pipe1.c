/* pipe1: write one byte into the task's own pipe and read it back (no other
 * task involved, so no wake-up). */
#include "wis.h"

static void task(struct wis_task *t)
{
	int fds[2];
	if (pipe(fds) != 0)
		wis_die_errno("pipe");
	wis_ready(t);
	for (;;) {
		char c = 0;
		ssize_t n;
		while ((n = write(fds[1], &c, 1)) < 0 && errno == EINTR)
			;
		if (n != 1)
			wis_die_errno("write to the pipe");
		while ((n = read(fds[0], &c, 1)) < 0 && errno == EINTR)
			;
		if (n != 1)
			wis_die_errno("read from the pipe");
		wis_count(t, 1);
	}
}

static const struct wis_testcase testcase = {
	.name = "pipe1",
	.description = "write then read of 1 byte through a per-task pipe",
	.task = task,
};

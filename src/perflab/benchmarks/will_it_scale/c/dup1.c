/* dup1: dup the descriptor of the task's own file and close the copy. */
#include "wis.h"

static void task(struct wis_task *t)
{
	int fd = wis_private_file(0, 0);
	wis_ready(t);
	for (;;) {
		int copy = dup(fd);
		if (copy < 0)
			wis_die_errno("dup");
		close(copy);
		wis_count(t, 1);
	}
}

static const struct wis_testcase testcase = {
	.name = "dup1",
	.description = "dup and close of a per-task file's descriptor",
	.task = task,
};

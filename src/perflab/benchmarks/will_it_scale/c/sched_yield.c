/* sched_yield: the sched_yield system call. */
#include "wis.h"

static void task(struct wis_task *t)
{
	wis_ready(t);
	for (;;) {
		if (sched_yield() != 0)
			wis_die_errno("sched_yield");
		wis_count(t, 1);
	}
}

static const struct wis_testcase testcase = {
	.name = "sched_yield",
	.description = "sched_yield system call",
	.task = task,
};

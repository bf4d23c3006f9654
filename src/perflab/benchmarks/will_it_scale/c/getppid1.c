/* getppid1: the getppid system call (nearly the cheapest there is). */
#include "wis.h"

static void task(struct wis_task *t)
{
	wis_ready(t);
	for (;;) {
		getppid();
		wis_count(t, 1);
	}
}

static const struct wis_testcase testcase = {
	.name = "getppid1",
	.description = "getppid system call",
	.task = task,
};

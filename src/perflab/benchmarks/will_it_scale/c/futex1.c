/* futex1: FUTEX_WAKE (the shared, not the _PRIVATE, form) on a word nobody
 * waits on. */
#include "wis.h"
#include <linux/futex.h>
#include <sys/syscall.h>

static void task(struct wis_task *t)
{
	wis_ready(t);
	for (;;) {
		unsigned int word = 0;
		syscall(SYS_futex, &word, FUTEX_WAKE, 1, NULL, NULL, 0);
		wis_count(t, 1);
	}
}

static const struct wis_testcase testcase = {
	.name = "futex1",
	.description = "futex FUTEX_WAKE with no waiter",
	.task = task,
};

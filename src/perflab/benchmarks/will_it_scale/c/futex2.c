/* futex2: FUTEX_WAIT (the shared form) for a value the word does not hold, so
 * the kernel looks the word up and returns EAGAIN at once. */
#include "wis.h"
#include <linux/futex.h>
#include <sys/syscall.h>

static void task(struct wis_task *t)
{
	wis_ready(t);
	for (;;) {
		unsigned int word = 0;
		syscall(SYS_futex, &word, FUTEX_WAIT, 1, NULL, NULL, 0);
		wis_count(t, 1);
	}
}

static const struct wis_testcase testcase = {
	.name = "futex2",
	.description = "futex FUTEX_WAIT on a mismatched value (returns EAGAIN)",
	.task = task,
};

/* brk1: move the program break up one page and back down; two brk calls,
 * counted as two operations.  Threads share one break. */
#include "wis.h"

static void task(struct wis_task *t)
{
	intptr_t page = getpagesize();
	wis_ready(t);
	/* read after the start, when the harness no longer allocates */
	char *base = sbrk(0);
	if (base == (void *)-1)
		wis_die_errno("sbrk");
	for (;;) {
		if (brk(base + page) != 0)
			wis_die_errno("brk up");
		if (brk(base) != 0)
			wis_die_errno("brk down");
		wis_count(t, 2);
	}
}

static const struct wis_testcase testcase = {
	.name = "brk1",
	.description = "brk grows the heap by one page and shrinks it back (2 ops)",
	.task = task,
};

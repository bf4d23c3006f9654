/* brk2: like brk1, but each task first takes a page of heap of its own with
 * sbrk and toggles the page above it, so the break never returns to the
 * start of the heap. */
#include "wis.h"

static void task(struct wis_task *t)
{
	intptr_t page = getpagesize();
	wis_ready(t);
	char *mine = sbrk(page);
	if (mine == (void *)-1)
		wis_die_errno("sbrk");
	char *base = mine + page;
	for (;;) {
		if (brk(base + page) != 0)
			wis_die_errno("brk up");
		if (brk(base) != 0)
			wis_die_errno("brk down");
		wis_count(t, 2);
	}
}

static const struct wis_testcase testcase = {
	.name = "brk2",
	.description = "brk up and down by one page above a page the task holds (2 ops)",
	.task = task,
};

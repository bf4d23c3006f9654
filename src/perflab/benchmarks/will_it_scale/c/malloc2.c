/* malloc2: malloc and free 1 kB (the allocator's fast path). */
#include "wis.h"

#define SIZE 1024UL

static void task(struct wis_task *t)
{
	wis_ready(t);
	for (;;) {
		void *p = malloc(SIZE);
		if (!p)
			wis_die("malloc of %lu bytes failed", SIZE);
		wis_keep(p);
		free(p);
		wis_count(t, 1);
	}
}

static const struct wis_testcase testcase = {
	.name = "malloc2",
	.description = "malloc and free of 1 kB",
	.task = task,
};

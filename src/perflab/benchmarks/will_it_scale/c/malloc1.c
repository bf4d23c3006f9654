/* malloc1: malloc and free 128 MB without touching it (glibc serves it with
 * mmap/munmap). */
#include "wis.h"

#define SIZE (128UL << 20)

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
	.name = "malloc1",
	.description = "malloc and free of 128 MB, untouched",
	.task = task,
};

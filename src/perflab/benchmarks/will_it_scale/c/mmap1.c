/* mmap1: map and unmap 128 MB of private anonymous memory, untouched. */
#include "wis.h"

#define AREA (128UL << 20)

static void task(struct wis_task *t)
{
	wis_ready(t);
	for (;;) {
		void *area = mmap(NULL, AREA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (area == MAP_FAILED)
			wis_die_errno("mmap of %lu bytes", AREA);
		munmap(area, AREA);
		wis_count(t, 1);
	}
}

static const struct wis_testcase testcase = {
	.name = "mmap1",
	.description = "mmap and munmap of 128 MB of anonymous memory, untouched",
	.task = task,
};

/* page_fault1: map 128 MB of private anonymous memory, write one byte in every
 * page (each write is a first-touch fault, counted), unmap, repeat. */
#include "wis.h"

#define AREA (128UL << 20)

static void task(struct wis_task *t)
{
	size_t page = (size_t)getpagesize();
	wis_ready(t);
	for (;;) {
		wis_cycle(t);
		char *area = mmap(NULL, AREA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (area == MAP_FAILED)
			wis_die_errno("mmap of %lu bytes", AREA);
		wis_thp_advise(area, AREA);
		for (size_t off = 0; off < AREA; off += page) {
			area[off] = 0;
			wis_count(t, 1);
		}
		munmap(area, AREA);
	}
}

static const struct wis_testcase testcase = {
	.name = "page_fault1",
	.description = "write faults on a private anonymous mapping of 128 MB, one per page",
	.task = task,
	.cycles = 1,
};

/* page_fault2: a private (copy-on-write) mapping of the task's own sparse
 * 128 MB file; every page is written once (a fault that copies the file's
 * page), then the mapping is dropped and made again. */
#include "wis.h"

#define AREA (128UL << 20)

static void task(struct wis_task *t)
{
	size_t page = (size_t)getpagesize();
	int fd = wis_private_file(0, AREA);
	wis_ready(t);
	for (;;) {
		wis_cycle(t);
		char *area = mmap(NULL, AREA, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
		if (area == MAP_FAILED)
			wis_die_errno("mmap of %lu bytes of a file", AREA);
		wis_thp_advise(area, AREA);
		for (size_t off = 0; off < AREA; off += page) {
			area[off] = 0;
			wis_count(t, 1);
		}
		munmap(area, AREA);
	}
}

static const struct wis_testcase testcase = {
	.name = "page_fault2",
	.description = "write faults on a private mapping of a per-task 128 MB file, one per page",
	.task = task,
	.cycles = 1,
};

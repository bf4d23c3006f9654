/* mmap2: map and unmap (private, untouched) the task's own sparse 128 MB file. */
#include "wis.h"

#define AREA (128UL << 20)

static void task(struct wis_task *t)
{
	int fd = wis_private_file(0, AREA);
	wis_ready(t);
	for (;;) {
		void *area = mmap(NULL, AREA, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
		if (area == MAP_FAILED)
			wis_die_errno("mmap of %lu bytes of a file", AREA);
		munmap(area, AREA);
		wis_count(t, 1);
	}
}

static const struct wis_testcase testcase = {
	.name = "mmap2",
	.description = "mmap and munmap of a per-task 128 MB file, untouched",
	.task = task,
};

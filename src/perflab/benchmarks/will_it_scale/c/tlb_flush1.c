/* tlb_flush1: in a private mapping of the task's own sparse 128 MB file,
 * for every page: write it (a copy-on-write fault), discard it with
 * madvise(MADV_DONTNEED) (a TLB flush, sent to every CPU that runs a thread
 * of the process), and read it back as the file's zero page (another fault).
 * One page is one operation; then the mapping is made again. */
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
			area[off] = 1;
			if (madvise(area + off, page, MADV_DONTNEED) != 0)
				wis_die_errno("madvise(MADV_DONTNEED)");
			if (*(volatile char *)(area + off) != 0)
				wis_die("a discarded private page still holds its write");
			wis_count(t, 1);
		}
		munmap(area, AREA);
	}
}

static const struct wis_testcase testcase = {
	.name = "tlb_flush1",
	.description = "write, madvise(MADV_DONTNEED) and re-read of each page of a private file mapping",
	.task = task,
	.cycles = 1,
};

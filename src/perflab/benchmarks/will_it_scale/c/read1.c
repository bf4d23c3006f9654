/* read1: read the task's own 1 MB file 4 kB at a time; at the end of the file
 * (a read that returns 0, counted too) seek back to the start. */
#include "wis.h"

#define BUFLEN 4096
#define FILESIZE (1UL << 20)

static void task(struct wis_task *t)
{
	char buf[BUFLEN];
	memset(buf, 0, sizeof buf);
	int fd = wis_private_file(FILESIZE, 0);   /* left at its end: the first read wraps */
	wis_ready(t);
	for (;;) {
		ssize_t n = read(fd, buf, BUFLEN);
		if (n < 0)
			wis_die_errno("read");
		if (n == 0 && lseek(fd, 0, SEEK_SET) != 0)
			wis_die_errno("lseek");
		wis_count(t, 1);
	}
}

static const struct wis_testcase testcase = {
	.name = "read1",
	.description = "4 kB reads through a per-task 1 MB file, rewinding at its end",
	.task = task,
};

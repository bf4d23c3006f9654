/* write1: write 4 kB at a time to the task's own file, seeking back to the
 * start after each 1 MB, so the file stays 1 MB in the page cache. */
#include "wis.h"

#define BUFLEN 4096
#define FILESIZE (1UL << 20)

static void task(struct wis_task *t)
{
	char buf[BUFLEN];
	memset(buf, 0, sizeof buf);
	int fd = wis_private_file(0, 0);
	size_t written = 0;
	wis_ready(t);
	for (;;) {
		ssize_t n = write(fd, buf, BUFLEN);
		if (n < 0)
			wis_die_errno("write");
		written += (size_t)n;
		if (written >= FILESIZE) {
			written = 0;
			if (lseek(fd, 0, SEEK_SET) != 0)
				wis_die_errno("lseek");
		}
		wis_count(t, 1);
	}
}

static const struct wis_testcase testcase = {
	.name = "write1",
	.description = "4 kB writes through a per-task file, rewinding every 1 MB",
	.task = task,
};

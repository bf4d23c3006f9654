/* writeseek1: seek to the start of the task's own file and write 4 kB. */
#include "wis.h"

#define BUFLEN 4096

static void task(struct wis_task *t)
{
	char buf[BUFLEN];
	memset(buf, 0, sizeof buf);
	int fd = wis_private_file(0, 0);
	wis_ready(t);
	for (;;) {
		if (lseek(fd, 0, SEEK_SET) != 0)
			wis_die_errno("lseek");
		if (write(fd, buf, BUFLEN) != BUFLEN)
			wis_die_errno("write");
		wis_count(t, 1);
	}
}

static const struct wis_testcase testcase = {
	.name = "writeseek1",
	.description = "lseek to 0 then write 4 kB of a per-task file",
	.task = task,
};

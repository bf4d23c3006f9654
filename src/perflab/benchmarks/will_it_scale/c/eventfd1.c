/* eventfd1: add 1 to the task's own eventfd counter with an 8-byte write and
 * take it back with an 8-byte read. */
#include "wis.h"
#include <sys/eventfd.h>

static void task(struct wis_task *t)
{
	int fd = eventfd(0, 0);
	if (fd < 0)
		wis_die_errno("eventfd");
	uint64_t one = 1, got;
	wis_ready(t);
	for (;;) {
		ssize_t n;
		while ((n = write(fd, &one, sizeof one)) < 0 && errno == EINTR)
			;
		if (n != sizeof one)
			wis_die_errno("write to the eventfd");
		while ((n = read(fd, &got, sizeof got)) < 0 && errno == EINTR)
			;
		if (n != sizeof got)
			wis_die_errno("read from the eventfd");
		wis_count(t, 1);
	}
}

static const struct wis_testcase testcase = {
	.name = "eventfd1",
	.description = "eventfd write then read of 8 bytes, per-task eventfd",
	.task = task,
};

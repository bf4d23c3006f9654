/* poll1: poll the task's own file for POLLOUT without waiting. */
#include "wis.h"
#include <poll.h>

static void task(struct wis_task *t)
{
	int fd = wis_private_file(0, 0);
	wis_ready(t);
	for (;;) {
		struct pollfd pfd;
		memset(&pfd, 0, sizeof pfd);
		pfd.fd = fd;
		pfd.events = POLLOUT;
		if (poll(&pfd, 1, 0) < 0)
			wis_die_errno("poll");
		wis_count(t, 1);
	}
}

static const struct wis_testcase testcase = {
	.name = "poll1",
	.description = "poll of 1 file descriptor (POLLOUT, no wait)",
	.task = task,
};

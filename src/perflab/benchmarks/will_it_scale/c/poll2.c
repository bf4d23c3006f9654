/* poll2: poll 128 of the task's own files for POLLOUT without waiting; the
 * poll set is rebuilt before every call. */
#include "wis.h"
#include <poll.h>

#define NFDS 128

/* every task holds NFDS descriptors, and threads share one table */
static void prepare(unsigned ntasks)
{
	struct rlimit rl;
	rlim_t need = (rlim_t)NFDS * ntasks + 64;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		wis_die_errno("getrlimit(RLIMIT_NOFILE)");
	if (rl.rlim_cur >= need)
		return;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need)
		rl.rlim_max = need;
	rl.rlim_cur = need;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		wis_die_errno("raising the open-file limit to %llu", (unsigned long long)need);
}

static void task(struct wis_task *t)
{
	int fds[NFDS];
	for (int k = 0; k < NFDS; k++)
		fds[k] = wis_private_file(0, 0);
	wis_ready(t);
	for (;;) {
		struct pollfd pfd[NFDS];
		memset(pfd, 0, sizeof pfd);
		for (int k = 0; k < NFDS; k++) {
			pfd[k].fd = fds[k];
			pfd[k].events = POLLOUT;
		}
		if (poll(pfd, NFDS, 0) < 0)
			wis_die_errno("poll");
		wis_count(t, 1);
	}
}

static const struct wis_testcase testcase = {
	.name = "poll2",
	.description = "poll of 128 file descriptors (POLLOUT, no wait)",
	.prepare = prepare,
	.task = task,
};

/* signal1: send SIGUSR1 to oneself (raise: the calling thread) and run an
 * empty handler. */
#include "wis.h"

static void on_signal(int sig)
{
	(void)sig;
}

static void task(struct wis_task *t)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	if (sigaction(SIGUSR1, &sa, NULL) != 0)
		wis_die_errno("sigaction");
	wis_ready(t);
	for (;;) {
		if (raise(SIGUSR1) != 0)
			wis_die_errno("raise");
		wis_count(t, 1);
	}
}

static const struct wis_testcase testcase = {
	.name = "signal1",
	.description = "delivery of SIGUSR1 to oneself with an empty handler",
	.task = task,
};

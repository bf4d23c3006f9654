/* pthread_mutex1: lock and unlock one process-wide pthread mutex.  Threads
 * contend for it; each process has its own copy, so processes do not. */
#include "wis.h"

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;

static void task(struct wis_task *t)
{
	wis_ready(t);
	for (;;) {
		pthread_mutex_lock(&mutex);
		pthread_mutex_unlock(&mutex);
		wis_count(t, 1);
	}
}

static const struct wis_testcase testcase = {
	.name = "pthread_mutex1",
	.description = "lock and unlock of one mutex per process (contended by threads)",
	.task = task,
};

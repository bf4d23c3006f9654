/* lock1: take and release a POSIX write lock on the first byte of the task's
 * own file; two fcntl calls, counted as 2. */
#include "wis.h"

static void set_lock(int fd, short type)
{
	struct flock lk;
	memset(&lk, 0, sizeof lk);
	lk.l_type = type;
	lk.l_whence = SEEK_SET;
	lk.l_start = 0;
	lk.l_len = 1;
	if (fcntl(fd, F_SETLKW, &lk) != 0)
		wis_die_errno("fcntl(F_SETLKW)");
}

static void task(struct wis_task *t)
{
	int fd = wis_private_file(0, 0);
	wis_ready(t);
	for (;;) {
		set_lock(fd, F_WRLCK);
		set_lock(fd, F_UNLCK);
		wis_count(t, 2);
	}
}

static const struct wis_testcase testcase = {
	.name = "lock1",
	.description = "fcntl write lock and unlock of 1 byte of a per-task file (2 ops)",
	.task = task,
};

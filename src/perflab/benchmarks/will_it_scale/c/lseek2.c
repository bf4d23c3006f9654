/* lseek2: seek to the start of one shared 4 kB file, each task through its
 * own file descriptor. */
#include "wis.h"

#define BUFLEN 4096

static const char *shared_path;

static void prepare(unsigned ntasks)
{
	(void)ntasks;
	shared_path = wis_shared_file(NULL, BUFLEN, 0);
}

static void task(struct wis_task *t)
{
	int fd = open(shared_path, O_RDWR);
	if (fd < 0)
		wis_die_errno("open %s", shared_path);
	wis_ready(t);
	for (;;) {
		if (lseek(fd, 0, SEEK_SET) != 0)
			wis_die_errno("lseek");
		wis_count(t, 1);
	}
}

static const struct wis_testcase testcase = {
	.name = "lseek2",
	.description = "lseek to offset 0 of one shared file, own descriptor per task",
	.prepare = prepare,
	.task = task,
};

/* open1: open and close the task's own file; all the files are in one
 * directory. */
#include "wis.h"

static const char **paths;

static void prepare(unsigned ntasks)
{
	paths = calloc(ntasks, sizeof *paths);
	if (!paths)
		wis_die("out of memory");
	for (unsigned k = 0; k < ntasks; k++)
		paths[k] = wis_shared_file(NULL, 0, 0);
}

static void task(struct wis_task *t)
{
	const char *path = paths[t->nr];
	wis_ready(t);
	for (;;) {
		int fd = open(path, O_RDWR);
		if (fd < 0)
			wis_die_errno("open %s", path);
		close(fd);
		wis_count(t, 1);
	}
}

static const struct wis_testcase testcase = {
	.name = "open1",
	.description = "open and close of a per-task file, all in one directory",
	.prepare = prepare,
	.task = task,
};

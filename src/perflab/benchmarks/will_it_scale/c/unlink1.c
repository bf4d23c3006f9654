/* unlink1: create (open O_CREAT), close and unlink the task's own file name;
 * all the names are in one directory. */
#include "wis.h"

static const char **paths;

static void prepare(unsigned ntasks)
{
	paths = calloc(ntasks, sizeof *paths);
	if (!paths)
		wis_die("out of memory");
	for (unsigned k = 0; k < ntasks; k++)
		paths[k] = wis_shared_file(NULL, 0, 1);
}

static void task(struct wis_task *t)
{
	const char *path = paths[t->nr];
	wis_ready(t);
	for (;;) {
		int fd = open(path, O_RDWR | O_CREAT, 0600);
		if (fd < 0)
			wis_die_errno("open %s", path);
		close(fd);
		if (unlink(path) != 0)
			wis_die_errno("unlink %s", path);
		wis_count(t, 1);
	}
}

static const struct wis_testcase testcase = {
	.name = "unlink1",
	.description = "create, close and unlink of a per-task file, all in one directory",
	.prepare = prepare,
	.task = task,
};

/* read2: as read1, but every task reads one shared 1 MB file through its own
 * file descriptor. */
#include "wis.h"

#define BUFLEN 4096
#define FILESIZE (1UL << 20)

static const char *shared_path;

static void prepare(unsigned ntasks)
{
	(void)ntasks;
	shared_path = wis_shared_file(NULL, FILESIZE, 0);
}

static void task(struct wis_task *t)
{
	char buf[BUFLEN];
	memset(buf, 0, sizeof buf);
	int fd = open(shared_path, O_RDONLY);
	if (fd < 0)
		wis_die_errno("open %s", shared_path);
	wis_ready(t);
	for (;;) {
		ssize_t n = read(fd, buf, BUFLEN);
		if (n < 0)
			wis_die_errno("read");
		if (n == 0 && lseek(fd, 0, SEEK_SET) != 0)
			wis_die_errno("lseek");
		wis_count(t, 1);
	}
}

static const struct wis_testcase testcase = {
	.name = "read2",
	.description = "4 kB reads through one shared 1 MB file, own descriptor per task",
	.prepare = prepare,
	.task = task,
};

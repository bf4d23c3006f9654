/* writeseek3: one shared file of one page per task; each task, through its own
 * descriptor, seeks to its page and writes 4 kB there. */
#include "wis.h"

#define BUFLEN 4096

static const char *shared_path;

static void prepare(unsigned ntasks)
{
	size_t page = (size_t)getpagesize();
	/* whole 4 kB writes covering one page per task */
	size_t bytes = (page * ntasks + BUFLEN - 1) / BUFLEN * BUFLEN;
	shared_path = wis_shared_file(NULL, bytes, 0);
}

static void task(struct wis_task *t)
{
	char buf[BUFLEN];
	memset(buf, 0, sizeof buf);
	off_t offset = (off_t)getpagesize() * t->nr;
	int fd = open(shared_path, O_RDWR);
	if (fd < 0)
		wis_die_errno("open %s", shared_path);
	wis_ready(t);
	for (;;) {
		if (lseek(fd, offset, SEEK_SET) != offset)
			wis_die_errno("lseek");
		if (write(fd, buf, BUFLEN) != BUFLEN)
			wis_die_errno("write");
		wis_count(t, 1);
	}
}

static const struct wis_testcase testcase = {
	.name = "writeseek3",
	.description = "lseek then write 4 kB to the task's own page of one shared file",
	.prepare = prepare,
	.task = task,
};

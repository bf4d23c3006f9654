/* context_switch1: a task and its partner (a second process or thread on the
 * same CPU) pass one byte back and forth through two pipes; a round trip is
 * two context switches, counted as 2. */
#include "wis.h"

struct pair {
	int to_partner[2];
	int to_task[2];
};

static struct pair *pairs;

static void prepare(unsigned ntasks)
{
	pairs = calloc(ntasks, sizeof *pairs);
	if (!pairs)
		wis_die("out of memory");
	for (unsigned k = 0; k < ntasks; k++)
		if (pipe(pairs[k].to_partner) != 0 || pipe(pairs[k].to_task) != 0)
			wis_die_errno("pipe");
}

static void send_byte(int fd)
{
	char c = 0;
	ssize_t n;
	while ((n = write(fd, &c, 1)) < 0 && errno == EINTR)
		;
	if (n != 1)
		wis_die_errno("write to a pipe");
}

static void receive_byte(int fd)
{
	char c;
	ssize_t n;
	while ((n = read(fd, &c, 1)) < 0 && errno == EINTR)
		;
	if (n != 1)
		wis_die_errno(n == 0 ? "read from a pipe: end of file" : "read from a pipe");
}

static void task(struct wis_task *t)
{
	struct pair *p = &pairs[t->nr];
	wis_ready(t);
	for (;;) {
		send_byte(p->to_partner[1]);
		receive_byte(p->to_task[0]);
		wis_count(t, 2);
	}
}

static void partner(struct wis_task *t)
{
	struct pair *p = &pairs[t->nr];
	wis_ready(t);
	for (;;) {
		receive_byte(p->to_partner[0]);
		send_byte(p->to_task[1]);
	}
}

static const struct wis_testcase testcase = {
	.name = "context_switch1",
	.description = "ping-pong of 1 byte between a task and its partner over two pipes (2 ops)",
	.prepare = prepare,
	.task = task,
	.partner = partner,
};

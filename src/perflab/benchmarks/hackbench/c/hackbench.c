/*
 * hackbench.c - perflab's hackbench-class workload.
 *
 * Written for perflab; no code is taken from hackbench.  The workload is the
 * one hackbench defines: GROUPS groups, each of FDS senders and FDS receivers
 * (20 and 20 by default).  Every receiver has one channel (a pipe, or an
 * AF_UNIX stream socketpair) that all FDS senders of its group write to;
 * each sender writes LOOPS rounds of one DATASIZE-byte message to every
 * receiver of its group, and each receiver reads LOOPS x FDS messages.
 * The tasks are processes (fork) or threads of this process.
 *
 * Every task is started and reports ready before the clock starts; then one
 * byte on a "go" pipe releases them all at once, and the clock stops when the
 * last task has finished (been reaped or joined).  That span is "time".
 *
 *   hackbench [-g GROUPS] [-f FDS] [-l LOOPS] [-s DATASIZE] [-m process|thread]
 *             [-i pipe|socket]
 *
 * prints metric lines on stdout (the runtime's protocol, core/c/perflab.h):
 *
 *   {"metric": "hackbench.time", "value": S, "unit": "s"}
 *   {"metric": "hackbench.messages", "value": M, "unit": "messages"}
 *   {"metric": "hackbench.tasks", "value": T, "unit": "tasks"}
 *
 * where M = G x F x F x L (one message is one sender's write to one
 * receiver).  Bad options exit 2 with one line on stderr; any other failure 1.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "perflab.h"

#define MAX_GROUPS 10000
#define MAX_FDS 1000
#define MAX_LOOPS 100000000UL
#define MAX_DATASIZE (1u << 24)

static unsigned groups = 10, fds = 20, datasize = 100;
static unsigned long loops = 100;
static int threads_mode;        /* 0: processes, 1: threads */
static int use_pipes;           /* 0: AF_UNIX socketpair, 1: pipe */

static int ready_w, ready_r;    /* each task writes one byte here when ready */
static int go_r, go_w;          /* one byte here releases every task */

/* One group's channels: chan[i][0] is receiver i's read end, chan[i][1] the senders' write end. */
struct group {
	int (*chan)[2];
};
static struct group *all;

struct task {
	struct group *g;
	unsigned index;             /* receiver or sender number within its group */
	int sender;
	pid_t pid;
	pthread_t tid;
};
static struct task *tasks;
static unsigned ntasks;

/* A task's failure: a process child leaves at once; a thread takes the whole process down. */
static void task_failed(const char *what, int err) __attribute__((noreturn));
static void task_failed(const char *what, int err)
{
	pl_fail_fast = !threads_mode;
	if (!err)
		pl_die("%s: unexpected end of data", what);
	errno = err;
	pl_die_errno("%s", what);
}

static void wait_for_go(void)
{
	char byte = 'r';
	struct pollfd p = { .fd = go_r, .events = POLLIN };

	while (write(ready_w, &byte, 1) != 1)
		if (errno != EINTR)
			task_failed("ready", errno);
	while (poll(&p, 1, -1) != 1)
		if (errno != EINTR)
			task_failed("poll on the go pipe", errno);
}

static void send_all(struct task *t)
{
	char *message = malloc(datasize);

	if (!message)
		task_failed("sender buffer", ENOMEM);
	memset(message, 'm', datasize);
	wait_for_go();
	for (unsigned long round = 0; round < loops; round++) {
		for (unsigned r = 0; r < fds; r++) {
			size_t sent = 0;

			while (sent < datasize) {
				ssize_t n = write(t->g->chan[r][1], message + sent, datasize - sent);

				if (n < 0) {
					if (errno == EINTR)
						continue;
					task_failed("sender write", errno);
				}
				sent += (size_t)n;
			}
		}
	}
	free(message);
}

static void receive_all(struct task *t)
{
	char *message = malloc(datasize);
	unsigned long expected = loops * fds;

	if (!message)
		task_failed("receiver buffer", ENOMEM);
	wait_for_go();
	for (unsigned long m = 0; m < expected; m++) {
		size_t got = 0;

		while (got < datasize) {
			ssize_t n = read(t->g->chan[t->index][0], message + got, datasize - got);

			if (n < 0) {
				if (errno == EINTR)
					continue;
				task_failed("receiver read", errno);
			}
			if (n == 0)
				task_failed("receiver read", 0);
			got += (size_t)n;
		}
	}
	free(message);
}

static void *task_main(void *arg)
{
	struct task *t = arg;

	if (t->sender)
		send_all(t);
	else
		receive_all(t);
	return NULL;
}

/* In a child process: keep only the descriptors this task uses. */
static void keep_own_descriptors(struct task *t)
{
	struct group *g = t->g;

	for (unsigned i = 0; i < fds; i++) {
		if (t->sender || i != t->index)
			close(g->chan[i][0]);
		if (!t->sender)
			close(g->chan[i][1]);
	}
	close(ready_r);
	close(go_w);
}

static void stop_started(void)
{
	for (unsigned i = 0; i < ntasks; i++)
		if (!threads_mode && tasks[i].pid > 0)
			kill(tasks[i].pid, SIGKILL);
}

static void start_task(struct task *t)
{
	if (threads_mode) {
		pthread_attr_t attr;
		int err;

		pthread_attr_init(&attr);
		pthread_attr_setstacksize(&attr, PTHREAD_STACK_MIN > 65536 ? PTHREAD_STACK_MIN : 65536);
		err = pthread_create(&t->tid, &attr, task_main, t);
		pthread_attr_destroy(&attr);
		if (err)
			pl_die("cannot start thread %u of %u: %s", ntasks + 1, groups * fds * 2, strerror(err));
	} else {
		pid_t pid = fork();

		if (pid < 0) {
			int err = errno;

			stop_started();
			pl_die("cannot start process %u of %u: %s", ntasks + 1, groups * fds * 2, strerror(err));
		}
		if (pid == 0) {
			keep_own_descriptors(t);
			task_main(t);
			_exit(0);
		}
		t->pid = pid;
	}
	ntasks++;
}

static void open_channel(int pair[2])
{
	int err = use_pipes ? pipe(pair) : socketpair(AF_UNIX, SOCK_STREAM, 0, pair);

	if (err) {
		err = errno;
		stop_started();
		pl_die("cannot make a %s: %s", use_pipes ? "pipe" : "socketpair", strerror(err));
	}
}

int main(int argc, char **argv)
{
	static const char *const modes[] = { "process", "thread" }, *const channels[] = { "socket", "pipe" };
	int c, pair[2];
	char byte;

	pl_progname = "hackbench";
	opterr = 0;
	while ((c = getopt(argc, argv, ":g:f:l:s:m:i:h")) != -1) {
		switch (c) {
		case 'g': groups = (unsigned)pl_parse_uint('g', optarg, 1, MAX_GROUPS); break;
		case 'f': fds = (unsigned)pl_parse_uint('f', optarg, 1, MAX_FDS); break;
		case 'l': loops = pl_parse_uint('l', optarg, 1, MAX_LOOPS); break;
		case 's': datasize = (unsigned)pl_parse_uint('s', optarg, 1, MAX_DATASIZE); break;
		case 'm': threads_mode = pl_parse_choice('m', optarg, modes, 2, "process or thread"); break;
		case 'i': use_pipes = pl_parse_choice('i', optarg, channels, 2, "pipe or socket"); break;
		case 'h':
			printf("usage: %s [-g GROUPS] [-f FDS] [-l LOOPS] [-s DATASIZE] [-m process|thread] "
			       "[-i pipe|socket]\n", argv[0]);
			return 0;
		case ':': pl_usage_error("-%c: missing value", optopt);
		default: pl_usage_error("-%c: unknown option (valid: -g -f -l -s -m -i)", optopt);
		}
	}
	if (optind < argc)
		pl_usage_error("unexpected argument '%.100s'", argv[optind]);

	/* Thread mode holds every channel at once: raise the descriptor limit as far as allowed. */
	if (threads_mode) {
		struct rlimit rl;

		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
			rl.rlim_cur = rl.rlim_max;
			setrlimit(RLIMIT_NOFILE, &rl);
		}
	}
	pl_ignore_sigpipe();

	all = calloc(groups, sizeof *all);
	tasks = calloc((size_t)groups * fds * 2, sizeof *tasks);
	if (!all || !tasks)
		pl_die("out of memory for %u groups", groups);
	if (pipe(pair))
		pl_die("cannot make the ready pipe: %s", strerror(errno));
	ready_r = pair[0], ready_w = pair[1];
	if (pipe(pair))
		pl_die("cannot make the go pipe: %s", strerror(errno));
	go_r = pair[0], go_w = pair[1];

	for (unsigned gi = 0; gi < groups; gi++) {
		struct group *g = &all[gi];

		g->chan = calloc(fds, sizeof *g->chan);
		if (!g->chan)
			pl_die("out of memory for group %u", gi + 1);
		for (unsigned i = 0; i < fds; i++)
			open_channel(g->chan[i]);
		for (unsigned i = 0; i < fds; i++) {
			struct task *t = &tasks[ntasks];

			t->g = g, t->index = i, t->sender = 0;
			start_task(t);
		}
		for (unsigned i = 0; i < fds; i++) {
			struct task *t = &tasks[ntasks];

			t->g = g, t->index = i, t->sender = 1;
			start_task(t);
		}
		/* A process run keeps no channel in the parent: each group's are closed once forked. */
		if (!threads_mode)
			for (unsigned i = 0; i < fds; i++) {
				close(g->chan[i][0]);
				close(g->chan[i][1]);
			}
	}

	for (unsigned i = 0; i < ntasks; i++) {
		ssize_t n = read(ready_r, &byte, 1);

		if (n == 1)
			continue;
		if (n < 0 && errno == EINTR) {
			i--;
			continue;
		}
		stop_started();
		pl_die("only %u of %u tasks became ready", i, ntasks);
	}

	int64_t start = pl_now_ns();
	byte = 'g';
	if (write(go_w, &byte, 1) != 1) {
		stop_started();
		pl_die("cannot release the tasks: %s", strerror(errno));
	}
	int failed = 0;
	for (unsigned i = 0; i < ntasks; i++) {
		if (threads_mode) {
			pthread_join(tasks[i].tid, NULL);
		} else {
			int status;

			while (waitpid(tasks[i].pid, &status, 0) < 0)
				if (errno != EINTR)
					pl_die("waitpid: %s", strerror(errno));
			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
				failed++;
		}
	}
	double elapsed = pl_seconds_since(start);
	if (failed)
		pl_die("%d of %u tasks failed", failed, ntasks);

	pl_metric("hackbench.time", elapsed, "s");
	pl_metric("hackbench.messages", (double)groups * fds * fds * loops, "messages");
	pl_metric("hackbench.tasks", ntasks, "tasks");
	return 0;
}

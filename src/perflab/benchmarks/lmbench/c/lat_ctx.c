/*
 * lat_ctx - context switch time, in microseconds (LMbench: lat_ctx -s K P).
 *
 *   ctx.<P>p_<K>k   P processes connected in a ring of pipes pass a 4-byte
 *                   token round and round; on receiving it each process sums
 *                   its own private array of K KB (its "working set") and
 *                   passes the token on.  The time of one hop (ring time / P)
 *                   minus the overhead of one hop done without switching is
 *                   the context switch time.
 *
 * The overhead, as LMbench defines it, is measured in a single process with
 * hot caches: write the token into a pipe, read it back, sum one K KB array.
 * What remains after subtracting it is the switch itself plus the cost of
 * restoring the process's state, including the cache misses on its working
 * set that the other processes caused.
 *
 * All the processes run on one CPU (the first this program may use; -U
 * lets them run anywhere, as LMbench does by default): on a multiprocessor
 * an unpinned ring times cross-CPU wake-ups, not context switches, and on a
 * virtual machine those cost tens of microseconds and vary from run to run.
 *
 * P = 2 4 8 16 32 64 96 (-p LIST), K = 0 4 8 16 32 64 (-s LIST).
 */
#include "bench.h"

static int procs[16] = { 2, 4, 8, 16, 32, 64, 96 };
static int nprocs = 7;
static int sizes[16] = { 0, 4, 8, 16, 32, 64 };
static int nsizes = 6;

#define MAXPROCS 1024

static volatile int sink;

/* The work each process does with the token: sum its whole array.  One
 * out-of-line copy of the loop serves the ring and the overhead alike, so
 * that what is subtracted is exactly what the ring members execute. */
__attribute__((noinline)) static int sum_array(const int *a, size_t n)
{
	int s0 = 0, s1 = 0, s2 = 0, s3 = 0;
	size_t i = 0;
	for (; i + 16 <= n; i += 16) {
		s0 += a[i] + a[i + 4] + a[i + 8] + a[i + 12];
		s1 += a[i + 1] + a[i + 5] + a[i + 9] + a[i + 13];
		s2 += a[i + 2] + a[i + 6] + a[i + 10] + a[i + 14];
		s3 += a[i + 3] + a[i + 7] + a[i + 11] + a[i + 15];
	}
	for (; i < n; i++)
		s0 += a[i];
	return s0 + s1 + s2 + s3;
}

static int *new_array(size_t nints)
{
	int *a = xmalloc(nints * sizeof(int) + 1);
	for (size_t i = 0; i < nints; i++)
		a[i] = (int)i;
	return a;
}

/* ---- the overhead: one process, no switch ---- */

struct ovr {
	int fd[2];
	int *data;
	size_t nints;
};

static void do_overhead(uint64_t n, void *ctx)
{
	struct ovr *o = ctx;
	int token = 1, s = 0;
	for (uint64_t i = 0; i < n; i++) {
		if (write(o->fd[1], &token, sizeof token) != sizeof token)
			die_errno("write pipe");
		if (read(o->fd[0], &token, sizeof token) != sizeof token)
			die_errno("read pipe");
		s += sum_array(o->data, o->nints);
	}
	sink = s;
}

/* ---- the ring ---- */

struct ring {
	int nprocs;
	int (*pipes)[2];      /* process i reads pipes[i][0], writes pipes[(i+1)%P][1] */
	int *data;            /* process 0's working set */
	size_t nints;
	pid_t *pids;
};

static void ring_member(struct ring *r, int me)
{
	int in = r->pipes[me][0], out = r->pipes[(me + 1) % r->nprocs][1];
	/* the working set is allocated and touched here, so it is this process's own */
	int *data = new_array(r->nints);
	int token, s = 0;
	for (;;) {
		ssize_t got = read(in, &token, sizeof token);
		if (got == 0)
			_exit(0);
		if (got != sizeof token) {
			fprintf(stderr, "lat_ctx: ring member %d: read: %s\n", me, got < 0 ? strerror(errno) : "short read");
			_exit(1);
		}
		s += sum_array(data, r->nints);
		token += s & 1;
		if (write(out, &token, sizeof token) != sizeof token) {
			fprintf(stderr, "lat_ctx: ring member %d: write: %s\n", me, strerror(errno));
			_exit(1);
		}
	}
}

/* n trips of the token round the whole ring, from process 0 */
static void do_ring(uint64_t n, void *ctx)
{
	struct ring *r = ctx;
	int in = r->pipes[0][0], out = r->pipes[1 % r->nprocs][1];
	int token = 0, s = 0;
	for (uint64_t i = 0; i < n; i++) {
		s += sum_array(r->data, r->nints);
		if (write(out, &token, sizeof token) != sizeof token)
			die_errno("write ring pipe");
		if (read(in, &token, sizeof token) != sizeof token)
			die("ring broken: a member died (read returned early)");
	}
	sink = s;
}

static void start_ring(struct ring *r)
{
	for (int i = 0; i < r->nprocs; i++)
		if (pipe(r->pipes[i]) != 0)
			die_errno("pipe (%d processes)", r->nprocs);
	for (int i = 1; i < r->nprocs; i++) {
		pid_t pid = fork_child();
		if (pid == 0) {
			/* keep only this member's two ends */
			for (int j = 0; j < r->nprocs; j++) {
				if (j != i)
					close(r->pipes[j][0]);
				if (j != (i + 1) % r->nprocs)
					close(r->pipes[j][1]);
			}
			ring_member(r, i);
		}
		r->pids[i] = pid;
	}
	/* process 0 keeps its own ends */
	for (int j = 1; j < r->nprocs; j++) {
		close(r->pipes[j][0]);
		if (j != 1 % r->nprocs)
			close(r->pipes[j][1]);
	}
}

static void stop_ring(struct ring *r)
{
	close(r->pipes[0][0]);
	close(r->pipes[1 % r->nprocs][1]);
	for (int i = 1; i < r->nprocs; i++)
		kill_child(r->pids[i]);
}

static int handle(int c, const char *arg)
{
	if (c == 'p') {
		nprocs = pl_parse_list((char)c, arg, procs, 16);
		for (int i = 0; i < nprocs; i++)
			if (procs[i] < 2 || procs[i] > MAXPROCS)
				die("-p: process counts must be 2..%d", MAXPROCS);
		return 1;
	}
	if (c == 's') {
		nsizes = pl_parse_list((char)c, arg, sizes, 16);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	char metric[64];
	double v[BENCH_MAX_SAMPLES];

	bench_init(argc, argv, "lat_ctx", "p:s:", handle, "[-p PROCS] [-s SIZES_KB]");
	raise_nofile(2 * MAXPROCS + 64);

	for (int si = 0; si < nsizes; si++) {
		int k = sizes[si];
		int any = 0;
		for (int pi = 0; pi < nprocs; pi++) {
			snprintf(metric, sizeof metric, "ctx.%dp_%dk", procs[pi], k);
			any |= want(metric);
		}
		if (!any)
			continue;

		size_t nints = (size_t)k * 1024 / sizeof(int);
		int *data = new_array(nints);

		/* overhead of one hop for this working-set size: the median sample */
		struct ovr ov = { { -1, -1 }, data, nints };
		if (pipe(ov.fd) != 0)
			die_errno("pipe");
		double overhead = bench_baseline(do_overhead, &ov);
		close(ov.fd[0]);
		close(ov.fd[1]);

		for (int pi = 0; pi < nprocs; pi++) {
			int p = procs[pi];
			snprintf(metric, sizeof metric, "ctx.%dp_%dk", p, k);
			if (!want(metric))
				continue;
			int (*pipes)[2] = xmalloc(sizeof(int[2]) * (size_t)p);
			pid_t *pids = xmalloc(sizeof(pid_t) * (size_t)p);
			struct ring r = { p, pipes, data, nints, pids };
			start_ring(&r);
			do_ring(2, &r); /* every member has allocated its working set */
			bench_samples(do_ring, &r, v);
			stop_ring(&r);
			for (int i = 0; i < opt.samples; i++)
				emit(metric, (v[i] / p - overhead) * 1e-3, "us");
			free(pipes);
			free(pids);
		}
		free(data);
	}
	return 0;
}

/*
 * bench.h - the timing harness shared by perflab's LMbench-class programs.
 *
 * Written for perflab; no code is taken from LMbench.  Each program:
 *   - parses the common options (-n samples, -t target ms, -d directory,
 *     -T tiny sizes, -o metric filter, -L harness figures) plus its own;
 *   - calibrates an iteration count so that one timed sample lasts about the
 *     target (far above the resolution of CLOCK_MONOTONIC);
 *   - prints every sample as one metric line on stdout (the runtime's
 *     protocol, core/c/perflab.h), rounded to six significant digits as
 *     these programs always printed them:
 *       {"metric": "syscall.null", "value": 0.0412, "unit": "us"}
 *   - on any failing system call prints "PROGRAM: what: strerror" on stderr
 *     and exits with status 1 (pl_die_errno).
 *
 * Everything here is static: each program is one translation unit.
 */
#ifndef PERFLAB_BENCH_H
#define PERFLAB_BENCH_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "perflab.h"
#ifdef __linux__
#include <sched.h>
#include <sys/prctl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#endif

#define BENCH_MAX_SAMPLES 1000

/* every helper is static; a program uses only some of them */

struct bench_opts {
	int samples;          /* -n: samples printed per figure by this process */
	double target_ms;     /* -t: wall time of one sample */
	const char *dir;      /* -d: directory for temporary files */
	int tiny;             /* -T: tiny sizes, for the test suite */
	const char *only;     /* -o: comma-separated metrics (a trailing '.' or '*' is a prefix) */
	int harness;          /* -L: print the harness's own overhead figures instead */
	int unpinned;         /* -U: do not pin this program (and its children) to one CPU */
};

static struct bench_opts opt = { 5, 10.0, NULL, 0, NULL, 0, 0 };

/* ---- errors --------------------------------------------------------- */

/* the runtime's, under the names these programs use */
#define die pl_die
#define die_errno pl_die_errno

static void *xmalloc(size_t n)
{
	void *p = NULL;
	/* page aligned, as a buffer handed to the kernel or walked by stride should be */
	if (posix_memalign(&p, 4096, n ? n : 1) != 0)
		die("out of memory allocating %zu bytes", n);
	return p;
}

/* ---- time ----------------------------------------------------------- */

/* A benchmark body runs its operation n times; the loop is inside it so that
 * the harness adds one indirect call per sample, not per iteration. */
typedef void (*bench_fn)(uint64_t n, void *ctx);

/* What the timed runs (calibration, samples, settling) add up to: a run lasts its
 * length of wall time however busy the machine, so this part of a program's time
 * is set by the mode, not by the load.  With $PERFLAB_LMBENCH_TIMED set it is
 * printed on stderr at exit (tools/bench/lmbench_quick.py --per-program). */
static double bench_timed_ns;
static long bench_timed_runs;

static double time_ns(bench_fn fn, void *ctx, uint64_t n)
{
	int64_t t0 = pl_now_ns();
	fn(n, ctx);
	double t = (double)(pl_now_ns() - t0);
	bench_timed_ns += t;
	bench_timed_runs++;
	return t;
}

static double target_ns(void)
{
	return opt.target_ms * 1e6;
}

/* Iterations for one sample of about the target time.  Grows n until a run
 * lasts a quarter of the target, extrapolates, then re-measures once at that
 * count (warm) and corrects: the first runs pay for cold caches and faults. */
static uint64_t calibrate(bench_fn fn, void *ctx)
{
	double target = target_ns();
	uint64_t n = 1;
	double t;
	for (;;) {
		t = time_ns(fn, ctx, n);
		if (t >= target / 4 || n >= (UINT64_C(1) << 40))
			break;
		double grow = t > 0 ? (target / 2) / t : 1000;
		if (grow < 2)
			grow = 2;
		if (grow > 1000)
			grow = 1000;
		n = (uint64_t)(n * grow) + 1;
	}
	double est = n * target / (t > 0 ? t : 1);
	n = est < 1 ? 1 : (uint64_t)est;
	t = time_ns(fn, ctx, n);
	est = n * target / (t > 0 ? t : 1);
	return est < 1 ? 1 : (uint64_t)(est + 0.5);
}

/* Run fn until its time per iteration is steady, or for at most 2 s: for
 * benchmarks over freshly allocated memory, which can take a few hundred
 * milliseconds to reach its steady speed (on a virtual machine the host may
 * still be backing it with small pages).  Runs of about 10 ms, in windows of
 * five: steady when the last five are within 2% of their mean, or when their
 * mean is within 1% of the previous five's - the warm-up trend is over even
 * if the machine's noise keeps single runs apart (on a shared machine the
 * first test alone used to wait out the whole 2 s every time).  Skipped
 * with -T. */
static void bench_steady(bench_fn fn, void *ctx)
{
	enum { RUNS = 5 };
	double last[RUNS], spent = 0, t, before = 0;
	uint64_t n = 1;
	if (opt.tiny)
		return;
	while ((t = time_ns(fn, ctx, n)) < 1e6 && n < (UINT64_C(1) << 40))
		n *= 4;
	n = (uint64_t)(n * 1e7 / t) + 1;
	for (int i = 0; spent < 2e9; i++) {
		t = time_ns(fn, ctx, n);
		spent += t;
		last[i % RUNS] = t;
		if (i + 1 < RUNS)
			continue;
		double mean = 0, lo = last[0], hi = last[0];
		for (int j = 0; j < RUNS; j++) {
			mean += last[j] / RUNS;
			lo = last[j] < lo ? last[j] : lo;
			hi = last[j] > hi ? last[j] : hi;
		}
		if (lo > mean * 0.98 && hi < mean * 1.02)
			break;
		if ((i + 1) % RUNS == 0) {
			/* a whole new window: compare it with the one before */
			if (before > 0 && mean > before * 0.99 && mean < before * 1.01)
				break;
			before = mean;
		}
	}
}

/* opt.samples samples of fn: per_iter[i] = ns per iteration of sample i. */
static int bench_samples(bench_fn fn, void *ctx, double *per_iter)
{
	uint64_t n = calibrate(fn, ctx);
	for (int i = 0; i < opt.samples; i++)
		per_iter[i] = time_ns(fn, ctx, n) / (double)n;
	return opt.samples;
}

/* The median of v[0..n) (n >= 1), which it sorts in place. */
static double median_in_place(double *v, int n)
{
	for (int a = 1; a < n; a++)
		for (int b = a; b > 0 && v[b] < v[b - 1]; b--) {
			double t = v[b];
			v[b] = v[b - 1];
			v[b - 1] = t;
		}
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* A cost to subtract from other samples: the median of at least 5 samples
 * (ns per iteration), so that one disturbed sample cannot make a figure
 * negative. */
static double bench_baseline(bench_fn fn, void *ctx)
{
	double v[BENCH_MAX_SAMPLES];
	int saved = opt.samples;
	if (opt.samples < 5)
		opt.samples = 5;
	int n = bench_samples(fn, ctx, v);
	opt.samples = saved;
	return median_in_place(v, n);
}

/* ---- output --------------------------------------------------------- */

static int want(const char *metric)
{
	if (!opt.only || !*opt.only)
		return 1;
	const char *p = opt.only;
	size_t mlen = strlen(metric);
	while (*p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		if (len > 0) {
			int prefix = p[len - 1] == '*' || p[len - 1] == '.';
			size_t cmp = p[len - 1] == '*' ? len - 1 : len;
			if (prefix ? (mlen >= cmp && strncmp(metric, p, cmp) == 0)
				   : (mlen == len && strncmp(metric, p, len) == 0))
				return 1;
		}
		if (!end)
			break;
		p = end + 1;
	}
	return 0;
}

/* one sample: six significant digits, the precision these figures were always stored with */
static void emit(const char *metric, double value, const char *unit)
{
	char text[32];
	snprintf(text, sizeof text, "%.6g", value);
	pl_metric(metric, isfinite(value) ? strtod(text, NULL) : value, unit);
}

/* Latency figure: each sample is (ns per iteration - subtract_ns), in unit
 * (scale converts ns to it: 1e-3 for us). */
static void bench_latency(const char *metric, bench_fn fn, void *ctx, double subtract_ns,
			  double scale, const char *unit)
{
	double v[BENCH_MAX_SAMPLES];
	if (!want(metric))
		return;
	bench_samples(fn, ctx, v);
	for (int i = 0; i < opt.samples; i++)
		emit(metric, (v[i] - subtract_ns) * scale, unit);
}

/* Bandwidth figure in MB/s (MB = 2^20 bytes, as LMbench): bytes moved per
 * iteration over the time per iteration. */
static void bench_bandwidth(const char *metric, bench_fn fn, void *ctx, double bytes_per_iter)
{
	double v[BENCH_MAX_SAMPLES];
	if (!want(metric))
		return;
	bench_samples(fn, ctx, v);
	for (int i = 0; i < opt.samples; i++)
		emit(metric, bytes_per_iter / (v[i] * 1e-9) / (1024.0 * 1024.0), "MB/s");
}

/* ---- the harness's own overhead -------------------------------------- */

static void empty_loop(uint64_t n, void *ctx)
{
	(void)ctx;
	for (uint64_t i = 0; i < n; i++)
		__asm__ __volatile__("" ::: "memory");
}

static double measure_loop_ns(void)
{
	double v[BENCH_MAX_SAMPLES], best = 1e9;
	int saved = opt.samples;
	double saved_t = opt.target_ms;
	opt.samples = 3;
	if (opt.target_ms > 5)
		opt.target_ms = 5;
	bench_samples(empty_loop, NULL, v);
	for (int i = 0; i < opt.samples; i++)
		if (v[i] < best)
			best = v[i];
	opt.samples = saved;
	opt.target_ms = saved_t;
	return best;
}

/* The cost of one empty iteration of a timing loop, measured the first time
 * a program asks (three programs subtract it; the others do not pay for it). */
static double loop_ns(void)
{
	static double cost = -1;
	if (cost < 0)
		cost = measure_loop_ns();
	return cost;
}

static void clock_loop(uint64_t n, void *ctx)
{
	(void)ctx;
	for (uint64_t i = 0; i < n; i++)
		(void)pl_now_ns();
}

/* -L: what the harness itself costs, in ns. */
static void report_harness(void)
{
	double v[BENCH_MAX_SAMPLES];
	int saved = opt.samples;
	opt.samples = saved < 3 ? 3 : saved;
	bench_samples(empty_loop, NULL, v);
	for (int i = 0; i < opt.samples; i++)
		emit("harness.loop", v[i], "ns");
	bench_samples(clock_loop, NULL, v);
	for (int i = 0; i < opt.samples; i++)
		emit("harness.clock_gettime", v[i], "ns");
	opt.samples = saved;
}

/* ---- files and processes -------------------------------------------- */

/* "<dir>/perflab-<prog>-<pid>-<name>" */
static void tmp_path(char *buf, size_t len, const char *name)
{
	const char *dir = opt.dir;
	if (!dir || !*dir)
		dir = getenv("TMPDIR");
	if (!dir || !*dir)
		dir = "/tmp";
	int n = snprintf(buf, len, "%s/perflab-%s-%d-%s", dir, pl_progname, (int)getpid(), name);
	if (n < 0 || (size_t)n >= len)
		die("temporary path too long in %s", dir);
}

/* Create (or replace) a file of `size` bytes of non-zero data; returns an fd open O_RDWR. */
static int make_file(const char *path, size_t size)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		die_errno("create %s", path);
	size_t chunk = 1 << 16;
	char *buf = xmalloc(chunk);
	for (size_t i = 0; i < chunk; i++)
		buf[i] = (char)(i * 7 + 1);
	for (size_t done = 0; done < size;) {
		size_t want_n = size - done < chunk ? size - done : chunk;
		ssize_t w = write(fd, buf, want_n);
		if (w <= 0)
			die_errno("write %s", path);
		done += (size_t)w;
	}
	free(buf);
	return fd;
}

/* The file a file benchmark works on: `given` (-f FILE, which must hold at
 * least `size` bytes), or a new temporary file of `size` bytes, removed at
 * exit.  Its path is left in `path`; returns an fd open with `flags`. */
static char *test_file_made;

static void remove_test_file(void)
{
	if (test_file_made)
		unlink(test_file_made);
}

static int open_test_file(char *path, size_t len, const char *given, size_t size, int flags)
{
	if (!given) {
		tmp_path(path, len, "file");
		test_file_made = path;
		atexit(remove_test_file);
		return make_file(path, size); /* O_RDWR serves every `flags` */
	}
	struct stat st;
	int fd;
	if ((size_t)snprintf(path, len, "%s", given) >= len)
		die("-f: path too long: %s", given);
	if ((fd = open(path, flags)) < 0)
		die_errno("open %s", path);
	if (fstat(fd, &st) != 0)
		die_errno("fstat %s", path);
	if ((size_t)st.st_size < size)
		die("%s has %lld bytes, fewer than %zu", path, (long long)st.st_size, size);
	return fd;
}

/* ---- signals --------------------------------------------------------- */

/* SIGUSR1 sent to oneself, with usr1_handler installed: delivery, handler,
 * return; kill(self, 0) is the same call delivering nothing.  Their
 * difference is LMbench's "signal handler overhead" (lat_sig, lat_vm). */
static volatile sig_atomic_t usr1_caught;

static void usr1_handler(int sig)
{
	(void)sig;
	usr1_caught++;
}

static void install_usr1_handler(void)
{
	pl_on_signal(SIGUSR1, usr1_handler);
}

static void do_kill_usr1(uint64_t n, void *ctx)
{
	pid_t self = *(pid_t *)ctx;
	for (uint64_t i = 0; i < n; i++)
		if (kill(self, SIGUSR1) != 0)
			die_errno("kill");
}

static void do_kill0(uint64_t n, void *ctx)
{
	pid_t self = *(pid_t *)ctx;
	for (uint64_t i = 0; i < n; i++)
		if (kill(self, 0) != 0)
			die_errno("kill");
}

/* fork a child that dies with its parent (a killed benchmark leaves nothing behind) */
static pid_t fork_child(void)
{
	pid_t pid = fork();
	if (pid < 0)
		die_errno("fork");
#ifdef __linux__
	if (pid == 0)
		prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
	return pid;
}

static void kill_child(pid_t pid)
{
	int status;
	kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
}

static void full_read(int fd, void *buf, size_t len, const char *what)
{
	char *p = buf;
	while (len > 0) {
		ssize_t r = read(fd, p, len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die_errno("read %s", what);
		if (r == 0)
			die("read %s: unexpected end of file", what);
		p += r;
		len -= (size_t)r;
	}
}

static void full_write(int fd, const void *buf, size_t len, const char *what)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			die_errno("write %s", what);
		p += w;
		len -= (size_t)w;
	}
}

/* Every program runs on one CPU - the first its affinity mask allows - and
 * the processes it forks inherit that (see docs/lmbench.md).  Hand-off
 * benchmarks (lat_ctx, lat_ipc, bw_ipc) then time switches and hand-offs,
 * not cross-CPU wake-ups, and no figure depends on which CPU the scheduler
 * happened to pick (CPUs of one machine differ: hybrid cores, a virtual
 * machine's noisy siblings).  -U leaves placement to the scheduler, as
 * LMbench does by default.  Returns the CPU, or -1 when not pinned. */
static int pin_to_one_cpu(void)
{
	int *cpus;
	if (opt.unpinned)
		return -1;
	int cpu = pl_allowed_cpus(&cpus) > 0 ? cpus[0] : -1;
	free(cpus);
	return cpu >= 0 && pl_pin(0, cpu) == 0 ? cpu : -1;
}

/* Allow at least `want_fds` open files (select on 500 sockets needs it). */
static void raise_nofile(rlim_t want_fds)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		die_errno("getrlimit");
	if (rl.rlim_cur >= want_fds)
		return;
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want_fds ? want_fds : rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		die_errno("setrlimit RLIMIT_NOFILE");
	if (rl.rlim_cur < want_fds)
		die("needs %lu open files, the hard limit is %lu", (unsigned long)want_fds, (unsigned long)rl.rlim_max);
}

/* -m SIZE of the programs that work on a size of memory or file (bw_mem,
 * lat_mem, bw_file, lat_vm) and -f FILE of those that work on one file
 * (bw_file, lat_vm): pass size_option to bench_init (with "m:" or
 * "m:f:"); the size is 64 MB, and with -T the program's tiny size unless
 * -m says otherwise */
static struct {
	size_t size;
	const char *file;
} size_opt = { 64u << 20, NULL };

static int size_option(int c, const char *arg)
{
	if (c == 'm')
		size_opt.size = pl_parse_size('m', arg);
	else if (c == 'f')
		size_opt.file = arg;
	else
		return 0;
	return 1;
}

static size_t size_option_value(size_t tiny)
{
	return opt.tiny && size_opt.size == (64u << 20) ? tiny : size_opt.size;
}

/* ---- options -------------------------------------------------------- */

typedef int (*bench_opt_fn)(int c, const char *arg);

static void bench_usage(const char *extra)
{
	fprintf(stderr,
		"usage: %s [-n SAMPLES] [-t TARGET_MS] [-d DIR] [-T] [-U] [-o METRICS] [-L]%s%s\n"
		"  -n SAMPLES   samples printed per figure (default %d)\n"
		"  -t MS        length of one timed sample in ms (default %g)\n"
		"  -d DIR       directory for temporary files (default $TMPDIR or /tmp)\n"
		"  -T           tiny sizes (for tests)\n"
		"  -U           unpinned: let the scheduler place the processes (default: the first allowed CPU)\n"
		"  -o METRICS   only these metrics (comma-separated; 'prefix.' or 'prefix*')\n"
		"  -L           print the harness's own overhead (ns) and exit\n",
		pl_progname, extra && *extra ? " " : "", extra ? extra : "", opt.samples, opt.target_ms);
	exit(2);
}

/* Parse common options and the program's own (`own` is a getopt string,
 * `handle` returns 0 for an option it does not know). */
static pid_t bench_main_pid;
static void report_timed(void)
{
	if (getpid() == bench_main_pid)  /* not a forked helper exiting */
		fprintf(stderr, "%s: timed %.3f s in %ld runs\n", pl_progname, bench_timed_ns * 1e-9, bench_timed_runs);
}

static void bench_init(int argc, char **argv, const char *name, const char *own,
		       bench_opt_fn handle, const char *usage_extra)
{
	char optstring[128];
	int c;
	pl_progname = name;
	bench_main_pid = getpid();
	if (getenv("PERFLAB_LMBENCH_TIMED"))
		atexit(report_timed);
	snprintf(optstring, sizeof optstring, "n:t:d:TUo:Lh%s", own ? own : "");
	while ((c = getopt(argc, argv, optstring)) != -1) {
		switch (c) {
		case 'n':
			opt.samples = (int)pl_parse_uint('n', optarg, 1, BENCH_MAX_SAMPLES);
			break;
		case 't':
			opt.target_ms = pl_parse_real('t', optarg, 0, 0, 1e9, "milliseconds, a number > 0");
			break;
		case 'd': opt.dir = optarg; break;
		case 'T': opt.tiny = 1; break;
		case 'U': opt.unpinned = 1; break;
		case 'o': opt.only = optarg; break;
		case 'L': opt.harness = 1; break;
		case 'h': bench_usage(usage_extra); break;
		default:
			if (!handle || !handle(c, optarg))
				bench_usage(usage_extra);
		}
	}
	if (optind != argc)
		bench_usage(usage_extra);
	/* A benchmark writing to a closed pipe gets EPIPE, not a silent death. */
	pl_ignore_sigpipe();
	pin_to_one_cpu();
	if (opt.harness) {
		report_harness();
		exit(0);
	}
}

#endif /* PERFLAB_BENCH_H */

/* A TCP socket listening on 127.0.0.1 at a kernel-chosen port, written to
 * *addr. sndbuf > 0 sets SO_SNDBUF before listen(), so accepted sockets
 * inherit it. */
static int tcp_listen_loopback(int backlog, int sndbuf, struct sockaddr_in *addr)
{
	socklen_t len = sizeof *addr;
	int one = 1;
	int l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0)
		die_errno("socket");
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	memset(addr, 0, sizeof *addr);
	addr->sin_family = AF_INET;
	addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(l, (struct sockaddr *)addr, sizeof *addr) != 0)
		die_errno("bind TCP 127.0.0.1");
	if (sndbuf > 0 && setsockopt(l, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf) != 0)
		die_errno("setsockopt SO_SNDBUF");
	if (listen(l, backlog) != 0)
		die_errno("listen");
	if (getsockname(l, (struct sockaddr *)addr, &len) != 0)
		die_errno("getsockname");
	return l;
}

/* A TCP connection on 127.0.0.1 to a forked child, which accepts it and
 * runs serve(fd) (serve does not return); this process gets its end, and
 * the child's pid in *child (bw_ipc, lat_ipc). rcvbuf > 0 sets SO_RCVBUF
 * on this end before connect(), when the window is agreed on; `connecting`
 * names the step in the error message. */
static int tcp_connect_child(int backlog, int sndbuf, int rcvbuf, void (*serve)(int fd),
			     const char *connecting, pid_t *child)
{
	struct sockaddr_in addr;
	int l = tcp_listen_loopback(backlog, sndbuf, &addr);
	pid_t pid = fork_child();
	if (pid == 0) {
		int a = accept(l, NULL, NULL);
		if (a < 0)
			_exit(1);
		close(l);
		serve(a);
	}
	close(l);
	int c = socket(AF_INET, SOCK_STREAM, 0);
	if (c < 0)
		die_errno("socket");
	if (rcvbuf > 0 && setsockopt(c, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf) != 0)
		die_errno("setsockopt SO_RCVBUF");
	if (connect(c, (struct sockaddr *)&addr, sizeof addr) != 0)
		die_errno("%s 127.0.0.1:%d", connecting, ntohs(addr.sin_port));
	*child = pid;
	return c;
}

/* One figure of a program that measures several (bw_ipc, lat_ipc): its
 * metric and the function that measures and prints it. */
struct bench_case {
	const char *metric;
	void (*run)(void);
};

/* Run the cases -o asks for, in order. */
static void run_wanted(const struct bench_case *cases, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (want(cases[i].metric))
			cases[i].run();
}

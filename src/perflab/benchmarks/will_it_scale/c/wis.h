/*
 * wis.h - the harness shared by perflab's will-it-scale-class testcases.
 *
 * Written for perflab; no code is taken from will-it-scale.  A testcase file
 * includes this header and defines
 *
 *     static const struct wis_testcase testcase = { ... };
 *
 * whose task() does its own setup, calls wis_ready(), then repeats one
 * operation forever, counting it with wis_count().  This header holds main():
 * it parses the options, starts N tasks (processes or threads, each bound to
 * a CPU), waits until every task is ready, opens the start gate and samples
 * the per-task counters at fixed intervals, printing metric lines on stdout
 * (the runtime's protocol, core/c/perflab.h), each with an "event" key and
 * the event's details after the metric:
 *
 *   {"metric": "wis.tasks", "value": N, "unit": "tasks", "event": "start",
 *    "testcase": ..., "mode": ..., "tasks": N, "bind": true, "cpus": [...], ...}
 *   {"metric": "wis.ops", "value": SUM, "unit": "ops", "event": "interval",
 *    "warmup": true|false, "elapsed": S, "ops": [n0, n1, ...]}
 *   {"metric": "wis.intervals", "value": K, "unit": "intervals", "event": "end"}
 *
 * SUM is the operations of all tasks in the interval, ops[i] task i's, S the
 * interval's seconds (to the microsecond, as always).  Errors go to stderr as
 * one line; bad options exit 2, any other failure 1.  Everything is static:
 * each testcase is one translation unit.
 */
#ifndef PERFLAB_WIS_H
#define PERFLAB_WIS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "perflab.h"


#define WIS_SLOT 128            /* bytes per counter: two 64-byte lines, so the
                                   adjacent-line prefetcher cannot couple tasks */
#define WIS_MAX_TASKS 65536
#define WIS_PARK_SIGNAL SIGUSR2 /* stops a task thread at the end of a run */

struct wis_task {
	unsigned nr;                    /* 0 .. tasks-1 (a partner has its task's nr) */
	unsigned long long *iterations; /* this task's counter, alone in its slot */
	int cpu;                        /* bound to this CPU, -1 when unbound */
	int partner;                    /* 1 for the uncounted partner of a pair */
	pthread_t thread;
	pid_t pid;
};

struct wis_testcase {
	const char *name;
	const char *description;
	/* optional: runs in the harness before any task exists (shared files) */
	void (*prepare)(unsigned ntasks);
	/* per task: setup, wis_ready(t), then the operation in a loop; never returns */
	void (*task)(struct wis_task *t);
	/* optional: a second, uncounted task per task on the same CPU (pairs) */
	void (*partner)(struct wis_task *t);
	/* the task calls wis_cycle() at the start of each cycle of its loop (map, one op per
	   page, unmap): with -N the measured part is its second whole cycle */
	int cycles;
};

/* where a cycling task stamps its first cycles' starts (time, its count), in shared memory */
#define WIS_CYCLE_STAMPS 3
struct wis_cycle_stamps {
	unsigned long long seen;        /* stamps written so far (only its task writes) */
	int64_t ns[WIS_CYCLE_STAMPS];
	unsigned long long ops[WIS_CYCLE_STAMPS];
	char pad[WIS_SLOT - 8 - 16 * WIS_CYCLE_STAMPS];
};

/* defined by the testcase file that includes this header */
static const struct wis_testcase testcase;

enum wis_mode { WIS_PROCESS, WIS_THREAD };
enum wis_thp { WIS_THP_SYSTEM, WIS_THP_ALWAYS, WIS_THP_NEVER, WIS_THP_MADVISE };
static const char *const wis_thp_names[] = { "system", "always", "never", "madvise" };
static const char *const wis_mode_names[] = { "process", "thread" };

/* the control slot shared by the harness and its tasks */
struct wis_control {
	unsigned ready;                 /* tasks that finished their setup */
	unsigned parked;                /* task threads stopped at the end */
};

static struct {
	enum wis_mode mode;
	unsigned ntasks;
	double duration, warmup, interval;
	unsigned long long ops_target;  /* -N: the measured part sized to this many ops (0: -d) */
	double least;                   /* -L: with -N, the measured part's least length */
	int bind;
	enum wis_thp thp;
	const char *dir;
	/* run state */
	struct wis_control *control;
	unsigned char *slots;           /* WIS_SLOT bytes per task */
	struct wis_cycle_stamps *stamps;        /* one per task, after the slots */
	struct wis_task *tasks;         /* ntasks, then the partners */
	unsigned nspawned;              /* tasks (and partners) started so far */
	int *cpus;                      /* CPUs this process may run on */
	int ncpus;
	int gate[2];                    /* tasks block reading gate[0] until it is closed */
	pid_t harness_pid;
	int in_task_process;            /* this process is a task (process mode) */
	pthread_t main_thread;
	volatile sig_atomic_t stop_signal;
	char **paths;                   /* files and directories to remove at exit */
	unsigned char *path_is_dir;
	unsigned npaths, path_cap;
} wis = { .mode = WIS_PROCESS, .ntasks = 1, .duration = 5, .warmup = 1, .interval = 1, .least = 0.001,
	  .bind = 1, .thp = WIS_THP_SYSTEM, .gate = { -1, -1 } };

/* the task the calling thread runs, for error messages (-1: the harness) */
static __thread int wis_self_nr = -1;
static __thread int wis_self_partner;

static void wis_shutdown_tasks(void);
static void wis_remove_files(void);

/* ---- output and errors ---------------------------------------------- */

/* Errors are the runtime's (one line on stderr, no stdio, no heap: brk1 and
 * brk2 move the break under malloc); the harness adds the failing task to the
 * line and, on the way out, stops the tasks and removes the temporary files.
 * A task process just exits (the harness sees it and stops the rest). */
#define wis_die pl_die
#define wis_die_errno pl_die_errno

static int wis_fail_context(char *buf, size_t len)
{
	if (wis_self_nr < 0)
		return 0;
	return snprintf(buf, len, "task %d%s: ", wis_self_nr, wis_self_partner ? " (partner)" : "");
}

static void wis_on_fail(int status)
{
	(void)status;
	if (!wis.in_task_process) {
		if (wis.mode == WIS_PROCESS || pthread_equal(pthread_self(), wis.main_thread))
			wis_shutdown_tasks();
		wis_remove_files();
	}
}

/* ---- time ----------------------------------------------------------- */

/* sleep until the CLOCK_MONOTONIC instant `when`; returns early (non-zero)
 * when a stop signal arrived */
static int wis_sleep_until(int64_t when)
{
	struct timespec ts = { (time_t)(when / 1000000000), (long)(when % 1000000000) };
	for (;;) {
		if (wis.stop_signal)
			return 1;
		int rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
		if (rc == 0)
			return wis.stop_signal != 0;
		if (rc != EINTR)
			wis_die("clock_nanosleep: %s", strerror(rc));
	}
}

static void wis_pause_ms(int ms)
{
	struct timespec ts = { 0, ms * 1000000L };
	nanosleep(&ts, NULL);
}

/* ---- the testcases' side -------------------------------------------- */

/* count n operations: a relaxed store of this task's own counter (on x86 and
 * arm64 the same instructions as a plain increment) */
static inline void wis_count(struct wis_task *t, unsigned n)
{
	__atomic_store_n(t->iterations, __atomic_load_n(t->iterations, __ATOMIC_RELAXED) + n,
			 __ATOMIC_RELAXED);
}

/* a cycling testcase's task starts a cycle: its first WIS_CYCLE_STAMPS starts are stamped
   (once they are, a load and a compare a cycle: nothing next to a cycle's thousands of faults) */
static inline void wis_cycle(struct wis_task *t)
{
	struct wis_cycle_stamps *c = &wis.stamps[t->nr];
	unsigned long long n = c->seen;
	if (n >= WIS_CYCLE_STAMPS)
		return;
	c->ns[n] = pl_now_ns();
	c->ops[n] = __atomic_load_n(t->iterations, __ATOMIC_RELAXED);
	__atomic_store_n(&c->seen, n + 1, __ATOMIC_RELEASE);
}

/* setup is done: wait for the start gate, which opens once every task is ready */
static void wis_ready(struct wis_task *t)
{
	char c;
	__atomic_add_fetch(&wis.control->ready, 1, __ATOMIC_SEQ_CST);
	for (;;) {
		ssize_t n = read(wis.gate[0], &c, 1);
		if (n == 0)
			return;                 /* the harness closed the gate's write end */
		if (n < 0 && errno != EINTR)
			wis_die_errno("waiting for the start (task %u)", t->nr);
	}
}

/* -H always: ask for huge pages on a big mapping the testcase is about to touch */
static void wis_thp_advise(void *addr, size_t len)
{
	if (wis.thp == WIS_THP_ALWAYS && madvise(addr, len, MADV_HUGEPAGE) != 0)
		wis_die_errno("madvise(MADV_HUGEPAGE)");
}

/* keep a pointer alive so that the compiler cannot drop an allocation */
static inline void wis_keep(void *p)
{
	__asm__ __volatile__("" : : "r"(p) : "memory");
}

static void wis_write_zeros(int fd, size_t bytes)
{
	static const char zeros[65536];
	while (bytes > 0) {
		size_t chunk = bytes < sizeof zeros ? bytes : sizeof zeros;
		ssize_t n = write(fd, zeros, chunk);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			wis_die_errno("writing a temporary file in %s", wis.dir);
		bytes -= (size_t)n;
	}
}

/* a private file for one task: created in the -D directory and unlinked at
 * once, so nothing is left behind whatever happens; `fill` bytes of zeros
 * are written, then it is extended to `size` bytes (sparse) */
static int wis_private_file(size_t fill, off_t size)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/wis-%s.XXXXXX", wis.dir, testcase.name);
	int fd = mkstemp(path);
	if (fd < 0)
		wis_die_errno("creating a temporary file in %s", wis.dir);
	if (unlink(path) != 0)
		wis_die_errno("unlink %s", path);
	wis_write_zeros(fd, fill);
	if (size > 0 && ftruncate(fd, size) != 0)
		wis_die_errno("ftruncate of a temporary file in %s to %lld bytes", wis.dir, (long long)size);
	return fd;
}

/* remember a path for removal at exit (called in the harness, before the tasks) */
static const char *wis_register_path(const char *path, int is_dir)
{
	if (wis.npaths == wis.path_cap) {
		unsigned cap = wis.path_cap ? 2 * wis.path_cap : 16;
		char **p = realloc(wis.paths, cap * sizeof *p);
		unsigned char *d = realloc(wis.path_is_dir, cap);
		if (!p || !d)
			wis_die("out of memory");
		wis.paths = p;
		wis.path_is_dir = d;
		wis.path_cap = cap;
	}
	char *copy = strdup(path);
	if (!copy)
		wis_die("out of memory");
	wis.paths[wis.npaths] = copy;
	wis.path_is_dir[wis.npaths] = (unsigned char)is_dir;
	wis.npaths++;
	return copy;
}

/* a named file shared by the tasks (prepare only): `fill` bytes of zeros;
 * removed at exit.  With `keep_name_only` the file is removed at once and only
 * its (unique) name is kept, for testcases that create it themselves. */
static const char *wis_shared_file(const char *in_dir, size_t fill, int keep_name_only)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/wis-%s.XXXXXX", in_dir ? in_dir : wis.dir, testcase.name);
	int fd = mkstemp(path);
	if (fd < 0)
		wis_die_errno("creating a temporary file in %s", in_dir ? in_dir : wis.dir);
	const char *kept = wis_register_path(path, 0);
	wis_write_zeros(fd, fill);
	close(fd);
	if (keep_name_only && unlink(path) != 0)
		wis_die_errno("unlink %s", path);
	return kept;
}

/* a directory of its own (prepare only); removed at exit after its files */
static const char *wis_shared_dir(void)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/wis-%s.XXXXXX", wis.dir, testcase.name);
	if (!mkdtemp(path))
		wis_die_errno("creating a temporary directory in %s", wis.dir);
	return wis_register_path(path, 1);
}

/* remove what wis_shared_file/wis_shared_dir created, newest first (files
 * before their directory); async-signal-safe after setup */
static void wis_remove_files(void)
{
	for (unsigned i = wis.npaths; i-- > 0;) {
		if (wis.path_is_dir[i])
			rmdir(wis.paths[i]);
		else
			unlink(wis.paths[i]);
	}
}

/* ---- options -------------------------------------------------------- */

static void wis_usage(void)
{
	char text[2048];
	int n = snprintf(text, sizeof text,
		"usage: %s [-m process|thread] [-n TASKS] [-d SECONDS] [-w SECONDS] [-i SECONDS]\n"
		"       %*s [-N OPS [-L SECONDS]] [-B] [-H always|never|madvise|system] [-D DIR] [-h]\n"
		"%s: %s\n"
		"  -m MODE     tasks are processes (default) or threads\n"
		"  -n TASKS    number of tasks (default 1)\n"
		"  -d SECONDS  measured duration (default 5)\n"
		"  -w SECONDS  warm-up before it, reported as warm-up intervals (default 1)\n"
		"  -i SECONDS  reporting interval (default 1)\n"
		"  -N OPS      size the measured part in operations: one interval whose length\n"
		"              the warm-up's rate fits to about OPS operations of all tasks (at\n"
		"              most -d seconds), its elapsed time to the nanosecond (for clocks\n"
		"              that count instructions, where a figure is exact once enough\n"
		"              operations are in it; needs -w > 0)\n"
		"  -L SECONDS  with -N: the measured interval's least length (default 0.001)\n"
		"              (a testcase that maps, touches and unmaps an area in cycles\n"
		"              measures its second whole cycle with -N instead)\n"
		"  -B          do not bind task i to the i-th allowed CPU (modulo their number)\n"
		"  -H POLICY   transparent huge pages for this run: never (prctl), always\n"
		"              (madvise on the testcase's mappings), madvise or system (as set)\n"
		"  -D DIR      directory for temporary files (default $TMPDIR or /tmp)\n",
		testcase.name, (int)strlen(testcase.name), "", testcase.name, testcase.description);
	pl_write_all(1, text, (size_t)(n > 0 && (size_t)n < sizeof text ? n : (int)strlen(text)));
}

static void wis_parse_options(int argc, char **argv)
{
	int c;
	opterr = 0;
	while ((c = getopt(argc, argv, ":m:n:d:w:i:N:L:BH:D:h")) != -1) {
		switch (c) {
		case 'm':
			wis.mode = (enum wis_mode)pl_parse_choice('m', optarg, wis_mode_names, 2, "process or thread");
			break;
		case 'n':
			wis.ntasks = (unsigned)pl_parse_uint('n', optarg, 1, WIS_MAX_TASKS);
			break;
		case 'd':
			wis.duration = pl_parse_seconds('d', optarg, 0);
			break;
		case 'w':
			wis.warmup = pl_parse_seconds('w', optarg, 1);
			break;
		case 'i':
			wis.interval = pl_parse_seconds('i', optarg, 0);
			if (wis.interval < 0.001)
				pl_usage_error("-i: invalid value '%.100s' (at least 0.001 seconds)", optarg);
			break;
		case 'N':
			wis.ops_target = pl_parse_uint('N', optarg, 1, 1ULL << 50);
			break;
		case 'L':
			wis.least = pl_parse_seconds('L', optarg, 0);
			break;
		case 'B':
			wis.bind = 0;
			break;
		case 'H':
			wis.thp = (enum wis_thp)pl_parse_choice('H', optarg, wis_thp_names, 4,
								"always, never, madvise or system");
			break;
		case 'D':
			wis.dir = optarg;
			break;
		case 'h':
			wis_usage();
			exit(0);
		case ':':
			pl_usage_error("-%c: missing value", optopt);
		default:
			if (optopt >= 0x21 && optopt < 0x7f)
				pl_usage_error("-%c: unknown option (see -h)", optopt);
			pl_usage_error("unknown option (see -h)");
		}
	}
	if (optind < argc)
		pl_usage_error("unexpected argument '%.100s' (see -h)", argv[optind]);
	if (wis.ops_target && wis.warmup <= 0)
		pl_usage_error("-N: needs a warm-up (-w > 0) to fit the measured part to the operations");

	const char *what = "-D";
	if (!wis.dir) {
		const char *tmp = getenv("TMPDIR");
		wis.dir = (tmp && *tmp) ? tmp : "/tmp";
		what = (tmp && *tmp) ? "$TMPDIR" : "/tmp";
	}
	struct stat st;
	if (strlen(wis.dir) > PATH_MAX - 64)
		pl_usage_error("%s: directory name too long", what);
	if (stat(wis.dir, &st) != 0 || !S_ISDIR(st.st_mode) || access(wis.dir, W_OK | X_OK) != 0)
		pl_usage_error("%s: '%.200s' is not a writable directory", what, wis.dir);
}

/* ---- CPUs, THP, ASLR ------------------------------------------------ */

/* bind the calling process or thread (tid 0) to one CPU */
static void wis_bind_self(int cpu)
{
	if (cpu >= 0 && pl_pin(0, cpu) != 0)
		wis_die_errno("binding a task to CPU %d", cpu);
}

/* the system's THP setting: the bracketed word of .../enabled, or "unavailable" */
static const char *wis_thp_system(char *buf, size_t len)
{
	int fd = open("/sys/kernel/mm/transparent_hugepage/enabled", O_RDONLY);
	if (fd < 0)
		return "unavailable";
	ssize_t n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return "unknown";
	buf[n] = '\0';
	char *open_ = strchr(buf, '['), *close_ = open_ ? strchr(open_, ']') : NULL;
	if (!open_ || !close_)
		return "unknown";
	*close_ = '\0';
	return open_ + 1;
}

static void wis_apply_thp(const char *system)
{
	if (wis.thp == WIS_THP_NEVER) {
		if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0)
			wis_die_errno("-H never: prctl(PR_SET_THP_DISABLE)");
	} else if (wis.thp == WIS_THP_ALWAYS) {
		if (strcmp(system, "unavailable") == 0)
			wis_die("-H always: this kernel has no transparent huge pages");
	}
}

/* is address-space randomisation in effect for this process? */
static int wis_aslr(void)
{
	int persona = personality(0xffffffff);
	if (persona != -1 && (persona & ADDR_NO_RANDOMIZE))
		return 0;
	int fd = open("/proc/sys/kernel/randomize_va_space", O_RDONLY);
	if (fd >= 0) {
		char c = '1';
		ssize_t n = read(fd, &c, 1);
		close(fd);
		if (n == 1 && c == '0')
			return 0;
	}
	return 1;
}

/* ---- signals -------------------------------------------------------- */

static const int wis_stop_signals[] = { SIGTERM, SIGINT, SIGHUP };

static void wis_on_stop(int sig)
{
	wis.stop_signal = sig;
}

/* a task thread asked to stop: count itself stopped and wait to be killed
 * with the process (it may hold any lock; nobody takes them any more) */
static void wis_on_park(int sig)
{
	(void)sig;
	__atomic_add_fetch(&wis.control->parked, 1, __ATOMIC_SEQ_CST);
	for (;;)
		pause();
}

static void wis_block_stop_signals(int how)
{
	pl_mask_signals(how, wis_stop_signals, sizeof wis_stop_signals / sizeof *wis_stop_signals);
}

/* ---- tasks ---------------------------------------------------------- */

static void wis_task_body(struct wis_task *t)
{
	wis_self_nr = (int)t->nr;
	wis_self_partner = t->partner;
	if (t->partner)
		testcase.partner(t);
	else
		testcase.task(t);
	wis_die("the testcase returned");
}

static void *wis_thread_main(void *arg)
{
	wis_task_body(arg);
	return NULL;
}

static void wis_start_process(struct wis_task *t)
{
	pid_t pid = fork();
	if (pid < 0)
		wis_die_errno("fork (task %u)", t->nr);
	if (pid > 0) {
		t->pid = pid;
		return;
	}
	wis.in_task_process = 1;
	/* die with the harness, even on its kill -9 */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
		wis_die_errno("prctl(PR_SET_PDEATHSIG)");
	if (getppid() != wis.harness_pid)
		_exit(1);
	for (size_t k = 0; k < sizeof wis_stop_signals / sizeof *wis_stop_signals; k++)
		signal(wis_stop_signals[k], SIG_DFL);
	wis_block_stop_signals(SIG_UNBLOCK);
	close(wis.gate[1]);
	wis_bind_self(t->cpu);
	wis_task_body(t);
}

static void wis_start_thread(struct wis_task *t)
{
	pthread_attr_t attr;
	int rc = pthread_attr_init(&attr);
	if (rc == 0 && t->cpu >= 0)
		rc = pl_thread_attr_cpu(&attr, t->cpu);
	if (rc == 0)
		rc = pthread_create(&t->thread, &attr, wis_thread_main, t);
	if (rc != 0)
		wis_die("starting task thread %u: %s", t->nr, strerror(rc));
	pthread_attr_destroy(&attr);
}

/* stop every task started so far: kill and reap the processes, or park the
 * threads (they die with the process when it exits) */
static void wis_shutdown_tasks(void)
{
	if (wis.mode == WIS_PROCESS) {
		for (unsigned k = 0; k < wis.nspawned; k++)
			if (wis.tasks[k].pid > 0)
				kill(wis.tasks[k].pid, SIGKILL);
		for (unsigned k = 0; k < wis.nspawned; k++)
			if (wis.tasks[k].pid > 0) {
				while (waitpid(wis.tasks[k].pid, NULL, 0) < 0 && errno == EINTR)
					;
				wis.tasks[k].pid = 0;
			}
	} else if (wis.control) {
		unsigned asked = 0;
		for (unsigned k = 0; k < wis.nspawned; k++)
			if (pthread_kill(wis.tasks[k].thread, WIS_PARK_SIGNAL) == 0)
				asked++;
		/* a thread in an uninterruptible sleep parks when it returns to user space */
		for (int waited = 0; waited < 10000; waited++) {
			if (__atomic_load_n(&wis.control->parked, __ATOMIC_SEQ_CST) >= asked)
				break;
			wis_pause_ms(1);
		}
	}
	wis.nspawned = 0;
}

/* process mode: a task that exits before the harness stops it is a failure */
static void wis_check_tasks(void)
{
	if (wis.mode != WIS_PROCESS)
		return;
	int status;
	pid_t pid;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (unsigned k = 0; k < wis.nspawned; k++) {
			struct wis_task *t = &wis.tasks[k];
			if (t->pid != pid)
				continue;
			t->pid = 0;
			if (WIFSIGNALED(status))
				wis_die("task %u%s (pid %d) was killed by signal %d", t->nr,
					t->partner ? "'s partner" : "", (int)pid, WTERMSIG(status));
			wis_die("task %u%s (pid %d) exited with status %d", t->nr,
				t->partner ? "'s partner" : "", (int)pid, WEXITSTATUS(status));
		}
	}
}

/* leave after a stop signal: tasks stopped, files removed, then die of it */
static void wis_exit_on_signal(void)
{
	int sig = wis.stop_signal;
	wis_shutdown_tasks();
	wis_remove_files();
	signal(sig, SIG_DFL);
	wis_block_stop_signals(SIG_UNBLOCK);
	raise(sig);
	_exit(128 + sig);
}

/* ---- -N on a cycling testcase --------------------------------------- */

/* every task has stamped `n` cycle starts */
static int wis_cycles_seen(unsigned long long n)
{
	for (unsigned i = 0; i < wis.ntasks; i++)
		if (__atomic_load_n(&wis.stamps[i].seen, __ATOMIC_ACQUIRE) < n)
			return 0;
	return 1;
}

static void wis_wait_cycles(unsigned long long n)
{
	while (!wis_cycles_seen(n)) {
		if (wis.stop_signal)
			wis_exit_on_signal();
		wis_check_tasks();
		wis_pause_ms(1);
	}
}

static char *wis_out;
static size_t wis_out_cap;
static char *wis_held;                  /* -N: the last warm-up line, until the measured one */
static size_t wis_held_len;

/* The first cycle of every task is the warm-up, its second the measured part, each timed from
 * the task's own stamps, so a sample holds whole cycles (a map, one operation per page, the
 * unmap), whatever the phase of the harness's clock. The harness sleeps through the second
 * cycles (as long as the first, give or take 2%) and wakes once they end, so it does not
 * run inside them. Printed as the warm-up and measured intervals the parser reads: each
 * task's ops, and the elapsed time that makes their sum over it the sum of the tasks' rates. */
static void wis_measure_cycles(struct pl_line *line)
{
	wis_wait_cycles(2);
	int64_t longest = 0, latest = 0;
	for (unsigned i = 0; i < wis.ntasks; i++) {
		struct wis_cycle_stamps *c = &wis.stamps[i];
		if (c->ns[1] - c->ns[0] > longest)
			longest = c->ns[1] - c->ns[0];
		if (c->ns[1] > latest)
			latest = c->ns[1];
	}
	if (wis_sleep_until(latest + longest + longest / 50))
		wis_exit_on_signal();
	wis_wait_cycles(3);
	wis_check_tasks();
	for (int part = 1; part <= 2; part++) {
		double rate = 0;
		unsigned long long sum = 0;
		for (unsigned i = 0; i < wis.ntasks; i++) {
			struct wis_cycle_stamps *c = &wis.stamps[i];
			unsigned long long ops = c->ops[part] - c->ops[part - 1];
			sum += ops;
			if (c->ns[part] > c->ns[part - 1])
				rate += (double)ops * 1e9 / (double)(c->ns[part] - c->ns[part - 1]);
		}
		pl_line_start(line, wis_out, wis_out_cap, "wis.ops", (double)sum, "ops");
		pl_line_str(line, "event", "interval");
		pl_line_bool(line, "warmup", part == 1);
		pl_line_num(line, "elapsed", rate > 0 ? (double)sum / rate : 0.0);
		pl_line_key(line, "ops");
		for (unsigned i = 0; i < wis.ntasks; i++)
			pl_put(line, "%s%llu", i ? ", " : "[", wis.stamps[i].ops[part] - wis.stamps[i].ops[part - 1]);
		pl_put(line, "]");
		pl_line_end(line);
	}
}

/* ---- main ----------------------------------------------------------- */

int main(int argc, char **argv)
{
	pl_progname = testcase.name;
	pl_fail_context = wis_fail_context;
	pl_on_fail = wis_on_fail;
	pl_fail_fast = 1;
	wis.harness_pid = getpid();
	wis.main_thread = pthread_self();
	wis_parse_options(argc, argv);

	/* a known signal state whatever the parent left us */
	sigset_t none;
	sigemptyset(&none);
	pthread_sigmask(SIG_SETMASK, &none, NULL);
	signal(SIGCHLD, SIG_DFL);
	pl_ignore_sigpipe();              /* a closed stdout is reported, not fatal */
	for (size_t k = 0; k < sizeof wis_stop_signals / sizeof *wis_stop_signals; k++)
		pl_on_signal(wis_stop_signals[k], wis_on_stop);
	if (wis.mode == WIS_THREAD)
		pl_on_signal(WIS_PARK_SIGNAL, wis_on_park);

	wis.ncpus = pl_allowed_cpus(&wis.cpus);
	char thp_buf[256];
	const char *thp_system = wis_thp_system(thp_buf, sizeof thp_buf);
	wis_apply_thp(thp_system);

	unsigned nper = testcase.partner ? 2 : 1;
	unsigned ntotal = wis.ntasks * nper;
	/* the output line: room for every counter, allocated before any task runs */
	wis_out_cap = 1024 + (size_t)wis.ntasks * 26 + (size_t)wis.ncpus * 14 + 2 * strlen(thp_system);
	wis_out = malloc(wis_out_cap);
	wis_held = malloc(wis_out_cap);
	wis.tasks = calloc(ntotal, sizeof *wis.tasks);
	unsigned long long *prev = calloc(wis.ntasks, sizeof *prev);
	unsigned long long *delta = calloc(wis.ntasks, sizeof *delta);
	if (!wis_out || !wis_held || !wis.tasks || !prev || !delta)
		wis_die("out of memory for %u tasks", wis.ntasks);

	size_t shared = ((size_t)wis.ntasks + 1) * WIS_SLOT + (size_t)wis.ntasks * sizeof(struct wis_cycle_stamps);
	void *area = mmap(NULL, shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED)
		wis_die_errno("mmap of %zu bytes for the counters", shared);
	memset(area, 0, shared);
	wis.control = area;
	wis.slots = (unsigned char *)area + WIS_SLOT;
	wis.stamps = (struct wis_cycle_stamps *)(wis.slots + (size_t)wis.ntasks * WIS_SLOT);

	for (unsigned k = 0; k < ntotal; k++) {
		struct wis_task *t = &wis.tasks[k];
		t->nr = k % wis.ntasks;
		t->partner = k >= wis.ntasks;
		t->iterations = (unsigned long long *)(wis.slots + (size_t)t->nr * WIS_SLOT);
		/* a partner shares its task's CPU, as a child inherits its parent's binding */
		t->cpu = wis.bind ? wis.cpus[t->nr % (unsigned)wis.ncpus] : -1;
	}

	if (pipe(wis.gate) != 0)
		wis_die_errno("pipe");
	if (testcase.prepare)
		testcase.prepare(wis.ntasks);
	if (wis.stop_signal)
		wis_exit_on_signal();

	/* children and threads start with the stop signals blocked: threads keep
	 * them blocked (the harness thread handles them), processes restore them */
	wis_block_stop_signals(SIG_BLOCK);
	for (unsigned k = 0; k < ntotal; k++) {
		if (wis.mode == WIS_PROCESS)
			wis_start_process(&wis.tasks[k]);
		else
			wis_start_thread(&wis.tasks[k]);
		wis.nspawned = k + 1;
	}
	wis_block_stop_signals(SIG_UNBLOCK);

	while (__atomic_load_n(&wis.control->ready, __ATOMIC_SEQ_CST) < ntotal) {
		if (wis.stop_signal)
			wis_exit_on_signal();
		wis_check_tasks();
		wis_pause_ms(1);
	}

	struct pl_line line;
	pl_line_start(&line, wis_out, wis_out_cap, "wis.tasks", wis.ntasks, "tasks");
	pl_line_str(&line, "event", "start");
	pl_line_str(&line, "testcase", testcase.name);
	pl_line_str(&line, "mode", wis.mode == WIS_PROCESS ? "process" : "thread");
	pl_line_int(&line, "tasks", wis.ntasks);
	pl_line_bool(&line, "bind", wis.bind);
	pl_line_key(&line, "cpus");
	if (wis.bind) {
		for (unsigned k = 0; k < wis.ntasks; k++)
			pl_put(&line, "%s%d", k ? ", " : "[", wis.tasks[k].cpu);
		pl_put(&line, "]");
	} else {
		pl_put(&line, "null");
	}
	pl_line_str(&line, "thp", wis_thp_names[wis.thp]);
	pl_line_bool(&line, "aslr", wis_aslr());
	pl_line_key(&line, "allowed_cpus");
	for (int k = 0; k < wis.ncpus; k++)
		pl_put(&line, "%s%d", k ? ", " : "[", wis.cpus[k]);
	pl_put(&line, "]");
	pl_line_str(&line, "thp_system", thp_system);
	pl_line_int(&line, "partners", ntotal - wis.ntasks);
	pl_line_num(&line, "duration_s", wis.duration);
	pl_line_num(&line, "warmup_s", wis.warmup);
	pl_line_num(&line, "interval_s", wis.interval);
	if (wis.ops_target) {
		pl_line_int(&line, "ops_target", (long long)wis.ops_target);
		pl_line_num(&line, "least_s", wis.least);
	}
	pl_line_end(&line);

	/* interval boundaries are fixed offsets from the start, so they do not drift */
	int64_t warm_ns = (int64_t)(wis.warmup * 1e9 + 0.5);
	int64_t dur_ns = (int64_t)(wis.duration * 1e9 + 0.5);
	int64_t step_ns = (int64_t)(wis.interval * 1e9 + 0.5);
	if (dur_ns < 1)
		dur_ns = 1;
	long nwarm = (long)((warm_ns + step_ns - 1) / step_ns);
	long nmeas = (long)((dur_ns + step_ns - 1) / step_ns);
	/* A window sized in work (-N: instruction-time under icount) ends where this thread wakes.
	   With the default 50 us of timer slack the kernel wakes it at any other timer that expires
	   in those 50 us, whose phase follows the host (when I/O came back), so the measured part
	   could move by up to 5e-4 of 100 ms between repetitions; with 1 ns it wakes at its deadline.
	   Set after the tasks started: they keep the default (docs/vm.md, "insn-profile"). */
	if (wis.ops_target)
		prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
	int64_t t0 = pl_now_ns(), last = t0;
	unsigned long long warm_ops = 0;
	close(wis.gate[1]);
	wis.gate[1] = -1;
	int by_cycles = wis.ops_target && testcase.cycles;
	if (by_cycles) {
		wis_measure_cycles(&line);
		nwarm = nmeas = 1;
	}
	for (long k = 1; !by_cycles && k <= nwarm + nmeas; k++) {
		int warm = k <= nwarm;
		int64_t offset = warm ? (k * step_ns < warm_ns ? k * step_ns : warm_ns)
				      : warm_ns + ((k - nwarm) * step_ns < dur_ns ? (k - nwarm) * step_ns : dur_ns);
		if (wis_sleep_until(t0 + offset))
			wis_exit_on_signal();
		if (wis.ops_target && !warm)
			pl_mark_measured_end();
		int64_t now = pl_now_ns();
		unsigned long long sum = 0;
		for (unsigned n = 0; n < wis.ntasks; n++) {
			unsigned long long v = __atomic_load_n(
				(unsigned long long *)(wis.slots + (size_t)n * WIS_SLOT), __ATOMIC_RELAXED);
			delta[n] = v - prev[n];
			sum += delta[n];
			prev[n] = v;
		}
		pl_line_start(&line, wis_out, wis_out_cap, "wis.ops", (double)sum, "ops");
		pl_line_str(&line, "event", "interval");
		pl_line_bool(&line, "warmup", warm);
		if (wis.ops_target)     /* the nanosecond: an instruction, where the clock counts them */
			pl_line_num(&line, "elapsed", (double)(now - last) / 1e9);
		else                    /* whole microseconds, the resolution the interval was always reported in */
			pl_line_num(&line, "elapsed", (double)((now - last + 500) / 1000) / 1e6);
		pl_line_key(&line, "ops");
		for (unsigned n = 0; n < wis.ntasks; n++)
			pl_put(&line, "%s%llu", n ? ", " : "[", delta[n]);
		pl_put(&line, "]");
		last = now;
		wis_check_tasks();
		if (wis.ops_target && k == nwarm) {
			/* written after the measured interval: writing it now would run inside it */
			pl_put(&line, "}\n");
			memcpy(wis_held, line.buf, line.len);
			wis_held_len = line.len;
		} else {
			if (wis_held_len && pl_write_all(1, wis_held, wis_held_len) != 0)
				pl_die_errno("writing to stdout");
			wis_held_len = 0;
			pl_line_end(&line);
		}
		if (warm)
			warm_ops += sum;
		if (wis.ops_target && k == nwarm) {
			/* the warm-up's rate fits one measured interval to ops_target operations, within
			   [-L, -d]; no operation in the warm-up: -d as it is */
			double fit = warm_ops ? (double)wis.ops_target * (double)(last - t0) / (double)warm_ops : (double)dur_ns;
			double least = wis.least * 1e9;
			if (fit < least)
				fit = least;
			dur_ns = fit > (double)dur_ns ? dur_ns : (int64_t)(fit + 0.5);
			step_ns = dur_ns;
			nmeas = 1;
			/* the measured interval starts once this wake-up's own work is done: on a
			   shared CPU (a one-vCPU guest) the harness's instructions would be the task's
			   loss, and in a short window that is 0.1% (getppid1, 50 ms) */
			for (unsigned n = 0; n < wis.ntasks; n++)
				prev[n] = __atomic_load_n((unsigned long long *)(wis.slots + (size_t)n * WIS_SLOT),
							  __ATOMIC_RELAXED);
			last = pl_now_ns();
			pl_mark_measured_start();
		}
	}

	wis_shutdown_tasks();
	wis_remove_files();
	pl_line_start(&line, wis_out, wis_out_cap, "wis.intervals", (double)(nwarm + nmeas), "intervals");
	pl_line_str(&line, "event", "end");
	pl_line_end(&line);
	_exit(0);
}

#endif /* PERFLAB_WIS_H */

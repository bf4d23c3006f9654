/*
 * launch: start one benchmark process and measure it alone.
 *
 * perflab's runner starts every benchmark process through this small program
 * instead of spawning it from Python: a child spawned from the Python process
 * inherits Python's RSS high-water mark (the kernel keeps it across exec), so
 * its max RSS would be the harness's, not the benchmark's.  Forked from this
 * launcher, the benchmark starts from the launcher's few hundred KiB.  The
 * launcher also takes the wall time itself (no Python start-up jitter in it),
 * owns the timeout and the clean-up of the whole process group, and turns
 * address-space randomisation off or pins the CPUs when asked.
 *
 * usage: launch [-R] [-T SECONDS] [-G SECONDS] [-c CPULIST] [-C DIR] -- PROGRAM [ARG...]
 *   -R  no ASLR for the benchmark (personality ADDR_NO_RANDOMIZE)
 *   -T  timeout: SIGTERM to the process group, SIGKILL after the grace time
 *   -G  grace time between SIGTERM and SIGKILL (default 2 s)
 *   -c  CPU list (0,2-3) the benchmark is bound to
 *   -C  directory the benchmark starts in
 *
 * Results go to file descriptor 3 as "key=value" words on lines:
 *   "pid=N" once the benchmark runs, then one final line with
 *   exit= signal= wall= utime= stime= maxrss= nvcsw= nivcsw= timedout= interrupted=
 *   or "execerror=ERRNO" when the program could not be started.
 * SIGINT, SIGTERM and SIGHUP to the launcher (or the death of its parent)
 * stop the benchmark the same way as a timeout and report interrupted=1.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "perflab.h"   /* the C runtime (core/c): time, option values, CPUs */

#define RESULT_FD 3

static void usage(const char *why)
{
	fprintf(stderr, "launch: %s\nusage: launch [-R] [-T SECONDS] [-G SECONDS] [-c CPULIST] [-C DIR] -- PROGRAM [ARG...]\n", why);
	exit(2);
}

static void result(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void result(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (n > 0 && write(RESULT_FD, line, (size_t)n) < 0) {
		/* nobody to tell: the runner is gone */
	}
}

/* Kill every process left that this launcher is the parent of: as a child
 * subreaper it inherits the benchmark's orphans, even those that left the
 * process group (setsid daemons). */
static void kill_children(void)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/self/task/%d/children", getpid());
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	long pid;
	while (fscanf(f, "%ld", &pid) == 1)
		kill((pid_t)pid, SIGKILL);
	fclose(f);
}

int main(int argc, char **argv)
{
	int no_aslr = 0, have_cpus = 0, opt;
	double timeout = 0, grace = 2;
	cpu_set_t cpus;
	const char *dir = NULL;

	pl_progname = "launch";
	if (fcntl(RESULT_FD, F_GETFD) < 0)
		usage("file descriptor 3 (the result channel) is not open");
	while ((opt = getopt(argc, argv, "+RT:G:c:C:")) != -1) {
		switch (opt) {
		case 'R': no_aslr = 1; break;
		case 'T': timeout = pl_parse_real('T', optarg, 0, 0, 1e9, "a positive number of seconds"); break;
		case 'G': grace = pl_parse_real('G', optarg, 0, 0, 1e9, "a positive number of seconds"); break;
		case 'c': pl_parse_cpu_list('c', optarg, &cpus); have_cpus = 1; break;
		case 'C': dir = optarg; break;
		default: usage("unknown option");
		}
	}
	if (optind >= argc)
		usage("no program given");

	/* Signals are taken synchronously (sigtimedwait): block them first. */
	sigset_t wanted;
	sigemptyset(&wanted);
	sigaddset(&wanted, SIGCHLD);
	sigaddset(&wanted, SIGINT);
	sigaddset(&wanted, SIGTERM);
	sigaddset(&wanted, SIGHUP);
	sigprocmask(SIG_BLOCK, &wanted, NULL);
	/* The runner killed (kill -9): stop the benchmark as for Ctrl-C. */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() == 1)
		return 1;
	prctl(PR_SET_CHILD_SUBREAPER, 1);

	/* The benchmark is started with vfork: the child shares this process's
	 * memory until it execs, so no page tables are copied and no page is
	 * copied on write in the timed interval.  A fork did both, and that was
	 * most of what perflab measured for `true` beyond hyperfine -N (whose
	 * spawn is a vfork too).  This process is suspended until the exec, so the child
	 * reports a failure to start in exec_errno, not through a pipe whose
	 * wake-up would land in the benchmark's first microseconds.  The child
	 * only makes system calls on its own task (process group, death signal,
	 * signal mask, personality, directory, CPUs) before it execs or _exits. */
	static volatile int exec_errno;
	fcntl(RESULT_FD, F_SETFD, FD_CLOEXEC);  /* the benchmark does not inherit the result channel */
	double start = pl_now();
	pid_t child = vfork();
	if (child < 0) {
		perror("launch: vfork");
		return 1;
	}
	if (child == 0) {
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		/* A known signal state whatever perflab's caller left (a thread's mask, an ignored
		 * SIGINT): nothing blocked, and the default action for the signals perflab stops a
		 * benchmark or a helper with. The dispositions are this task's own copy (vfork
		 * shares the memory, not the signal handlers). */
		struct sigaction dfl = { .sa_handler = SIG_DFL };
		sigaction(SIGINT, &dfl, NULL);
		sigaction(SIGTERM, &dfl, NULL);
		sigaction(SIGHUP, &dfl, NULL);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (no_aslr)
			personality(personality(0xffffffff) | ADDR_NO_RANDOMIZE);
		if ((dir && chdir(dir) != 0) || (have_cpus && pl_pin_set(0, &cpus) != 0)) {
			exec_errno = errno;
			_exit(127);
		}
		execv(argv[optind], argv + optind);
		exec_errno = errno;
		_exit(127);
	}
	setpgid(child, child); /* also here: no race with a signal to the group */
	if (exec_errno) {
		waitpid(child, NULL, 0);
		result("execerror=%d\n", exec_errno);
		return 0;
	}
	result("pid=%d\n", (int)child);

	int status = 0, timed_out = 0, interrupted = 0, stopping = 0;
	double kill_at = 0, deadline = timeout > 0 ? start + timeout : 0;
	struct rusage ru;
	double wall;
	for (;;) {
		pid_t got = wait4(child, &status, WNOHANG, &ru);
		if (got == child) {
			wall = pl_now() - start;
			break;
		}
		double t = pl_now(), wake = 1.0;
		if (stopping && t >= kill_at) {
			killpg(child, SIGKILL);
			stopping = 2;
			kill_at = t + 3600;
		} else if (!stopping && deadline && t >= deadline) {
			timed_out = 1;
			killpg(child, SIGTERM);
			stopping = 1;
			kill_at = t + grace;
		}
		if (stopping == 1)
			wake = kill_at - t;
		else if (!stopping && deadline)
			wake = deadline - t;
		if (wake > 1.0)
			wake = 1.0;
		if (wake < 0.0005)
			wake = 0.0005;
		struct timespec ts = {(time_t)wake, (long)((wake - (time_t)wake) * 1e9)};
		siginfo_t info;
		int sig = sigtimedwait(&wanted, &info, &ts);
		if ((sig == SIGINT || sig == SIGTERM || sig == SIGHUP) && !stopping) {
			interrupted = 1;
			killpg(child, SIGTERM);
			stopping = 1;
			kill_at = pl_now() + grace;
		}
	}
	/* What the benchmark left behind in its group, or orphaned to us. */
	killpg(child, SIGKILL);
	for (;;) {
		kill_children();
		if (waitpid(-1, NULL, 0) < 0 && errno == ECHILD)
			break;
	}
	int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	result("exit=%d signal=%d wall=%.9f utime=%.6f stime=%.6f maxrss=%ld nvcsw=%ld nivcsw=%ld timedout=%d interrupted=%d\n",
	       code, WIFSIGNALED(status) ? WTERMSIG(status) : 0, wall,
	       ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6, ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6,
	       ru.ru_maxrss, ru.ru_nvcsw, ru.ru_nivcsw, timed_out, interrupted);
	return 0;
}

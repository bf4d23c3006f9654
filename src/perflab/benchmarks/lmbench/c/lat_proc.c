/*
 * lat_proc - process creation, in microseconds.
 *
 *   proc.fork   fork(); the child calls exit(), as a C program ends; the
 *               parent waits for it (LMbench: lat_proc fork, "fork+exit")
 *   proc.exec   fork(); the child execve()s a tiny program - this program
 *               itself with --hello, which returns from main at once; the
 *               parent waits (lat_proc exec, "fork+execve" of hello)
 *   proc.sh     fork(); the child runs /bin/sh -c "<this program> --hello";
 *               the parent waits (lat_proc shell, "fork+/bin/sh -c")
 */
#include "bench.h"

extern char **environ;

static char self[4096];
static char shell_cmd[8192];

static void wait_child(pid_t pid, const char *what)
{
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			die_errno("waitpid (%s)", what);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		if (WIFSIGNALED(status))
			die("%s: child killed by signal %d", what, WTERMSIG(status));
		die("%s: child exited with status %d", what, WEXITSTATUS(status));
	}
}

static void do_fork(uint64_t n, void *ctx)
{
	(void)ctx;
	for (uint64_t i = 0; i < n; i++) {
		pid_t pid = fork();
		if (pid < 0)
			die_errno("fork");
		if (pid == 0)
			exit(0); /* not _exit: the C library's exit path, as LMbench's child takes */
		wait_child(pid, "fork");
	}
}

static void do_exec(uint64_t n, void *ctx)
{
	(void)ctx;
	char *args[] = { self, "--hello", NULL };
	for (uint64_t i = 0; i < n; i++) {
		pid_t pid = fork();
		if (pid < 0)
			die_errno("fork");
		if (pid == 0) {
			execve(self, args, environ);
			fprintf(stderr, "lat_proc: execve %s: %s\n", self, strerror(errno));
			_exit(127);
		}
		wait_child(pid, "fork+execve");
	}
}

static void do_sh(uint64_t n, void *ctx)
{
	(void)ctx;
	char *args[] = { "sh", "-c", shell_cmd, NULL };
	for (uint64_t i = 0; i < n; i++) {
		pid_t pid = fork();
		if (pid < 0)
			die_errno("fork");
		if (pid == 0) {
			execve("/bin/sh", args, environ);
			fprintf(stderr, "lat_proc: execve /bin/sh: %s\n", strerror(errno));
			_exit(127);
		}
		wait_child(pid, "fork+/bin/sh -c");
	}
}

int main(int argc, char **argv)
{
	/* the exec'd helper: do nothing, as fast as a C program can */
	if (argc == 2 && strcmp(argv[1], "--hello") == 0)
		return 0;

	bench_init(argc, argv, "lat_proc", "", NULL, "");

	ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
	if (len < 0) {
		if (!realpath(argv[0], self))
			die_errno("cannot find my own executable (%s)", argv[0]);
	} else {
		self[len] = 0;
	}
	/* single-quote the path for the shell */
	char *q = shell_cmd;
	*q++ = '\'';
	for (const char *p = self; *p; p++) {
		if ((size_t)(q - shell_cmd) > sizeof shell_cmd - 16)
			die("path too long: %s", self);
		if (*p == '\'') {
			memcpy(q, "'\\''", 4);
			q += 4;
		} else {
			*q++ = *p;
		}
	}
	strcpy(q, "' --hello");

	bench_latency("proc.fork", do_fork, NULL, 0, 1e-3, "us");
	bench_latency("proc.exec", do_exec, NULL, 0, 1e-3, "us");
	bench_latency("proc.sh", do_sh, NULL, 0, 1e-3, "us");
	return 0;
}

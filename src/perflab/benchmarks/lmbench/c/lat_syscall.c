/*
 * lat_syscall - cost of the simplest system calls, in microseconds.
 *
 *   syscall.null        getppid()                     (LMbench: lat_syscall null)
 *   syscall.null_io     mean of a 1-byte read() from /dev/zero and a 1-byte
 *                       write() to /dev/null           (lat_syscall read / write)
 *   syscall.stat        stat() of a file in the temporary directory
 *   syscall.fstat       fstat() of that file, open
 *   syscall.open_close  open(O_RDONLY) + close() of that file
 *
 * The cost of an empty timing-loop iteration is subtracted from each.
 */
#include "bench.h"

static char path[4096];

static void do_null(uint64_t n, void *ctx)
{
	(void)ctx;
	for (uint64_t i = 0; i < n; i++)
		getppid();
}

static void do_read(uint64_t n, void *ctx)
{
	int fd = *(int *)ctx;
	char c;
	for (uint64_t i = 0; i < n; i++)
		if (read(fd, &c, 1) != 1)
			die_errno("read /dev/zero");
}

static void do_write(uint64_t n, void *ctx)
{
	int fd = *(int *)ctx;
	char c = 0;
	for (uint64_t i = 0; i < n; i++)
		if (write(fd, &c, 1) != 1)
			die_errno("write /dev/null");
}

static void do_stat(uint64_t n, void *ctx)
{
	struct stat st;
	(void)ctx;
	for (uint64_t i = 0; i < n; i++)
		if (stat(path, &st) != 0)
			die_errno("stat %s", path);
}

static void do_fstat(uint64_t n, void *ctx)
{
	int fd = *(int *)ctx;
	struct stat st;
	for (uint64_t i = 0; i < n; i++)
		if (fstat(fd, &st) != 0)
			die_errno("fstat %s", path);
}

static void do_open_close(uint64_t n, void *ctx)
{
	(void)ctx;
	for (uint64_t i = 0; i < n; i++) {
		int fd = open(path, O_RDONLY);
		if (fd < 0)
			die_errno("open %s", path);
		close(fd);
	}
}

static void cleanup(void)
{
	if (path[0])
		unlink(path);
}

int main(int argc, char **argv)
{
	bench_init(argc, argv, "lat_syscall", "", NULL, "");

	bench_latency("syscall.null", do_null, NULL, loop_ns(), 1e-3, "us");

	if (want("syscall.null_io")) {
		int zero = open("/dev/zero", O_RDONLY), null = open("/dev/null", O_WRONLY);
		double r[BENCH_MAX_SAMPLES], w[BENCH_MAX_SAMPLES];
		if (zero < 0)
			die_errno("open /dev/zero");
		if (null < 0)
			die_errno("open /dev/null");
		bench_samples(do_read, &zero, r);
		bench_samples(do_write, &null, w);
		for (int i = 0; i < opt.samples; i++)
			emit("syscall.null_io", ((r[i] - loop_ns()) + (w[i] - loop_ns())) / 2 * 1e-3, "us");
		close(zero);
		close(null);
	}

	tmp_path(path, sizeof path, "stat");
	atexit(cleanup);
	int fd = make_file(path, 0);
	bench_latency("syscall.stat", do_stat, NULL, loop_ns(), 1e-3, "us");
	bench_latency("syscall.fstat", do_fstat, &fd, loop_ns(), 1e-3, "us");
	bench_latency("syscall.open_close", do_open_close, NULL, loop_ns(), 1e-3, "us");
	close(fd);
	return 0;
}

/*
 * lat_fs - file create and delete, in microseconds per file (LMbench: lat_fs).
 *
 *   fs.create_<K>k  creat() a new file, write() K KB into it, close() it; per
 *                   file, over a batch of files
 *   fs.delete_<K>k  unlink() those files, in the order they were made; per file
 *
 * K = 0, 1, 4, 10.  A batch is 1,000 files: a fresh directory under the
 * temporary directory (-d) with subdirectories of 100 files each (made and
 * removed outside the timing; LMbench spreads its files over subdirectories
 * too), the files created, then deleted, then the directories removed.  A
 * sample is as many batches as it takes for the creating to last the target
 * (at least one), so the figure does not depend on the sample length: the
 * cost per file grows with the number of files alive at once.  LMbench
 * reports files per second; 10^6 divided by its figure is ours.  The file
 * system is whatever -d is on.
 */
#include "bench.h"

static int sizes[8] = { 0, 1, 4, 10 };
static int nsizes = 4;
static char dir[4096];
static char **names;
static int made_dir;

static void cleanup(void)
{
	if (made_dir)
		rmdir(dir);
}

#define PER_DIR 100   /* files per subdirectory */
#define BATCH 1000    /* files per batch */

static void make_names(int n)
{
	static int have;
	if (n <= have)
		return;
	names = realloc(names, sizeof(char *) * (size_t)n);
	if (!names)
		die("out of memory");
	for (int i = have; i < n; i++) {
		size_t len = strlen(dir) + 32;
		names[i] = malloc(len);
		if (!names[i])
			die("out of memory");
		snprintf(names[i], len, "%s/%d/%d", dir, i / PER_DIR, i % PER_DIR);
	}
	have = n;
}

static void subdirs(int n, int make)
{
	char path[4200];
	for (int d = 0; d * PER_DIR < n; d++) {
		snprintf(path, sizeof path, "%s/%d", dir, d);
		if (make ? mkdir(path, 0700) : rmdir(path))
			die_errno("%s %s", make ? "mkdir" : "rmdir", path);
	}
}

/* create n files of `bytes`, then delete them: the two times in ns */
static void batch(int n, const char *buf, size_t bytes, double *t_create, double *t_delete)
{
	if (mkdir(dir, 0700) != 0)
		die_errno("mkdir %s", dir);
	made_dir = 1;
	make_names(n);
	subdirs(n, 1);
	int64_t t0 = pl_now_ns();
	for (int i = 0; i < n; i++) {
		int fd = creat(names[i], 0600);
		if (fd < 0)
			die_errno("creat %s", names[i]);
		if (bytes) {
			ssize_t w = write(fd, buf, bytes);
			if (w != (ssize_t)bytes)
				die_errno("write %s", names[i]);
		}
		if (close(fd) != 0)
			die_errno("close %s", names[i]);
	}
	int64_t t1 = pl_now_ns();
	for (int i = 0; i < n; i++)
		if (unlink(names[i]) != 0)
			die_errno("unlink %s", names[i]);
	int64_t t2 = pl_now_ns();
	subdirs(n, 0);
	if (rmdir(dir) != 0)
		die_errno("rmdir %s", dir);
	made_dir = 0;
	*t_create = (double)(t1 - t0);
	*t_delete = (double)(t2 - t1);
}

static int handle(int c, const char *arg)
{
	if (c != 's')
		return 0;
	nsizes = pl_parse_list((char)c, arg, sizes, 8);
	return 1;
}

int main(int argc, char **argv)
{
	char create[64], delete[64];
	double tc, td;

	bench_init(argc, argv, "lat_fs", "s:", handle, "[-s SIZES_KB]");
	tmp_path(dir, sizeof dir, "dir");
	atexit(cleanup);
	int batch_files = opt.tiny ? 20 : BATCH;

	for (int si = 0; si < nsizes; si++) {
		int k = sizes[si];
		snprintf(create, sizeof create, "fs.create_%dk", k);
		snprintf(delete, sizeof delete, "fs.delete_%dk", k);
		if (!want(create) && !want(delete))
			continue;
		size_t bytes = (size_t)k * 1024;
		char *buf = xmalloc(bytes + 1);
		memset(buf, 'a', bytes + 1);

		/* a small warm-up batch, then each sample: batches until creating
		 * has lasted the target (at least one batch) */
		batch(batch_files / 5, buf, bytes, &tc, &td);
		for (int i = 0; i < opt.samples; i++) {
			double sum_c = 0, sum_d = 0;
			long files = 0;
			do {
				batch(batch_files, buf, bytes, &tc, &td);
				sum_c += tc;
				sum_d += td;
				files += batch_files;
			} while (sum_c < target_ns());
			if (want(create))
				emit(create, sum_c / (double)files * 1e-3, "us");
			if (want(delete))
				emit(delete, sum_d / (double)files * 1e-3, "us");
		}
		free(buf);
	}
	return 0;
}

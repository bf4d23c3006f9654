/*
 * lat_fs - file create and delete, in microseconds per file (LMbench: lat_fs).
 *
 *   fs.create_<K>k  creat() a new file, write() K KB into it, close() it; per
 *                   file, over a batch of files
 *   fs.delete_<K>k  unlink() those files, in the order they were made; per file
 *
 * K = 0, 1, 4, 10.  A batch is 1,000 files in a fresh directory tree: a
 * directory of its own, with subdirectories of 100 files each (made and
 * removed outside the timing; LMbench spreads its files over subdirectories
 * too), the files created, then deleted, then the subdirectories removed.
 * A sample is as many batches as it takes for the creating to last the
 * target (at least one), so the figure does not depend on the sample length:
 * the cost per file grows with the number of files alive at once.  LMbench
 * reports files per second; 10^6 divided by its figure is ours.  The file
 * system is whatever -d is on.
 *
 * Where the batches go.  An ext4 without a journal does not reuse an inode
 * freed in the last 60 s (360 s while its inode table block is dirty), and
 * every inode it allocates scans past each such inode of the block group
 * that lies before the first free one (fs/ext4/ialloc.c: find_inode_bit,
 * recently_deleted).  With every batch in one group, creating a file timed
 * what the benchmark itself, and any run of the minutes before, had deleted
 * there: 11 us a file in a group without recent deletions, 256 us after
 * 2,000 of them, 724 us in the state back-to-back runs left.  So:
 *   - the process makes one directory under -d and marks it FS_TOPDIR_FL
 *     (chattr +T; ext2/3/4 honour it, other file systems refuse and nothing
 *     else changes), so that ext4 places each batch's directory as it
 *     places a top-level one (Orlov: the group with the fewest directories,
 *     searched from a point set by the name's hash), and its files with it;
 *   - each batch's directory has a name of its own and stays, empty, until
 *     the process ends, so the next batch lands in another group;
 *   - with that placement a tree is given up for another (at most TRIES)
 *     when its PROBE files, made before the batch's files, cost more than
 *     twice the cheapest probe so far in CPU time (recent deletions before
 *     where the files will go), or when the batch's files did not get
 *     consecutive inode numbers (recent deletions, or others' files, among
 *     them).
 * The figure is then the cost of creating files in a group where nothing was
 * deleted in the last minute or two, as on an ext4 with a journal, whatever
 * ran before.  With PERFLAB_LMBENCH_FS_DIRS set each tree, its probe, its
 * inode numbers and its cost are printed on stderr.
 */
#include "bench.h"

#include <sys/ioctl.h>
#ifdef __linux__
#include <linux/fs.h>
#endif

#define PER_DIR 100   /* files per subdirectory */
#define BATCH 1000    /* files per batch */
#define TRIES 8       /* trees made at most for a batch that counts */
#define PROBE 10      /* probe files a tree */
#define BASELINE 3    /* trees probed at the start: the cheapest is the first reference */

static int sizes[8] = { 0, 1, 4, 10 };
static int nsizes = 4;
static char base[4096];  /* this process's directory: every batch's directory is made in it */
static char dir[4200];   /* the batch's directory */
static char **names;
static char **kept;      /* every batch's directory, empty, removed at exit */
static int nkept, made_base, top, show_dirs;
static unsigned nonce;
static double cheapest;  /* CPU ns of the cheapest probe file so far (0: none yet) */

static void cleanup(void)
{
	while (nkept > 0)
		rmdir(kept[--nkept]);
	if (made_base)
		rmdir(base);
}

/* Ask for ext4's top-level placement of base's subdirectories; 1 if granted. */
static int mark_top(const char *path)
{
#if defined(__linux__) && defined(FS_TOPDIR_FL)
	int fd = open(path, O_RDONLY | O_DIRECTORY);
	int flags, ok = 0;
	if (fd < 0)
		die_errno("open %s", path);
	if (ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0) {
		flags |= FS_TOPDIR_FL;
		ok = ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0 &&
		     ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0 && (flags & FS_TOPDIR_FL);
	}
	close(fd);
	return ok;
#else
	(void)path;
	return 0;
#endif
}

static int64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A fresh directory in base (it stays until the process ends); the names differ between
 * batches and processes, as ext4 starts its search for a group at the name's hash. */
static void new_dir(void)
{
	static int made;
	snprintf(dir, sizeof dir, "%s/%d.%x", base, made++, nonce);
	if (mkdir(dir, 0700) != 0)
		die_errno("mkdir %s", dir);
	char **grown = realloc(kept, sizeof(char *) * (size_t)(nkept + 1));
	if (!grown)
		die("out of memory");
	kept = grown;
	if (!(kept[nkept] = strdup(dir)))
		die("out of memory");
	nkept++;
}

static void subdirs(int n, int make)
{
	char path[sizeof dir + 16];
	for (int d = 0; d * PER_DIR < n; d++) {
		snprintf(path, sizeof path, "%s/%d", dir, d);
		if (make ? mkdir(path, 0700) : rmdir(path))
			die_errno("%s %s", make ? "mkdir" : "rmdir", path);
	}
}

/* the batch's file names, in its directory `dir` */
static void make_names(int n)
{
	static int have;
	if (n > have) {
		names = realloc(names, sizeof(char *) * (size_t)n);
		if (!names)
			die("out of memory");
		for (int i = have; i < n; i++)
			if (!(names[i] = malloc(sizeof dir + 32)))
				die("out of memory");
		have = n;
	}
	for (int i = 0; i < n; i++)
		snprintf(names[i], sizeof dir + 32, "%s/%d/%d", dir, i / PER_DIR, i % PER_DIR);
}

static unsigned long long inode_of(const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0)
		die_errno("stat %s", path);
	return (unsigned long long)st.st_ino;
}

/* PROBE empty files in the tree's directory "p", made before the batch's files and
 * removed after them: the CPU ns one took.  Creating a file scans past every inode of
 * its block group deleted in the last minute that lies before the first free one;
 * with the probes alive, the batch's files come after them and scan the same. */
static double probe(int make)
{
	char path[sizeof dir + 16];
	int64_t c0 = cpu_ns();
	snprintf(path, sizeof path, "%s/p", dir);
	if (make ? mkdir(path, 0700) : 0)
		die_errno("mkdir %s", path);
	for (int i = 0; i < PROBE; i++) {
		snprintf(path, sizeof path, "%s/p/%d", dir, i);
		int fd = make ? creat(path, 0600) : unlink(path);
		if (fd < 0)
			die_errno("%s %s", make ? "creat" : "unlink", path);
		if (make)
			close(fd);
	}
	snprintf(path, sizeof path, "%s/p", dir);
	if (!make && rmdir(path) != 0)
		die_errno("rmdir %s", path);
	return (double)(cpu_ns() - c0) / PROBE;
}

/* A fresh tree for n files, its probe's cost set against the cheapest so far. */
static double new_tree(int n)
{
	new_dir();
	subdirs(n, 1);
	double cost = probe(1);
	if (cheapest == 0 || cost < cheapest)
		cheapest = cost;
	return cost;
}

static void drop_tree(int n)
{
	probe(0);
	subdirs(n, 0);
}

/* Create n files of `bytes` in a fresh directory tree, then delete them: the two times
 * in ns.  With top-level placement a tree counts only if it is in a block group
 * without recent deletions before or among its files: its probe cost at most twice
 * the cheapest so far, and its files got consecutive inode numbers (ext4 skipped
 * none in use or deleted in the last minute).  Returns 0 if it did not (the caller
 * makes another); `last`: count it whatever. */
static int batch(int n, const char *buf, size_t bytes, double *t_create, double *t_delete, int last)
{
	double cost = new_tree(n);
	if (top && !last && cost > 2 * cheapest) {
		if (show_dirs)
			fprintf(stderr, "lat_fs: tree %s: probe %.1f us a file, cheapest %.1f: another\n", dir,
				cost * 1e-3, cheapest * 1e-3);
		drop_tree(n);
		return 0;
	}
	make_names(n);
	int64_t c0 = show_dirs ? cpu_ns() : 0;
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
	int64_t c1 = show_dirs ? cpu_ns() : 0;
	unsigned long long first = inode_of(names[0]), final = inode_of(names[n - 1]);
	int counts = !top || last || final - first == (unsigned long long)n - 1;
	if (show_dirs)
		fprintf(stderr, "lat_fs: batch of %d in %s, probe %.1f us a file (cheapest %.1f), inodes %llu..%llu%s: "
			"creating %.1f us a file, %.1f us of CPU\n", n, dir, cost * 1e-3, cheapest * 1e-3, first, final,
			final - first == (unsigned long long)n - 1 ? "" : " (not consecutive)",
			(t1 - t0) * 1e-3 / n, (c1 - c0) * 1e-3 / n);
	for (int i = 0; i < n; i++)
		if (unlink(names[i]) != 0)
			die_errno("unlink %s", names[i]);
	int64_t t2 = pl_now_ns();
	drop_tree(n);
	*t_create = (double)(t1 - t0);
	*t_delete = (double)(t2 - t1);
	return counts;
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
	tmp_path(base, sizeof base, "dir");
	if (mkdir(base, 0700) != 0)
		die_errno("mkdir %s", base);
	made_base = 1;
	atexit(cleanup);
	nonce = (unsigned)getpid() * 2654435761u ^ (unsigned)pl_now_ns();
	show_dirs = getenv("PERFLAB_LMBENCH_FS_DIRS") != NULL;
	top = mark_top(base);
	if (show_dirs)
		fprintf(stderr, "lat_fs: top-level placement %s in %s\n", top ? "on" : "off", base);
	int batch_files = opt.tiny ? 20 : BATCH;
	for (int i = 0; top && i < BASELINE; i++) {
		new_tree(0);
		drop_tree(0);
	}

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
		for (int tries = 1; !batch(batch_files / 5, buf, bytes, &tc, &td, tries == TRIES); tries++)
			;
		for (int i = 0; i < opt.samples; i++) {
			double sum_c = 0, sum_d = 0;
			long files = 0;
			do {
				for (int tries = 1; !batch(batch_files, buf, bytes, &tc, &td, tries == TRIES); tries++)
					;
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

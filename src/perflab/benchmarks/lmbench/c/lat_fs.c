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
 *     when its directory's inode lies in or just above (SLACK) the inodes of
 *     a tree that lat_fs (this process, or another on the same file system:
 *     the ledger below) deleted less than RECENT seconds ago, or when the
 *     batch's files did not get consecutive inode numbers (recent deletions,
 *     or others' files, among them).
 * The figure is then the cost of creating files in a group where lat_fs
 * deleted nothing in the last minutes, whatever ran before.  The choice reads
 * inode numbers and the ledger, never a time: a rule that gave a tree up when
 * creating files there cost more (an earlier version timed ten probe files
 * against the cheapest probe) keeps the cheap outcomes, so a kernel whose file
 * creation got dearer in some block groups, or after deletions (a slower
 * recently_deleted() check, a longer recentcy), would read as before, its
 * cost in the trees given up.  The ledger: one file per process in
 * $XDG_CACHE_HOME/perflab/lat_fs/ (default ~/.cache), named by the file
 * system's device, a line "SECONDS FIRST LAST" per tree deleted; lines older
 * than RECENT are ignored, files older than that removed.  Without it (no
 * cache directory) only this process's own trees are known.  With
 * PERFLAB_LMBENCH_FS_DIRS set each tree, its inode numbers, why it was given
 * up and its cost are printed on stderr.
 */
#include "bench.h"

#include <dirent.h>
#include <sys/ioctl.h>
#ifdef __linux__
#include <linux/fs.h>
#endif

#define PER_DIR 100   /* files per subdirectory */
#define BATCH 1000    /* files per batch */
#define TRIES 8       /* trees made at most for a batch that counts */
#define RECENT 400    /* s: ext4 skips an inode deleted in the last 60 s, 360 s while its block is dirty */
#define SLACK 1024    /* inodes others may have taken above a deleted tree since */
#define LEDGER_MAX 4096

static int sizes[8] = { 0, 1, 4, 10 };
static int nsizes = 4;
static char base[4096];  /* this process's directory: every batch's directory is made in it */
static char dir[4200];   /* the batch's directory */
static char **names;
static char **kept;      /* every batch's directory, empty, removed at exit */
static int nkept, made_base, top, show_dirs;
static unsigned nonce;
/* trees deleted in the last RECENT s on this file system: when, first and last inode */
struct deleted { long long when; unsigned long long first, last; };
static struct deleted mine[LEDGER_MAX];  /* this process's own, also when there is no ledger */
static int nmine;
static char ledger_dir[4096], ledger[4200], ledger_prefix[64];

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

/* The ledger of deleted trees, in the cache directory, per file system (device of base). */
static void ledger_open(void)
{
	struct stat st;
	const char *cache = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	if (stat(base, &st) != 0)
		die_errno("stat %s", base);
	snprintf(ledger_prefix, sizeof ledger_prefix, "%llx-", (unsigned long long)st.st_dev);
	if (cache && *cache)
		snprintf(ledger_dir, sizeof ledger_dir, "%s/perflab", cache);
	else if (home && *home)
		snprintf(ledger_dir, sizeof ledger_dir, "%s/.cache/perflab", home);
	else
		return;
	/* ~/.cache/perflab/lat_fs, made as far as it is missing; without it, no ledger */
	char *slash = ledger_dir + strlen(ledger_dir) - strlen("perflab") - 1;
	*slash = 0;
	mkdir(ledger_dir, 0700);
	*slash = '/';
	mkdir(ledger_dir, 0700);
	strncat(ledger_dir, "/lat_fs", sizeof ledger_dir - strlen(ledger_dir) - 1);
	if (mkdir(ledger_dir, 0700) != 0 && errno != EEXIST) {
		ledger_dir[0] = 0;
		return;
	}
	snprintf(ledger, sizeof ledger, "%s/%s%d.%x", ledger_dir, ledger_prefix, (int)getpid(), nonce);
}

static void ledger_add(unsigned long long first, unsigned long long last)
{
	long long now = (long long)time(NULL);
	if (nmine == LEDGER_MAX) {   /* the oldest goes: it aged long ago in any run that long */
		memmove(mine, mine + 1, sizeof mine[0] * (LEDGER_MAX - 1));
		nmine--;
	}
	mine[nmine++] = (struct deleted){ now, first, last };
	if (!ledger_dir[0])
		return;
	FILE *f = fopen(ledger, "a");
	if (f) {
		fprintf(f, "%lld %llu %llu\n", now, first, last);
		fclose(f);
	}
}

static int overlaps(const struct deleted *d, long long now, unsigned long long ino, unsigned long long span)
{
	return now - d->when < RECENT && d->first <= ino + span && ino <= d->last + SLACK;
}

/* Whether a tree whose directory is inode `ino` and whose n files follow it would scan past,
 * or run into, a tree lat_fs deleted less than RECENT s ago: the one found, in *hit. */
static int recently_deleted_near(unsigned long long ino, int n, struct deleted *hit)
{
	long long now = (long long)time(NULL);
	unsigned long long span = (unsigned long long)n + (unsigned long long)n / PER_DIR + 2;
	for (int i = 0; i < nmine; i++)
		if (overlaps(&mine[i], now, ino, span)) {
			*hit = mine[i];
			return 1;
		}
	if (!ledger_dir[0])
		return 0;
	DIR *d = opendir(ledger_dir);
	if (!d)
		return 0;
	struct dirent *e;
	int found = 0;
	char path[sizeof ledger_dir + 256], line[128];
	while (!found && (e = readdir(d))) {
		if (strncmp(e->d_name, ledger_prefix, strlen(ledger_prefix)) != 0)
			continue;
		snprintf(path, sizeof path, "%s/%s", ledger_dir, e->d_name);
		if (strcmp(path, ledger) == 0)
			continue;   /* this process's own: in mine[] */
		struct stat st;
		if (stat(path, &st) != 0)
			continue;
		if (now - (long long)st.st_mtime >= RECENT) {
			unlink(path);   /* every line of it aged */
			continue;
		}
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		struct deleted del;
		while (!found && fgets(line, sizeof line, f)) {
			char end;
			/* a line half written by a process still writing it is not read */
			if (sscanf(line, "%lld %llu %llu%c", &del.when, &del.first, &del.last, &end) == 4 && end == '\n' &&
			    overlaps(&del, now, ino, span)) {
				*hit = del;
				found = 1;
			}
		}
		fclose(f);
	}
	closedir(d);
	return found;
}

/* Create n files of `bytes` in a fresh directory tree, then delete them: the two times
 * in ns.  With top-level placement a tree counts only if it is in a block group where
 * lat_fs deleted nothing recently before or among its files (the ledger), and its files
 * got consecutive inode numbers (ext4 skipped none in use or deleted in the last
 * minute).  Neither reads a time.  Returns 0 if it did not count (the caller makes
 * another); `last`: count it whatever. */
static int batch(int n, const char *buf, size_t bytes, double *t_create, double *t_delete, int last)
{
	struct deleted hit;
	new_dir();
	unsigned long long at = inode_of(dir);
	if (top && !last && recently_deleted_near(at, n, &hit)) {
		if (show_dirs)
			fprintf(stderr, "lat_fs: tree %s: inode %llu, by a tree deleted %lld s ago (inodes %llu..%llu): "
				"another\n", dir, at, (long long)time(NULL) - hit.when, hit.first, hit.last);
		return 0;
	}
	subdirs(n, 1);
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
		fprintf(stderr, "lat_fs: batch of %d in %s, inode %llu, files %llu..%llu%s: "
			"creating %.1f us a file, %.1f us of CPU\n", n, dir, at, first, final,
			final - first == (unsigned long long)n - 1 ? "" : " (not consecutive)",
			(t1 - t0) * 1e-3 / n, (c1 - c0) * 1e-3 / n);
	for (int i = 0; i < n; i++)
		if (unlink(names[i]) != 0)
			die_errno("unlink %s", names[i]);
	int64_t t2 = pl_now_ns();
	subdirs(n, 0);
	unsigned long long lo = first < at ? first : at, hi = final > at ? final : at;
	ledger_add(lo, hi);
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
	if (top)
		ledger_open();

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

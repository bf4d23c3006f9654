/*
 * aim7: one load point of perflab's AIM7-class multi-user workload.
 *
 *   aim7 -u USERS -t TASK:COUNT[,TASK:COUNT...] -b BLOCKS [-S SCALE] [-s SEED]
 *        [-e HELPER] [-y]
 *
 * USERS processes (simulated users) are forked in the current directory. Each
 * user runs the tasks it is given -- COUNT invocations of each TASK -- in an
 * order of its own (a shuffle seeded by SEED and the user's number), as AIM's
 * users draw their jobs at random from the workfile. Disk tasks work on files
 * of BLOCKS blocks of 1 KiB; the loop counts of the other tasks are AIM's,
 * multiplied by SCALE (at least 1). -y calls sync() around the disk tasks as
 * AIM does by default. HELPER is the program exec_test loads.
 *
 * The timed part starts when every user is forked and ready (all are released
 * at once) and ends when the last one has finished. On success it prints
 * metric lines (the runtime's protocol, core/c/perflab.h): aim7.users,
 * aim7.jobs (task invocations completed, counted by the users), aim7.real_s
 * (the timed part), aim7.blocks, aim7.scale, and aim7.user_real_s once per
 * user, in order (each user's own seconds).
 * Jobs per minute are computed from these by the caller. A task that fails
 * prints "aim7: user N: TASK: what: error" on stderr and the program exits 1.
 * Bad options: one line on stderr, exit 2.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "perflab.h"

#define BLOCK 1024                /* AIM's disk block: 1 KiB */
#define FILE_MODE 0666
#define SOURCE_FILE "aim7.source" /* what disk_cp and sync_disk_cp copy */
#define MAX_USERS 100000
#define MAX_JOBS 10000000L
#define LINKS 8                   /* link_test: a file and 7 more names for it */
#define SHM_SIZE 8192

static char block[BLOCK];
static long blocks;               /* disk file size, in blocks */
static double scale = 1.0;
static int do_sync;
static const char *helper;
static int user;                  /* this process's user number */
static unsigned long names;       /* files made by this user so far */
static uint64_t rng_state;

/* ---- small helpers ---------------------------------------------------------------- */

static uint64_t rng(void)
{
	/* xorshift64*: per-user pseudo-random numbers (task order, random blocks) */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ULL;
}

static int failed(const char *task, const char *what)
{
	fprintf(stderr, "aim7: user %d: %s: %s: %s\n", user, task, what, strerror(errno ? errno : EIO));
	return -1;
}

static void new_name(char *buf, size_t size, const char *task)
{
	snprintf(buf, size, "u%d.%s.%lu", user, task, names++);
}

static long loops(long aim_count)
{
	long n = (long)(aim_count * scale + 0.5);
	return n < 1 ? 1 : n;
}

/* n blocks written (or read) in turn; a short transfer is ENOSPC (EIO) */
static int move_blocks(int fd, long n, int writing)
{
	while (n-- > 0) {
		ssize_t done = writing ? write(fd, block, BLOCK) : read(fd, block, BLOCK);
		if (done != BLOCK) {
			if (done >= 0)
				errno = writing ? ENOSPC : EIO;
			return -1;
		}
	}
	return 0;
}

static int write_blocks(int fd, long n) { return move_blocks(fd, n, 1); }
static int read_blocks(int fd, long n) { return move_blocks(fd, n, 0); }

/* A new file of n blocks, closed; its name in name. */
static int make_file(char *name, size_t size, const char *task, long n)
{
	new_name(name, size, task);
	int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, FILE_MODE);
	if (fd < 0)
		return failed(task, "create");
	if (write_blocks(fd, n) < 0) {
		failed(task, "write");
		close(fd);
		unlink(name);
		return -1;
	}
	close(fd);
	return 0;
}

/* n blocks at random places of an open file of `of` blocks: read (or write). */
static int random_blocks(int fd, long n, long of, int writing)
{
	while (n-- > 0) {
		off_t at = (off_t)(rng() % (uint64_t)of) * BLOCK;
		if (lseek(fd, at, SEEK_SET) < 0 || move_blocks(fd, 1, writing) < 0)
			return -1;
	}
	return 0;
}

static void maybe_sync(void)
{
	if (do_sync)
		sync();
}

/* ---- the tasks ---------------------------------------------------------------------- */

/* disk_wrt: write a new file sequentially, then remove it. */
static int disk_wrt(const char *task)
{
	char name[128];
	new_name(name, sizeof name, task);
	int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, FILE_MODE);
	if (fd < 0)
		return failed(task, "create");
	maybe_sync();
	int rc = write_blocks(fd, blocks);
	if (rc < 0)
		failed(task, "write");
	unlink(name);
	close(fd);
	maybe_sync();
	return rc;
}

/* disk_rd: write a new file, then read it back sequentially. */
static int disk_rd(const char *task)
{
	char name[128];
	if (make_file(name, sizeof name, task, blocks) < 0)
		return -1;
	maybe_sync();
	int fd = open(name, O_RDONLY);
	if (fd < 0) {
		failed(task, "open");
		unlink(name);
		return -1;
	}
	int rc = read_blocks(fd, blocks);
	if (rc < 0)
		failed(task, "read");
	close(fd);
	unlink(name);
	maybe_sync();
	return rc;
}

/* disk_rr / disk_rw: write a new file, then read (write) as many blocks at random places. */
static int disk_random(const char *task, int writing, int sync_writes, long n)
{
	char name[128];
	if (make_file(name, sizeof name, task, n) < 0)
		return -1;
	if (!sync_writes)
		maybe_sync();
	int fd = open(name, writing ? (O_WRONLY | (sync_writes ? O_SYNC : 0)) : O_RDONLY);
	if (fd < 0) {
		failed(task, "open");
		unlink(name);
		return -1;
	}
	int rc = random_blocks(fd, n, n, writing);
	if (rc < 0)
		failed(task, writing ? "random write" : "random read");
	close(fd);
	unlink(name);
	if (!sync_writes)
		maybe_sync();
	return rc;
}

static int disk_rr(const char *task) { return disk_random(task, 0, 0, blocks); }
static int disk_rw(const char *task) { return disk_random(task, 1, 0, blocks); }
/* sync_disk_rw: as disk_rw on half the blocks, the random writes through O_SYNC. */
static int sync_disk_rw(const char *task) { return disk_random(task, 1, 1, blocks / 2 > 0 ? blocks / 2 : 1); }

/* disk_cp (sync_disk_cp): copy the shared source file into a new file (O_SYNC, half of it). */
static int copy(const char *task, int sync_writes, long n)
{
	char name[128];
	if (!sync_writes)
		maybe_sync();
	int in = open(SOURCE_FILE, O_RDONLY);
	if (in < 0)
		return failed(task, "open " SOURCE_FILE);
	new_name(name, sizeof name, task);
	int out = open(name, O_WRONLY | O_CREAT | O_TRUNC | (sync_writes ? O_SYNC : 0), FILE_MODE);
	if (out < 0) {
		failed(task, "create");
		close(in);
		return -1;
	}
	int rc = 0;
	while (n-- > 0) {
		ssize_t r = read(in, block, BLOCK);
		if (r != BLOCK) {
			if (r >= 0)
				errno = EIO;
			rc = failed(task, "read");
			break;
		}
		if (write(out, block, BLOCK) != BLOCK) {
			if (errno == 0)
				errno = ENOSPC;
			rc = failed(task, "write");
			break;
		}
	}
	unlink(name);
	close(in);
	close(out);
	if (!sync_writes)
		maybe_sync();
	return rc;
}

static int disk_cp(const char *task) { return copy(task, 0, blocks); }
static int sync_disk_cp(const char *task) { return copy(task, 1, blocks / 2 > 0 ? blocks / 2 : 1); }

/* sync_disk_wrt: write half the blocks to a new file opened O_SYNC. */
static int sync_disk_wrt(const char *task)
{
	char name[128];
	new_name(name, sizeof name, task);
	int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC | O_SYNC, FILE_MODE);
	if (fd < 0)
		return failed(task, "create");
	int rc = write_blocks(fd, blocks / 2 > 0 ? blocks / 2 : 1);
	if (rc < 0)
		failed(task, "write");
	close(fd);
	unlink(name);
	return rc;
}

/* creat-clo: create (truncate) and close one file name 1000 times, then remove it. */
static int creat_clo(const char *task)
{
	char name[128];
	new_name(name, sizeof name, task);
	for (long n = loops(1000); n > 0; n--) {
		int fd = creat(name, FILE_MODE);
		if (fd < 0) {
			failed(task, "creat");
			unlink(name);
			return -1;
		}
		close(fd);
	}
	if (unlink(name) < 0)
		return failed(task, "unlink");
	return 0;
}

/* link_test: a file with 7 more names; remove and re-make each name 9 times round. */
static int link_test(const char *task)
{
	char name[LINKS][128];
	for (int i = 0; i < LINKS; i++)
		new_name(name[i], sizeof name[i], task);
	int fd = creat(name[0], FILE_MODE);
	if (fd < 0)
		return failed(task, "creat");
	int rc = 0;
	for (int i = 1; i < LINKS && rc == 0; i++)
		if (link(name[0], name[i]) < 0)
			rc = failed(task, "link");
	for (long n = loops(9); n > 0 && rc == 0; n--)
		for (int i = 1; i < LINKS && rc == 0; i++)
			if (unlink(name[i]) < 0 || link(name[0], name[i]) < 0)
				rc = failed(task, "unlink/link");
	for (int i = 0; i < LINKS; i++)
		unlink(name[i]);
	close(fd);
	return rc;
}

/* brk_test / page_test: raise the break by 1 MiB; then, repeatedly, lower it by 16 pages
 * and raise it again a page at a time (page_test also writes to each new page, so every
 * page is faulted in afresh); finally put the break back. */
static int brk_pages(const char *task, long aim_count, int touch)
{
	long page = 4096;
	void *start = sbrk(0);
	if (sbrk(1 << 20) == (void *)-1)
		return failed(task, "sbrk 1 MiB");
	for (long n = loops(aim_count); n > 0; n--) {
		if (sbrk(-16 * page) == (void *)-1) {
			failed(task, "sbrk down");
			brk(start);
			return -1;
		}
		for (int i = 0; i < 16; i++) {
			char *p = sbrk(page);
			if (p == (void *)-1) {
				failed(task, "sbrk up");
				brk(start);
				return -1;
			}
			if (touch)
				for (long j = 0; j < page; j += 128)
					((volatile char *)p)[j] = ' ';
		}
	}
	if (brk(start) < 0)
		return failed(task, "brk back");
	return 0;
}

static int brk_test(const char *task) { return brk_pages(task, 1000, 0); }
static int page_test(const char *task) { return brk_pages(task, 100, 1); }

static int wait_child(const char *task, pid_t pid)
{
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return failed(task, "waitpid");
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		errno = ECHILD;
		return failed(task, WIFSIGNALED(status) ? "child killed by a signal" : "child exited non-zero");
	}
	return 0;
}

/* Fork a child that runs child() (which does not return), and wait for it; n times. */
static int fork_and_wait(const char *task, long n, void (*child)(void))
{
	for (; n > 0; n--) {
		pid_t pid = fork();
		if (pid < 0)
			return failed(task, "fork");
		if (pid == 0)
			child();
		if (wait_child(task, pid) < 0)
			return -1;
	}
	return 0;
}

static void exit_at_once(void)
{
	_exit(0);
}

static void exec_nothing(void)
{
	execl(helper, "aim7_true", (char *)NULL);
	_exit(127);
}

/* fork_test: fork a child that exits at once, and wait for it; 100 times. */
static int fork_test(const char *task) { return fork_and_wait(task, loops(100), exit_at_once); }

/* exec_test: fork a child that loads a program doing nothing, and wait for it; 5 times. */
static int exec_test(const char *task) { return fork_and_wait(task, loops(5), exec_nothing); }

/* shared_memory: a System V segment guarded by a semaphore; 100 times, write a message
 * into it and read it back, taking and releasing the semaphore around each copy. */
static int shared_memory(const char *task)
{
	static const int sizes[] = {128, 512, 1024, 2048, 4096, 8192};
	static char local[SHM_SIZE];
	int shm = shmget(IPC_PRIVATE, SHM_SIZE, IPC_CREAT | 0600);
	if (shm < 0)
		return failed(task, "shmget");
	char *mem = shmat(shm, NULL, 0);
	shmctl(shm, IPC_RMID, NULL);      /* gone once detached, whatever happens */
	if (mem == (void *)-1)
		return failed(task, "shmat");
	int sem = semget(IPC_PRIVATE, 1, IPC_CREAT | 0600);
	if (sem < 0) {
		shmdt(mem);
		return failed(task, "semget");
	}
	int rc = 0;
	if (semctl(sem, 0, SETVAL, 1) < 0)
		rc = failed(task, "semctl SETVAL");
	struct sembuf down = {0, -1, 0}, up = {0, 1, 0};
	for (long n = 0, count = loops(100); n < count && rc == 0; n++) {
		int size = sizes[n % (long)(sizeof sizes / sizeof sizes[0])];
		if (semop(sem, &down, 1) < 0) { rc = failed(task, "semop"); break; }
		memcpy(mem, local, size);
		if (semop(sem, &up, 1) < 0) { rc = failed(task, "semop"); break; }
		if (semop(sem, &down, 1) < 0) { rc = failed(task, "semop"); break; }
		memcpy(local, mem, size);
		if (semop(sem, &up, 1) < 0) { rc = failed(task, "semop"); break; }
	}
	semctl(sem, 0, IPC_RMID);
	shmdt(mem);
	return rc;
}

struct task {
	const char *name;
	int (*run)(const char *);
};

static const struct task TASKS[] = {
	{"disk_wrt", disk_wrt},           {"disk_rd", disk_rd},
	{"disk_rr", disk_rr},             {"disk_rw", disk_rw},
	{"disk_cp", disk_cp},             {"sync_disk_rw", sync_disk_rw},
	{"sync_disk_wrt", sync_disk_wrt}, {"sync_disk_cp", sync_disk_cp},
	{"creat-clo", creat_clo},         {"link_test", link_test},
	{"page_test", page_test},         {"brk_test", brk_test},
	{"exec_test", exec_test},         {"fork_test", fork_test},
	{"shared_memory", shared_memory},
};
#define NTASKS ((int)(sizeof TASKS / sizeof TASKS[0]))

/* ---- the driver ---------------------------------------------------------------------- */

struct user_result {              /* written by each user into a shared mapping */
	long done;                    /* task invocations completed */
	double real_s;                /* from release to its last task's end */
	int failed;
};

static void usage(const char *why)
{
	pl_usage_error("%s (usage: aim7 -u USERS -t TASK:COUNT[,...] -b BLOCKS [-S SCALE] [-s SEED] "
		       "[-e HELPER] [-y])", why);
}

static int counts[NTASKS];

static void parse_tasks(char *spec)
{
	for (char *item = strtok(spec, ","); item; item = strtok(NULL, ",")) {
		char *colon = strrchr(item, ':');
		if (!colon)
			usage("-t wants TASK:COUNT");
		*colon = '\0';
		char *end;
		long n = strtol(colon + 1, &end, 10);
		if (*end || n < 0 || n > MAX_JOBS)
			usage("-t: a count must be a whole number from 0");
		int found = -1;
		for (int i = 0; i < NTASKS; i++)
			if (strcmp(TASKS[i].name, item) == 0)
				found = i;
		if (found < 0) {
			fprintf(stderr, "aim7: unknown task %s; valid:", item);
			for (int i = 0; i < NTASKS; i++)
				fprintf(stderr, " %s", TASKS[i].name);
			fputc('\n', stderr);
			exit(2);
		}
		counts[found] += (int)n;
	}
}

static int run_user(int number, uint64_t seed, int release_fd, int ready_fd, struct user_result *out)
{
	user = number;
	rng_state = (seed + 1) * 0x9E3779B97F4A7C15ULL ^ (uint64_t)(number + 1) * 0xD1B54A32D192ED03ULL;
	if (rng_state == 0)
		rng_state = 1;
	long total = 0;
	for (int i = 0; i < NTASKS; i++)
		total += counts[i];
	int *order = malloc(sizeof(int) * (total > 0 ? total : 1));
	if (!order)
		return failed("setup", "malloc");
	long k = 0;
	for (int i = 0; i < NTASKS; i++)
		for (int c = 0; c < counts[i]; c++)
			order[k++] = i;
	for (long i = total - 1; i > 0; i--) {    /* this user's own order */
		long j = (long)(rng() % (uint64_t)(i + 1));
		int t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	char byte = 'r', sink;
	if (write(ready_fd, &byte, 1) != 1)
		return failed("setup", "ready pipe");
	close(ready_fd);
	while (read(release_fd, &sink, 1) < 0 && errno == EINTR)   /* EOF: go */
		;
	close(release_fd);
	int64_t t0 = pl_now_ns();
	for (long i = 0; i < total; i++) {
		errno = 0;
		if (TASKS[order[i]].run(TASKS[order[i]].name) < 0) {
			out->failed = 1;
			return -1;
		}
		out->done++;
	}
	out->real_s = pl_seconds_since(t0);
	free(order);
	return 0;
}

int main(int argc, char **argv)
{
	long users = 0;
	uint64_t seed = 0;
	char *spec = NULL;
	int opt;
	pl_progname = "aim7";
	while ((opt = getopt(argc, argv, "u:t:b:S:s:e:y")) != -1) {
		switch (opt) {
		case 'u':
			users = (long)pl_parse_uint('u', optarg, 1, MAX_USERS);
			break;
		case 't':
			spec = optarg;
			break;
		case 'b':
			blocks = (long)pl_parse_uint('b', optarg, 1, LONG_MAX);
			break;
		case 'S':
			scale = pl_parse_real('S', optarg, 0, 0, 1e6, "a positive scale up to 1e6");
			break;
		case 's':
			seed = pl_parse_uint('s', optarg, 0, ULLONG_MAX);
			break;
		case 'e':
			helper = optarg;
			break;
		case 'y':
			do_sync = 1;
			break;
		default:
			usage("unknown option");
		}
	}
	if (optind != argc || users == 0 || !spec || blocks == 0)
		usage("-u, -t and -b are required");
	parse_tasks(spec);
	for (int i = 0; i < NTASKS; i++)
		if (TASKS[i].run == exec_test && counts[i] > 0 && (!helper || access(helper, X_OK) != 0))
			usage("exec_test needs -e HELPER, an executable program");
	memset(block, 'a', sizeof block);

	/* The file disk_cp copies, made once before the timed part. */
	int src = open(SOURCE_FILE, O_WRONLY | O_CREAT | O_TRUNC, FILE_MODE);
	if (src < 0 || write_blocks(src, blocks) < 0) {
		failed("setup", "write " SOURCE_FILE);
		return 1;
	}
	close(src);

	struct user_result *results = mmap(NULL, sizeof *results * users, PROT_READ | PROT_WRITE,
					   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t *pids = calloc(users, sizeof *pids);
	if (results == MAP_FAILED || !pids) {
		failed("setup", "memory for the users");
		return 1;
	}
	int ready[2], release[2];
	if (pipe(ready) < 0 || pipe(release) < 0) {
		failed("setup", "pipe");
		return 1;
	}
	fflush(NULL);
	long started = 0;
	for (; started < users; started++) {
		pid_t pid = fork();
		if (pid < 0) {
			failed("setup", "fork a user");
			break;
		}
		if (pid == 0) {
			close(ready[0]);
			close(release[1]);
			int rc = run_user((int)started, seed, release[0], ready[1], &results[started]);
			_exit(rc < 0 ? 1 : 0);
		}
		pids[started] = pid;
	}
	close(ready[1]);
	close(release[0]);
	if (started < users) {            /* not every user could be made: stop those that were */
		for (long i = 0; i < started; i++)
			kill(pids[i], SIGKILL);
		for (long i = 0; i < started; i++)
			waitpid(pids[i], NULL, 0);
		unlink(SOURCE_FILE);
		return 1;
	}
	long ready_count = 0;
	char buf[4096];
	for (;;) {                        /* every user writes one byte, then closes its end */
		ssize_t r = read(ready[0], buf, sizeof buf);
		if (r > 0)
			ready_count += r;
		else if (r == 0 || errno != EINTR)
			break;
	}
	int64_t t0 = pl_now_ns();
	close(release[1]);                /* EOF releases every user at once */
	int bad = ready_count != users;
	for (long i = 0; i < users; i++) {
		int status;
		while (waitpid(pids[i], &status, 0) < 0) {
			if (errno != EINTR) {
				status = -1;
				break;
			}
		}
		if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			if (status != -1 && WIFSIGNALED(status))
				fprintf(stderr, "aim7: user %ld killed by signal %d\n", i, WTERMSIG(status));
			bad = 1;
		}
	}
	double real_s = pl_seconds_since(t0);
	unlink(SOURCE_FILE);
	if (bad)
		pl_die("%s", ready_count != users ? "not every user got ready" : "a user failed");
	long jobs = 0;
	for (long i = 0; i < users; i++)
		jobs += results[i].done;
	pl_metric("aim7.users", (double)users, "users");
	pl_metric("aim7.jobs", (double)jobs, "jobs");
	pl_metric("aim7.real_s", real_s, "s");
	pl_metric("aim7.blocks", (double)blocks, "blocks");
	pl_metric("aim7.scale", scale, "");
	for (long i = 0; i < users; i++)
		pl_metric("aim7.user_real_s", results[i].real_s, "s");
	return 0;
}

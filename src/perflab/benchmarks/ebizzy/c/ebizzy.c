/*
 * ebizzy.c - perflab's ebizzy-class workload.
 *
 * Written for perflab; no code is taken from ebizzy.  The workload is the one
 * ebizzy 0.3 defines (a web-search back end): a set of memory chunks filled
 * with sorted records is made once; then, for a fixed time, every thread
 * repeats one "record": pick a chunk, allocate a buffer of the chunk's size,
 * copy the chunk into it, look a key up in the copy by binary search, free the
 * buffer.  With -T the buffer's pages are only touched (one byte written per
 * page) instead of copied and searched; with -m buffers (and chunks) come from
 * mmap/munmap instead of malloc/free.
 *
 * ebizzy 0.3's "random" generator starts at 0 and multiplies, so it never
 * leaves 0: every record copies chunk 0 and looks key 0 up.  That is the
 * workload its published figures measure, and it is the default here; -r
 * picks the chunk and the key with a real generator (per thread) instead.
 *
 *   ebizzy [-m] [-T] [-r] [-t THREADS] [-n CHUNKS] [-s BYTES] [-S SECONDS] [-R RECORDS]
 *
 * -R sizes the run in work instead of time: after a warm-up of RECORDS/4
 * records of all threads (untimed, uncounted: the first records fault their
 * buffers in), the clock starts, and the threads stop once they have completed
 * RECORDS more between them; elapsed ends at that record (for clocks that count
 * instructions, where a fixed amount of work is the sample).  Each completed
 * record takes a ticket (its place among all threads' records) and a thread
 * counts only the records whose tickets fall after the warm-up and at or before
 * the last one, so the threads' counts add up to exactly RECORDS however the
 * threads are scheduled; a record completed past the last ticket is not counted.
 *
 * prints metric lines on stdout (the runtime's protocol, core/c/perflab.h):
 *
 *   {"metric": "ebizzy.elapsed", "value": S, "unit": "s"}
 *   {"metric": "ebizzy.records", "value": R, "unit": "records"}   (one per thread, in order)
 *
 * where R is the number of records a thread completed between the
 * start and the stop (with -S, a record in flight at the stop is completed
 * and counted, as ebizzy does) and elapsed the CLOCK_MONOTONIC seconds between
 * them.  Bad options exit 2 with one line on stderr; any other failure 1.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "perflab.h"

#define MAX_THREADS 65536
#define SLOT 128                /* bytes per thread's counter (two cache lines) */

typedef size_t record;          /* one record: a machine word, as in ebizzy */

static int use_mmap, touch_only, random_pick;
static unsigned threads = 1;
static size_t nchunks = 10;
static size_t chunk_bytes = sizeof(record) * 64 * 1024;   /* 512 KiB on 64-bit */
static double seconds = 10.0;
static unsigned long records_target;    /* -R: stop after this many records of all threads (0: -S) */
static unsigned long records_total, records_warmup;   /* -R: tickets taken; the warm-up's tickets */
static int64_t started_at, stopped_at;
static int start_stamped;               /* -R: started_at is written (the stop waits for it) */
static size_t page;

static record **chunk_table;
static volatile int stop_flag;
static pthread_barrier_t gate;

struct worker {
	pthread_t tid;
	unsigned nr;
	unsigned long records;
	char pad[SLOT - sizeof(pthread_t) - sizeof(unsigned) - sizeof(unsigned long)];
};
static struct worker *workers;

static void *get_memory(size_t bytes)
{
	void *p;

	if (use_mmap) {
		p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			pl_die("mmap of %zu bytes: %s", bytes, strerror(errno));
	} else {
		p = malloc(bytes);
		if (p == NULL)
			pl_die("malloc of %zu bytes failed", bytes);
	}
	return p;
}

static void put_memory(void *p, size_t bytes)
{
	if (use_mmap)
		munmap(p, bytes);
	else
		free(p);
}

static int by_value(const void *a, const void *b)
{
	record x = *(const record *)a, y = *(const record *)b;

	return (x > y) - (x < y);
}

/* splitmix64: seeds each thread's xorshift state from its number */
static uint64_t mix(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static inline uint64_t next_random(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	const size_t nrecords = chunk_bytes / sizeof(record);
	uint64_t state = mix(w->nr + 1) | 1;
	unsigned long done = 0;

	pthread_barrier_wait(&gate);
	while (!__atomic_load_n(&stop_flag, __ATOMIC_RELAXED)) {
		size_t which = random_pick ? next_random(&state) % nchunks : 0;
		char *buffer = get_memory(chunk_bytes);

		if (touch_only) {
			for (size_t off = 0; off < chunk_bytes; off += page)
				buffer[off] = (char)0xff;
		} else {
			record key = random_pick ? next_random(&state) % nrecords : 0;

			memcpy(buffer, chunk_table[which], chunk_bytes);
			if (bsearch(&key, buffer, nrecords, sizeof(record), by_value) == NULL)
				pl_die("thread %u: key %zu not found in its copy of chunk %zu (memory corrupted?)",
				    w->nr, (size_t)key, which);
		}
		put_memory(buffer, chunk_bytes);
		if (!records_target) {
			done++;
			continue;
		}
		/* -R: the ticket decides whether this record counts, not the stop flag, which
		 * goes up a moment after the last ticket (the thread taking it may be
		 * preempted in between, while the others go on completing records). */
		unsigned long ticket = __atomic_add_fetch(&records_total, 1, __ATOMIC_ACQ_REL);
		if (ticket > records_warmup + records_target)
			break;
		if (ticket > records_warmup)
			done++;
		if (ticket == records_warmup) {
			started_at = pl_now_ns();
			__atomic_store_n(&start_stamped, 1, __ATOMIC_RELEASE);
		}
		if (ticket == records_warmup + records_target) {
			/* with RECORDS 1 and several threads the last ticket can come before the
			 * first thread has stamped the start: wait for it, so elapsed is >= 0 */
			while (!__atomic_load_n(&start_stamped, __ATOMIC_ACQUIRE))
				sched_yield();
			stopped_at = pl_now_ns();
			__atomic_store_n(&stop_flag, 1, __ATOMIC_RELEASE);
			break;
		}
	}
	w->records = done;
	return NULL;
}

int main(int argc, char **argv)
{
	int c;

	pl_progname = "ebizzy";
	page = (size_t)sysconf(_SC_PAGESIZE);
	opterr = 0;
	while ((c = getopt(argc, argv, ":mTrt:n:s:S:R:h")) != -1) {
		switch (c) {
		case 'm': use_mmap = 1; break;
		case 'T': touch_only = 1; break;
		case 'r': random_pick = 1; break;
		case 't': threads = (unsigned)pl_parse_uint('t', optarg, 1, MAX_THREADS); break;
		case 'n': nchunks = (size_t)pl_parse_uint('n', optarg, 1, 1u << 20); break;
		case 's': chunk_bytes = (size_t)pl_parse_uint('s', optarg, sizeof(record), (size_t)1 << 40); break;
		case 'S': seconds = pl_parse_seconds('S', optarg, 0); break;
		case 'R': records_target = (unsigned long)pl_parse_uint('R', optarg, 1, 1UL << 40); break;
		case 'h':
			printf("usage: %s [-m] [-T] [-r] [-t THREADS] [-n CHUNKS] [-s BYTES] [-S SECONDS] [-R RECORDS]\n", argv[0]);
			return 0;
		case ':': pl_usage_error("-%c: missing value", optopt);
		default: pl_usage_error("-%c: unknown option (valid: -m -T -r -t -n -s -S -R)", optopt);
		}
	}
	if (optind < argc)
		pl_usage_error("unexpected argument '%.100s'", argv[optind]);
	records_warmup = records_target / 4 ? records_target / 4 : 1;
	if (chunk_bytes % sizeof(record))
		chunk_bytes -= chunk_bytes % sizeof(record);

	/* The chunks: record j of every chunk holds j, so each chunk is sorted. */
	chunk_table = calloc(nchunks, sizeof *chunk_table);
	workers = calloc(threads, sizeof *workers);
	if (!chunk_table || !workers)
		pl_die("out of memory for %zu chunks and %u threads", nchunks, threads);
	for (size_t i = 0; i < nchunks; i++) {
		chunk_table[i] = get_memory(chunk_bytes);
		for (size_t j = 0; j < chunk_bytes / sizeof(record); j++)
			chunk_table[i][j] = j;
	}

	if (pthread_barrier_init(&gate, NULL, threads + 1))
		pl_die("pthread_barrier_init failed");
	for (unsigned i = 0; i < threads; i++) {
		int err;

		workers[i].nr = i;
		err = pthread_create(&workers[i].tid, NULL, worker_main, &workers[i]);
		if (err)
			pl_die("cannot start thread %u of %u: %s", i + 1, threads, strerror(err));
	}

	pthread_barrier_wait(&gate);
	int64_t start = pl_now_ns();
	double elapsed;
	if (records_target) {
		for (unsigned i = 0; i < threads; i++)
			pthread_join(workers[i].tid, NULL);
		elapsed = (double)(stopped_at - started_at) / 1e9;
	} else {
		struct timespec rest = { (time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9) };
		while (nanosleep(&rest, &rest) == -1 && errno == EINTR)
			;
		__atomic_store_n(&stop_flag, 1, __ATOMIC_RELAXED);
		elapsed = pl_seconds_since(start);
		for (unsigned i = 0; i < threads; i++)
			pthread_join(workers[i].tid, NULL);
	}

	pl_metric("ebizzy.elapsed", elapsed, "s");
	for (unsigned i = 0; i < threads; i++)
		pl_metric("ebizzy.records", (double)workers[i].records, "records");
	return 0;
}

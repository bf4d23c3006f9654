/*
 * lat_mem - memory load latency in nanoseconds, and the CPU clock in MHz.
 *
 *   mem.l1    one load of a chain of dependent loads (each loads the address
 *             of the next) through a 1 KB buffer, the pointers 128 bytes
 *             apart, walked in address order (LMbench: lat_mem_rd, stride
 *             128; the summary's L1 column is its 1 KB point)
 *   mem.l2    the same through a 128 KB buffer (the summary's L2 column is
 *             lat_mem_rd's 0.125 MB point)
 *   mem.main  the same through a SIZE buffer, 64 MB (-m SIZE; 8 MB with -T)
 *             (the summary's main-memory column is lat_mem_rd's largest size)
 *   mem.main_random  the same SIZE buffer, each 128-byte line visited once
 *             per lap in a random order, so that consecutive loads fall on
 *             different pages and no prefetcher can follow: the latency of
 *             a cache and TLB miss (LMbench: lat_mem_rd -t, largest size;
 *             not a column of the LMbench 2.0 summary)
 *   mem.mhz   the clock of the CPU running it: a chain of dependent integer
 *             additions, one cycle each, timed (LMbench: mhz)
 *
 * As with LMbench, the first three walks are sequential at a 128-byte
 * stride: on CPUs whose prefetchers follow such a walk, mem.l2 and mem.main
 * show the latency the prefetcher leaves, not that of a random access.
 */
#include "bench.h"

#define STRIDE 128
#define UNROLL 100

static size_t main_size;
static void *volatile sink;
static void *chain_base;  /* what free() takes of the last chain made */

/* A cyclic chain through the STRIDE-apart lines of a new buffer of `size`
 * bytes: in address order, or (shuffled) in a random order, Fisher-Yates with
 * a per-process seed so that each process walks its own order.  Returns the
 * chain's first line; chain_base is what free() takes. */
static void **make_chain(size_t size, int shuffled)
{
	if (size < 2 * STRIDE)
		size = 2 * STRIDE;
	char *buf = xmalloc(size);
	memset(buf, 0, size);
	size_t n = size / STRIDE;
	size_t *order = xmalloc(n * sizeof *order);
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	uint64_t x = (uint64_t)getpid() * 0x9E3779B97F4A7C15u | 1;
	for (size_t i = n - 1; shuffled && i > 0; i--) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
		size_t j = (size_t)(x % (i + 1)), t = order[i];
		order[i] = order[j], order[j] = t;
	}
	for (size_t i = 0; i < n; i++)
		*(void **)(buf + order[i] * STRIDE) = buf + order[(i + 1) % n] * STRIDE;
	void **first = (void **)(buf + order[0] * STRIDE);
	free(order);
	chain_base = buf;
	return first;
}

#define LOAD1 p = (void **)*p;
#define LOAD10 LOAD1 LOAD1 LOAD1 LOAD1 LOAD1 LOAD1 LOAD1 LOAD1 LOAD1 LOAD1
#define LOAD100 LOAD10 LOAD10 LOAD10 LOAD10 LOAD10 LOAD10 LOAD10 LOAD10 LOAD10 LOAD10

/* one iteration = UNROLL dependent loads */
static void do_chase(uint64_t n, void *ctx)
{
	void **p = *(void ***)ctx;
	for (uint64_t i = 0; i < n; i++) {
		LOAD100
	}
	*(void ***)ctx = p; /* continue where we stopped; and the loads are used */
	sink = p;
}

#define ADDS 64
#define ADD1 x += y; __asm__ __volatile__("" : "+r"(x));
#define ADD8 ADD1 ADD1 ADD1 ADD1 ADD1 ADD1 ADD1 ADD1
#define ADD64 ADD8 ADD8 ADD8 ADD8 ADD8 ADD8 ADD8 ADD8

/* one iteration = ADDS dependent additions, one cycle each */
static void do_adds(uint64_t n, void *ctx)
{
	uint64_t x = (uint64_t)(uintptr_t)ctx, y = 3;
	__asm__ __volatile__("" : "+r"(y));
	for (uint64_t i = 0; i < n; i++) {
		ADD64
	}
	sink = (void *)(uintptr_t)x;
}

static void latency(const char *metric, size_t size, int shuffled)
{
	double v[BENCH_MAX_SAMPLES];
	if (!want(metric))
		return;
	void **chain = make_chain(size, shuffled);
	void **p = chain;
	do_chase(size / STRIDE / UNROLL + 1, &p); /* warm: the whole chain once */
	if (size > 4u << 20)
		bench_steady(do_chase, &p);
	bench_samples(do_chase, &p, v);
	for (int i = 0; i < opt.samples; i++)
		emit(metric, v[i] / UNROLL, "ns");
	free(chain_base);
}

int main(int argc, char **argv)
{
	bench_init(argc, argv, "lat_mem", "m:", size_option, "[-m MAIN_SIZE]");
	main_size = size_option_value(8u << 20);

	if (want("mem.mhz")) {
		double v[BENCH_MAX_SAMPLES];
		bench_samples(do_adds, (void *)1, v);
		for (int i = 0; i < opt.samples; i++)
			emit("mem.mhz", ADDS / v[i] * 1e3, "MHz");
	}
	latency("mem.l1", 1024, 0);
	latency("mem.l2", 128 * 1024, 0);
	latency("mem.main", main_size, 0);
	latency("mem.main_random", main_size, 1);
	return 0;
}

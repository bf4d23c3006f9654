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
 *
 * -1 SIZE / -2 SIZE move the mem.l1 / mem.l2 points (the driver picks them
 * from the cache sizes the machine reports).  -z KB,KB,... also measures the
 * sequential walk at those sizes (one sample each), printed as
 *   {"metric": "mem.curve", "value": NS, "unit": "ns", "size": BYTES}
 * and, with -B, refines it where it bends: between neighbouring sizes whose
 * latencies differ by more than BEND, at least 4x apart, the size halfway
 * (geometrically) is measured too, for up to REFINE_ROUNDS rounds.
 */
#include "bench.h"

#define STRIDE 128
#define UNROLL 100

#define MAX_CURVE 64
#define BEND 1.3
#define REFINE_ROUNDS 2

static size_t main_size, l1_size = 1024, l2_size = 128 * 1024;
static int curve_kb[MAX_CURVE], ncurve, refine;
static void *volatile sink;
static void *chain_base;  /* what free() takes of the last chain made (NULL: the big buffer) */

/* Walks beyond the caches (over BIG bytes) share one buffer, allocated at
 * the largest size asked for and brought to its steady speed once
 * (bench_steady): what takes time to settle is fresh memory (the host
 * backing it), not a walk, so mem.main, mem.main_random and the curve's
 * large points do not each wait for it again. */
#define BIG (4u << 20)
static char *big;
static size_t big_size;
static int big_steady;

static char *chain_buffer(size_t size)
{
	if (size <= BIG) {
		chain_base = xmalloc(size);
		return chain_base;
	}
	if (!big) {
		big = xmalloc(big_size);
		memset(big, 0, big_size);
	}
	chain_base = NULL;
	return big;
}

/* A cyclic chain through the STRIDE-apart lines of a buffer of `size`
 * bytes: in address order, or (shuffled) in a random order, Fisher-Yates with
 * a per-process seed so that each process walks its own order.  Returns the
 * chain's first line; chain_base is what free() takes. */
static void **make_chain(size_t size, int shuffled)
{
	if (size < 2 * STRIDE)
		size = 2 * STRIDE;
	char *buf = chain_buffer(size);
	if (size <= BIG)
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

/* Warm a new chain: the whole chain twice; the big buffer's first chain until
 * its speed is steady. */
static void settle(size_t size, void ***p)
{
	do_chase(2 * (size / STRIDE / UNROLL + 1), p);
	if (size > BIG && !big_steady) {
		bench_steady(do_chase, p);
		big_steady = 1;
	}
}

static void latency(const char *metric, size_t size, int shuffled)
{
	double v[BENCH_MAX_SAMPLES];
	if (!want(metric))
		return;
	void **p = make_chain(size, shuffled);
	settle(size, &p);
	bench_samples(do_chase, &p, v);
	for (int i = 0; i < opt.samples; i++)
		emit(metric, v[i] / UNROLL, "ns");
	free(chain_base);
}

/* ns per load of the sequential walk through `size` bytes: one sample */
static double curve_point(size_t size)
{
	double v[BENCH_MAX_SAMPLES];
	int saved = opt.samples;
	void **p = make_chain(size, 0);
	settle(size, &p);
	opt.samples = 1;
	bench_samples(do_chase, &p, v);
	opt.samples = saved;
	free(chain_base);
	return v[0] / UNROLL;
}

static void curve_line(size_t size, double ns)
{
	char buf[512], text[32];
	struct pl_line l;
	snprintf(text, sizeof text, "%.6g", ns);  /* six digits, as every other figure (emit) */
	pl_line_start(&l, buf, sizeof buf, "mem.curve", strtod(text, NULL), "ns");
	pl_line_int(&l, "size", (long long)size);
	pl_line_end(&l);
}

/* floor(sqrt(x)) without libm (the programs link nothing but libc) */
static uint64_t isqrt(uint64_t x)
{
	uint64_t r = 0;
	for (uint64_t bit = UINT64_C(1) << 62; bit; bit >>= 2) {
		if (x >= r + bit) {
			x -= r + bit;
			r = (r >> 1) + bit;
		} else {
			r >>= 1;
		}
	}
	return r;
}

/* -z: the curve at the given sizes, refined where it bends (-B) */
static void curve(void)
{
	size_t size[MAX_CURVE];
	double ns[MAX_CURVE];
	int n = 0;
	for (int i = 0; i < ncurve; i++)
		size[n++] = (size_t)curve_kb[i] * 1024;
	for (int i = 1; i < n; i++)  /* sorted, so that neighbours are neighbours */
		for (int j = i; j > 0 && size[j] < size[j - 1]; j--) {
			size_t t = size[j];
			size[j] = size[j - 1], size[j - 1] = t;
		}
	for (int i = 0; i < n; i++)
		curve_line(size[i], ns[i] = curve_point(size[i]));
	for (int round = 0; refine && round < REFINE_ROUNDS; round++) {
		int added = 0;
		for (int i = 0; i + 1 < n && n < MAX_CURVE; i++) {
			double ratio = ns[i + 1] > ns[i] ? ns[i + 1] / ns[i] : ns[i] / ns[i + 1];
			if (ratio <= BEND || size[i + 1] < 4 * size[i])
				continue;
			size_t mid = isqrt((uint64_t)size[i] * size[i + 1]);
			mid -= mid % 1024;
			memmove(size + i + 2, size + i + 1, (size_t)(n - i - 1) * sizeof size[0]);
			memmove(ns + i + 2, ns + i + 1, (size_t)(n - i - 1) * sizeof ns[0]);
			size[i + 1] = mid;
			curve_line(mid, ns[i + 1] = curve_point(mid));
			n++, i++, added++;
		}
		if (!added)
			break;
	}
}

static int lat_mem_option(int c, const char *arg)
{
	if (c == '1')
		l1_size = pl_parse_size('1', arg);
	else if (c == '2')
		l2_size = pl_parse_size('2', arg);
	else if (c == 'z')
		ncurve = pl_parse_list('z', arg, curve_kb, MAX_CURVE);
	else if (c == 'B')
		refine = 1;
	else
		return size_option(c, arg);
	return 1;
}

int main(int argc, char **argv)
{
	bench_init(argc, argv, "lat_mem", "m:1:2:z:B", lat_mem_option,
		   "[-m MAIN_SIZE] [-1 L1_SIZE] [-2 L2_SIZE] [-z KB,KB,... [-B]]");
	main_size = size_option_value(8u << 20);
	big_size = main_size;
	for (int i = 0; i < ncurve; i++)
		if ((size_t)curve_kb[i] * 1024 > big_size)
			big_size = (size_t)curve_kb[i] * 1024;

	if (want("mem.mhz")) {
		double v[BENCH_MAX_SAMPLES];
		bench_samples(do_adds, (void *)1, v);
		for (int i = 0; i < opt.samples; i++)
			emit("mem.mhz", ADDS / v[i] * 1e3, "MHz");
	}
	latency("mem.l1", l1_size, 0);
	latency("mem.l2", l2_size, 0);
	latency("mem.main", main_size, 0);
	latency("mem.main_random", main_size, 1);
	if (ncurve && want("mem.curve"))
		curve();
	return 0;
}

/*
 * bw_mem - memory bandwidths, in MB/s (MB = 2^20 bytes).
 *
 *   bw.bcopy_libc  memcpy() of SIZE/2 bytes from one buffer to another
 *                  (LMbench: bw_mem SIZE/2 bcopy, "libc bcopy")
 *   bw.bcopy_hand  the same copy done by a hand-unrolled loop of 4-byte
 *                  words, 16 a step, every word (bw_mem SIZE/2 fcp,
 *                  "unrolled bcopy"); the compiler may use wider moves
 *   bw.mem_read    sum every 4-byte word of a SIZE buffer, 128 words a step
 *                  (bw_mem SIZE frd, "Memory read")
 *   bw.mem_write   store every 4-byte word of a SIZE buffer, one store per
 *                  word, 512-byte blocks in address order, each block's
 *                  128 words from the last to the first, as LMbench's fwr
 *                  executes them (bw_mem SIZE fwr, "Memory write")
 *   bw.bzero       memset() of a SIZE buffer to zero (bw_mem SIZE bzero)
 *
 * Bytes are counted as LMbench counts them: a copy of N bytes moves N bytes
 * (it is not counted as N read plus N written).  SIZE is 64 MB (-m SIZE;
 * 1 MB with -T): well beyond the caches of most machines, as the LMbench
 * summary's figures (its largest size) are meant to be.  Copies use two
 * SIZE/2 buffers, so every test walks SIZE bytes of memory.  The first test
 * runs until its speed is steady before it is timed (bench.h, bench_steady):
 * what takes time to settle is the freshly allocated memory, which every test
 * shares, so the later tests only warm up (their calibration runs).
 */
#include "bench.h"

static size_t size;
static volatile unsigned sink;

/* keep the compiler from turning a loop into a library call or hoisting it */
#define BARRIER(p) __asm__ __volatile__("" : "+r"(p) : : "memory")

struct buf {
	int *a, *b;
	size_t bytes;
};

static void do_memcpy(uint64_t n, void *ctx)
{
	struct buf *m = ctx;
	for (uint64_t i = 0; i < n; i++) {
		int *dst = m->b;
		BARRIER(dst);
		memcpy(dst, m->a, m->bytes);
	}
}

static void do_copy_hand(uint64_t n, void *ctx)
{
	struct buf *m = ctx;
	for (uint64_t i = 0; i < n; i++) {
		const int *src = m->a, *end = m->a + m->bytes / sizeof(int);
		int *dst = m->b;
		while (src + 16 <= end) {
			int a0 = src[0], a1 = src[1], a2 = src[2], a3 = src[3];
			int a4 = src[4], a5 = src[5], a6 = src[6], a7 = src[7];
			int a8 = src[8], a9 = src[9], a10 = src[10], a11 = src[11];
			int a12 = src[12], a13 = src[13], a14 = src[14], a15 = src[15];
			dst[0] = a0; dst[1] = a1; dst[2] = a2; dst[3] = a3;
			dst[4] = a4; dst[5] = a5; dst[6] = a6; dst[7] = a7;
			dst[8] = a8; dst[9] = a9; dst[10] = a10; dst[11] = a11;
			dst[12] = a12; dst[13] = a13; dst[14] = a14; dst[15] = a15;
			src += 16;
			dst += 16;
			BARRIER(dst);
		}
		while (src < end)
			*dst++ = *src++;
	}
}

#define R4(o) p[o] + p[o + 1] + p[o + 2] + p[o + 3]
#define R16(o) R4(o) + R4(o + 4) + R4(o + 8) + R4(o + 12)
#define R128 R16(0) + R16(16) + R16(32) + R16(48) + R16(64) + R16(80) + R16(96) + R16(112)

static void do_read(uint64_t n, void *ctx)
{
	struct buf *m = ctx;
	unsigned s = 0; /* unsigned: the sum may wrap */
	for (uint64_t i = 0; i < n; i++) {
		/* every word loaded and added, 128 words (512 bytes) a step */
		const unsigned *p = (const unsigned *)m->a, *end = p + m->bytes / sizeof(int);
		BARRIER(p);
		while (p + 128 <= end) {
			s += R128;
			p += 128;
		}
		while (p < end)
			s += *p++;
	}
	sink = s;
}

/* 128 stores, from the block's last word down to its first */
#define W1(k) p[k] = v;
#define W8(k) W1(k + 7) W1(k + 6) W1(k + 5) W1(k + 4) W1(k + 3) W1(k + 2) W1(k + 1) W1(k)
#define W64(k) W8(k + 56) W8(k + 48) W8(k + 40) W8(k + 32) W8(k + 24) W8(k + 16) W8(k + 8) W8(k)
#define W128 W64(64) W64(0)

static void do_write(uint64_t n, void *ctx)
{
	struct buf *m = ctx;
	for (uint64_t i = 0; i < n; i++) {
		volatile int *p = m->a, *end = m->a + m->bytes / sizeof(int);
		int v = (int)i;
		while (p + 128 <= end) {
			W128
			p += 128;
		}
		while (p < end)
			*p++ = v;
	}
}

static void do_bzero(uint64_t n, void *ctx)
{
	struct buf *m = ctx;
	for (uint64_t i = 0; i < n; i++) {
		int *p = m->a;
		BARRIER(p);
		memset(p, 0, m->bytes);
	}
}

int main(int argc, char **argv)
{
	bench_init(argc, argv, "bw_mem", "m:", size_option, "[-m SIZE]");
	size = size_option_value(1u << 20);
	size -= size % 128;
	if (size < 1024)
		die("-m: at least 1 KB");

	/* both halves are touched before timing: no page faults are timed */
	int *mem = xmalloc(size);
	memset(mem, 1, size);
	struct buf half = { mem, mem + size / 2 / sizeof(int), size / 2 };
	struct buf whole = { mem, NULL, size };

	struct { const char *metric; bench_fn fn; struct buf *b; } tests[] = {
		{ "bw.bcopy_libc", do_memcpy, &half },
		{ "bw.bcopy_hand", do_copy_hand, &half },
		{ "bw.mem_read", do_read, &whole },
		{ "bw.mem_write", do_write, &whole },
		{ "bw.bzero", do_bzero, &whole },
	};
	int steady = 0;
	for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
		if (!want(tests[i].metric))
			continue;
		if (!steady++)
			bench_steady(tests[i].fn, tests[i].b);
		bench_bandwidth(tests[i].metric, tests[i].fn, tests[i].b, (double)tests[i].b->bytes);
	}
	free(mem);
	return 0;
}

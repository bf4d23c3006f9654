/*
 * bw_file - file reread bandwidths, in MB/s (MB = 2^20 bytes).
 *
 *   bw.file_reread      read() the whole file (in the page cache) into a
 *                       64 KB buffer, 64 KB at a time, summing the words of
 *                       each block; the file stays open
 *                       (LMbench: bw_file_rd SIZE io_only FILE)
 *   bw.file_open_close  the same with open() and close() of the file timed
 *                       (bw_file_rd SIZE open2close FILE)
 *   bw.mmap_reread      sum the words of a mapping of the whole file, mapped
 *                       once (bw_mmap_rd SIZE mmap_only FILE)
 *   bw.mmap_open_close  the same with open(), mmap(), munmap() and close()
 *                       timed (bw_mmap_rd SIZE open2close FILE)
 *
 * SIZE is 64 MB (-m SIZE; 1 MB with -T); the file is created in -d and read
 * once before timing.  The LMbench summary shows the largest size it ran.
 * The sum reads every fourth 4-byte word, as LMbench's readers do, so the
 * figures measure moving the data through the cache rather than adding.
 */
#include "bench.h"

#include <sys/mman.h>

#define BLOCK (64 * 1024)

static char path[4096];
static size_t size;            /* of the file: size_option_value() */
static volatile unsigned sink;

/* the reader's work on the data: one 4-byte word in four, unrolled */
static unsigned sum_block(const unsigned *p, size_t bytes)
{
	unsigned s = 0; /* unsigned: the sum may wrap */
	const unsigned *end = p + bytes / sizeof(int);
	while (p + 64 <= end) {
		s += p[0] + p[4] + p[8] + p[12] + p[16] + p[20] + p[24] + p[28]
		   + p[32] + p[36] + p[40] + p[44] + p[48] + p[52] + p[56] + p[60];
		p += 64;
	}
	while (p < end) {
		s += *p;
		p += 4;
	}
	return s;
}

struct rd {
	int fd;
	unsigned *buf;
	char *map;
};

static unsigned read_all(int fd, unsigned *buf)
{
	unsigned s = 0;
	for (size_t done = 0; done < size;) {
		size_t want_n = size - done < BLOCK ? size - done : BLOCK;
		ssize_t r = read(fd, buf, want_n);
		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			if (r == 0)
				die("%s: shorter than %zu bytes", path, size);
			die_errno("read %s", path);
		}
		s += sum_block(buf, (size_t)r);
		done += (size_t)r;
	}
	return s;
}

static void do_file_reread(uint64_t n, void *ctx)
{
	struct rd *r = ctx;
	unsigned s = 0;
	for (uint64_t i = 0; i < n; i++) {
		if (lseek(r->fd, 0, SEEK_SET) != 0)
			die_errno("lseek %s", path);
		s += read_all(r->fd, r->buf);
	}
	sink = s;
}

static void do_file_open_close(uint64_t n, void *ctx)
{
	struct rd *r = ctx;
	unsigned s = 0;
	for (uint64_t i = 0; i < n; i++) {
		int fd = open(path, O_RDONLY);
		if (fd < 0)
			die_errno("open %s", path);
		s += read_all(fd, r->buf);
		close(fd);
	}
	sink = s;
}

static void do_mmap_reread(uint64_t n, void *ctx)
{
	struct rd *r = ctx;
	unsigned s = 0;
	for (uint64_t i = 0; i < n; i++) {
		const unsigned *p = (const unsigned *)r->map;
		/* the compiler must not hoist the (loop-invariant) sum out of the loop */
		__asm__ __volatile__("" : "+r"(p) : : "memory");
		s += sum_block(p, size);
	}
	sink = s;
}

static void do_mmap_open_close(uint64_t n, void *ctx)
{
	(void)ctx;
	unsigned s = 0;
	for (uint64_t i = 0; i < n; i++) {
		int fd = open(path, O_RDONLY);
		if (fd < 0)
			die_errno("open %s", path);
		void *p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED)
			die_errno("mmap %s", path);
		s += sum_block(p, size);
		munmap(p, size);
		close(fd);
	}
	sink = s;
}

int main(int argc, char **argv)
{
	bench_init(argc, argv, "bw_file", "m:f:", size_option, "[-m FILE_SIZE] [-f EXISTING_FILE]");
	size = size_option_value(1u << 20);
	if (size < 4096)
		die("-m: the file must have at least 4 KB");
	size -= size % 4096;

	int fd = open_test_file(path, sizeof path, size_opt.file, size, O_RDONLY);

	struct rd r = { fd, xmalloc(BLOCK), NULL };
	memset(r.buf, 0, BLOCK);
	do_file_reread(1, &r); /* all of it in the page cache */

	bench_bandwidth("bw.file_reread", do_file_reread, &r, (double)size);
	bench_bandwidth("bw.file_open_close", do_file_open_close, &r, (double)size);
	if (want("bw.mmap_reread")) {
		r.map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
		if (r.map == MAP_FAILED)
			die_errno("mmap %s", path);
		/* the mapping's speed rises over its first passes (page tables, the host's
		 * backing): without settling, a process's five samples climbed by 15% */
		bench_steady(do_mmap_reread, &r);
		bench_bandwidth("bw.mmap_reread", do_mmap_reread, &r, (double)size);
		munmap(r.map, size);
	}
	bench_bandwidth("bw.mmap_open_close", do_mmap_open_close, &r, (double)size);
	close(fd);
	free(r.buf);
	return 0;
}

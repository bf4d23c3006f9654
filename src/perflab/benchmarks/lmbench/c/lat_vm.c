/*
 * lat_vm - virtual memory latencies, in microseconds.
 *
 *   vm.mmap        map the first SIZE bytes of a file (MAP_SHARED, read and
 *                  write), write one byte every 16 KB of the first tenth of
 *                  the mapping, unmap it; per mapping (LMbench: lat_mmap SIZE
 *                  FILE touches its mapping the same way; the summary shows
 *                  the largest size)
 *   vm.prot_fault  a write to a page mapped PROT_READ: the fault, the SIGSEGV
 *                  delivery, the handler and the return - the write is retried
 *                  and faults again until the handler, at the last count,
 *                  makes the page writable - minus the signal handler
 *                  overhead measured as signal.handle is (right after each
 *                  sample of faults), so that what is left is the fault
 *                  itself, as LMbench 3 reports it (lat_sig prot)
 *   vm.page_fault  map the file read-only, read one byte of every page in a
 *                  shuffled order, unmap; minus the same mmap+munmap without
 *                  touching; per page (LMbench: lat_pagefault FILE).  The file
 *                  is in the page cache, so these are minor faults, and the
 *                  kernel's fault-around maps neighbouring pages on each one:
 *                  the figure is the cost per page of getting a cached file
 *                  mapped in, as LMbench's is on Linux.
 *
 * SIZE is 64 MB (-m SIZE; 1 MB with -T); the file is created in -d.
 */
#include "bench.h"

#include <setjmp.h>
#include <sys/mman.h>

#define MMAP_STRIDE (16 * 1024)

static char path[4096];
static size_t size;            /* of the file: size_option_value() */
static long pagesize;

/* ---- vm.mmap ---- */

struct map {
	int fd;
	size_t size;
	size_t *order;      /* page_fault: pages in touch order */
	size_t npages;
};

static void do_mmap(uint64_t n, void *ctx)
{
	struct map *m = ctx;
	for (uint64_t i = 0; i < n; i++) {
		char *p = mmap(NULL, m->size, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
		if (p == MAP_FAILED)
			die_errno("mmap %zu bytes of %s", m->size, path);
		for (size_t off = 0; off < m->size / 10; off += MMAP_STRIDE)
			p[off] = (char)i;
		if (munmap(p, m->size) != 0)
			die_errno("munmap");
	}
}

/* ---- vm.page_fault ---- */

static volatile int sink;

static void do_map_only(uint64_t n, void *ctx)
{
	struct map *m = ctx;
	for (uint64_t i = 0; i < n; i++) {
		char *p = mmap(NULL, m->size, PROT_READ, MAP_SHARED, m->fd, 0);
		if (p == MAP_FAILED)
			die_errno("mmap %zu bytes of %s", m->size, path);
		if (munmap(p, m->size) != 0)
			die_errno("munmap");
	}
}

static void do_map_touch(uint64_t n, void *ctx)
{
	struct map *m = ctx;
	int s = 0;
	for (uint64_t i = 0; i < n; i++) {
		volatile char *p = mmap(NULL, m->size, PROT_READ, MAP_SHARED, m->fd, 0);
		if (p == MAP_FAILED)
			die_errno("mmap %zu bytes of %s", m->size, path);
		for (size_t j = 0; j < m->npages; j++)
			s += p[m->order[j] * (size_t)pagesize];
		if (munmap((void *)p, m->size) != 0)
			die_errno("munmap");
	}
	sink = s;
}

/* ---- vm.prot_fault ---- */

static char *prot_page;
static volatile uint64_t faults, faults_wanted;

static void segv(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	if ((char *)si->si_addr < prot_page || (char *)si->si_addr >= prot_page + pagesize) {
		/* a real crash, not ours: die as the default action would */
		signal(SIGSEGV, SIG_DFL);
		return;
	}
	if (++faults >= faults_wanted)
		mprotect(prot_page, (size_t)pagesize, PROT_READ | PROT_WRITE);
}

static void do_prot(uint64_t n, void *ctx)
{
	(void)ctx;
	if (mprotect(prot_page, (size_t)pagesize, PROT_READ) != 0)
		die_errno("mprotect");
	faults = 0;
	faults_wanted = n;
	/* faults n times: the handler returns, the write is retried */
	*(volatile char *)prot_page = 1;
	if (faults != n)
		die("protection fault: expected %llu faults, got %llu",
		    (unsigned long long)n, (unsigned long long)faults);
}

/* the two mprotect() calls around each sample's faults, to subtract */
static void do_mprotect_pair(uint64_t n, void *ctx)
{
	(void)ctx;
	for (uint64_t i = 0; i < n; i++) {
		if (mprotect(prot_page, (size_t)pagesize, PROT_READ) != 0)
			die_errno("mprotect");
		if (mprotect(prot_page, (size_t)pagesize, PROT_READ | PROT_WRITE) != 0)
			die_errno("mprotect");
	}
}

int main(int argc, char **argv)
{
	double v[BENCH_MAX_SAMPLES];

	bench_init(argc, argv, "lat_vm", "m:f:", size_option, "[-m FILE_SIZE] [-f EXISTING_FILE (its bytes are overwritten)]");
	size = size_option_value(1u << 20);
	pagesize = sysconf(_SC_PAGESIZE);
	if (size < (size_t)pagesize)
		size = (size_t)pagesize;
	size -= size % (size_t)pagesize;

	int fd = open_test_file(path, sizeof path, size_opt.file, size, O_RDWR);
	struct map m = { fd, size, NULL, size / (size_t)pagesize };

	bench_latency("vm.mmap", do_mmap, &m, 0, 1e-3, "us");

	if (want("vm.prot_fault")) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_sigaction = segv;
		sa.sa_flags = SA_SIGINFO;
		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGSEGV, &sa, NULL) != 0)
			die_errno("sigaction SIGSEGV");
		prot_page = mmap(NULL, (size_t)pagesize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (prot_page == MAP_FAILED)
			die_errno("mmap %s", path);
		prot_page[0] = 0; /* present and dirty: the fault is a protection fault */
		pid_t self = getpid();
		install_usr1_handler();
		usr1_caught = 0;
		double mprotects = bench_baseline(do_mprotect_pair, NULL);
		/* A fault costs about 0.5 us of the 2-3 us a faulting write takes; the rest is the
		 * signal's delivery and return, subtracted as kill(SIGUSR1) less kill(0).  That
		 * handler cost is timed right after each sample of faults, not once per process:
		 * the machine's speed moves for seconds at a time, and a baseline taken at another
		 * moment than the faults made the difference vary by 14% within one process.  It is
		 * the median of three timings of each call, half a sample long, so that one timing
		 * preempted by another process cannot swing the difference (a single timing each
		 * once made both of a tiny run's samples negative). */
		uint64_t n = calibrate(do_prot, NULL);
		uint64_t kn = calibrate(do_kill_usr1, &self) / 2 + 1, k0 = calibrate(do_kill0, &self) / 2 + 1;
		for (int i = 0; i < opt.samples; i++) {
			double t = time_ns(do_prot, NULL, n) / (double)n;
			double usr1[3], zero[3];
			for (int j = 0; j < 3; j++) {
				usr1[j] = time_ns(do_kill_usr1, &self, kn) / (double)kn;
				zero[j] = time_ns(do_kill0, &self, k0) / (double)k0;
			}
			double handler = median_in_place(usr1, 3) - median_in_place(zero, 3);
			emit("vm.prot_fault", (t - mprotects / (double)n - handler) * 1e-3, "us");
		}
		if (usr1_caught == 0)
			die("SIGUSR1 was sent but the handler never ran");
		signal(SIGUSR1, SIG_DFL);
		munmap(prot_page, (size_t)pagesize);
		signal(SIGSEGV, SIG_DFL);
	}

	if (want("vm.page_fault")) {
		/* a fixed shuffle of the pages (the same in every run) */
		m.order = xmalloc(sizeof(size_t) * m.npages);
		for (size_t i = 0; i < m.npages; i++)
			m.order[i] = i;
		uint64_t x = 88172645463325252ULL;
		for (size_t i = m.npages - 1; i > 0; i--) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			size_t j = (size_t)(x % (i + 1));
			size_t t = m.order[i];
			m.order[i] = m.order[j];
			m.order[j] = t;
		}
		double base = bench_baseline(do_map_only, &m);
		bench_samples(do_map_touch, &m, v);
		for (int i = 0; i < opt.samples; i++)
			emit("vm.page_fault", (v[i] - base) / (double)m.npages * 1e-3, "us");
		free(m.order);
	}
	close(fd);
	return 0;
}

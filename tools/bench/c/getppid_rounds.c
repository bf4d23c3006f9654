/* Five rounds of getppid() timed from the first instruction after exec: ns per call, one line each. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long calls = argc > 1 ? atol(argv[1]) : 200000;
	for (int round = 0; round < 5; round++) {
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		for (long i = 0; i < calls; i++)
			syscall(SYS_getppid);
		clock_gettime(CLOCK_MONOTONIC, &b);
		printf("%.3f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / calls);
	}
	return 0;
}

/* A guest program that runs the agent's process markers itself (execution/vm/c/insns.c): N
   times the end of the window, a new start and a getppid (a few kernel blocks in each window).
   The marker flood of issue 45 (G8): tools/bench/insn_marker_flood.py, tests/test_insn_profile.py. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 300000;
	for (long i = 0; i < n; i++) {
		__asm__ volatile(".byte 0x0f,0x1f,0x80,0x50,0x4c,0x30,0x45" ::: "memory");
		__asm__ volatile(".byte 0x0f,0x1f,0x80,0x50,0x4c,0x30,0x53" ::: "memory");
		syscall(SYS_getppid);
	}
	return 0;
}

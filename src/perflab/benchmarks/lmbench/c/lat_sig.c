/*
 * lat_sig - signal costs, in microseconds.
 *
 *   signal.install  one sigaction() call installing a handler for SIGUSR1
 *                   (LMbench: lat_sig install)
 *   signal.handle   handler overhead: kill(getpid(), SIGUSR1) with a handler
 *                   installed - the delivery, the handler and the return from
 *                   it - minus the cost of the same system call delivering
 *                   nothing, kill(getpid(), 0), as LMbench 3 subtracts it
 *                   (LMbench: lat_sig catch, "Signal handler overhead")
 *
 * The cost of an empty timing-loop iteration is subtracted from install.
 */
#include "bench.h"

static void do_install(uint64_t n, void *ctx)
{
	struct sigaction sa, old;
	(void)ctx;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = usr1_handler;
	sigemptyset(&sa.sa_mask);
	for (uint64_t i = 0; i < n; i++)
		if (sigaction(SIGUSR1, &sa, &old) != 0)
			die_errno("sigaction");
}

int main(int argc, char **argv)
{
	bench_init(argc, argv, "lat_sig", "", NULL, "");

	bench_latency("signal.install", do_install, NULL, loop_ns(), 1e-3, "us");

	install_usr1_handler();
	pid_t self = getpid();
	if (want("signal.handle")) {
		double h[BENCH_MAX_SAMPLES];
		usr1_caught = 0;
		double k = bench_baseline(do_kill0, &self);
		bench_samples(do_kill_usr1, &self, h);
		if (usr1_caught == 0)
			die("SIGUSR1 was sent but the handler never ran");
		for (int i = 0; i < opt.samples; i++)
			emit("signal.handle", (h[i] - k) * 1e-3, "us");
	}
	return 0;
}

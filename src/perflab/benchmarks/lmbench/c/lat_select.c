/*
 * lat_select - select() on N file descriptors, in microseconds.
 *
 *   select.fdN   select() with a zero timeout on N descriptors of one regular
 *                file (the file opened N times), all in the write set
 *   select.tcpN  the same on N descriptors of a TCP socket connected over
 *                loopback (one socket, dup()ed N times, as LMbench 3 does)
 *
 * N = 10, 100, 250, 500 (-c LIST).  As in LMbench 3 (lat_select -n N
 * file|tcp) the descriptors are in the write set, so all are ready and the
 * kernel polls every one.  One deliberate difference: LMbench 3 passes N as
 * select's nfds, so only the descriptors numbered below N are examined (2 of
 * 10, about 90 of 100); here nfds is the highest descriptor + 1 and all N are
 * examined.  The cost of an empty timing-loop iteration is subtracted.
 */
#include "bench.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/select.h>
#include <sys/socket.h>

#define MAXN 1000

static int counts[16] = { 10, 100, 250, 500 };
static int ncounts = 4;

struct sel {
	int nfds;
	fd_set set;
};

static void do_select(uint64_t n, void *ctx)
{
	struct sel *s = ctx;
	for (uint64_t i = 0; i < n; i++) {
		fd_set w = s->set;
		struct timeval tv = { 0, 0 };
		if (select(s->nfds, NULL, &w, NULL, &tv) < 0)
			die_errno("select");
	}
}

static void measure(const char *metric, int *fds, int n)
{
	struct sel s;
	FD_ZERO(&s.set);
	s.nfds = 0;
	for (int i = 0; i < n; i++) {
		if (fds[i] >= FD_SETSIZE)
			die("descriptor %d is above FD_SETSIZE (%d)", fds[i], FD_SETSIZE);
		FD_SET(fds[i], &s.set);
		if (fds[i] + 1 > s.nfds)
			s.nfds = fds[i] + 1;
	}
	bench_latency(metric, do_select, &s, loop_ns(), 1e-3, "us");
}

static int handle(int c, const char *arg)
{
	if (c != 'c')
		return 0;
	ncounts = pl_parse_list((char)c, arg, counts, 16);
	for (int i = 0; i < ncounts; i++)
		if (counts[i] < 1 || counts[i] > MAXN)
			die("-c: counts must be 1..%d", MAXN);
	return 1;
}

static char path[4096];

static void cleanup(void)
{
	if (path[0])
		unlink(path);
}

int main(int argc, char **argv)
{
	static int files[MAXN], clients[MAXN];
	int maxn = 0;
	char metric[64];

	bench_init(argc, argv, "lat_select", "c:", handle, "[-c COUNTS]");
	for (int i = 0; i < ncounts; i++)
		if (counts[i] > maxn)
			maxn = counts[i];
	raise_nofile((rlim_t)(maxn + 64));

	/* regular files: one file, opened maxn times */
	int any_file = 0;
	for (int i = 0; i < ncounts; i++) {
		snprintf(metric, sizeof metric, "select.fd%d", counts[i]);
		any_file |= want(metric);
	}
	if (any_file) {
		tmp_path(path, sizeof path, "select");
		atexit(cleanup);
		close(make_file(path, 4096));
		for (int i = 0; i < maxn; i++)
			if ((files[i] = open(path, O_RDWR)) < 0)
				die_errno("open %s", path);
		for (int i = 0; i < ncounts; i++) {
			snprintf(metric, sizeof metric, "select.fd%d", counts[i]);
			measure(metric, files, counts[i]);
		}
		for (int i = 0; i < maxn; i++)
			close(files[i]);
	}

	int any_tcp = 0;
	for (int i = 0; i < ncounts; i++) {
		snprintf(metric, sizeof metric, "select.tcp%d", counts[i]);
		any_tcp |= want(metric);
	}
	if (any_tcp) {
		struct sockaddr_in addr;
		int l = tcp_listen_loopback(64, 0, &addr);
		/* one connected socket, duplicated N times, as LMbench 3 does */
		int c = socket(AF_INET, SOCK_STREAM, 0);
		if (c < 0)
			die_errno("socket");
		if (connect(c, (struct sockaddr *)&addr, sizeof addr) != 0)
			die_errno("connect 127.0.0.1:%d", ntohs(addr.sin_port));
		int a = accept(l, NULL, NULL);
		if (a < 0)
			die_errno("accept");
		clients[0] = c;
		for (int i = 1; i < maxn; i++)
			if ((clients[i] = dup(c)) < 0)
				die_errno("dup");
		for (int i = 0; i < ncounts; i++) {
			snprintf(metric, sizeof metric, "select.tcp%d", counts[i]);
			measure(metric, clients, counts[i]);
		}
		for (int i = 0; i < maxn; i++)
			close(clients[i]);
		close(a);
		close(l);
	}
	return 0;
}

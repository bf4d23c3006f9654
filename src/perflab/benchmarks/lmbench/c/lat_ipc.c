/*
 * lat_ipc - local communication latencies, in microseconds.
 *
 *   lat.pipe         round trip of a 1-byte message between two processes
 *                    through a pair of pipes (LMbench: lat_pipe)
 *   lat.unix         the same through an AF_UNIX stream socket pair (lat_unix)
 *   lat.udp          the same over UDP on 127.0.0.1 (lat_udp localhost)
 *   lat.tcp          the same over a TCP connection on 127.0.0.1, Nagle off
 *                    (lat_tcp localhost)
 *   lat.tcp_connect  socket() + connect() to a listening server on 127.0.0.1,
 *                    wait until the server has accepted and closed the
 *                    connection (read() returns end of file), close()
 *                    (lat_connect localhost, which does not wait: on a busy
 *                    CPU its server falls behind, the listen queue overflows
 *                    and connects stall for a SYN retransmission)
 *
 * The child process echoes; the parent times the round trips.  Both run on
 * one CPU, the first the program may use (bench.h, pin_to_one_cpu; -U unpins):
 * the round trip then includes two context switches, as on the uniprocessors
 * LMbench was designed on, not two cross-CPU wake-ups.
 */
#include "bench.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

struct pair {
	int wr, rd;    /* the parent's ends */
	const char *what;
};

/* one round trip per iteration */
static void do_roundtrip(uint64_t n, void *ctx)
{
	struct pair *p = ctx;
	char c = 'x';
	for (uint64_t i = 0; i < n; i++) {
		if (write(p->wr, &c, 1) != 1)
			die_errno("write (%s)", p->what);
		ssize_t r = read(p->rd, &c, 1);
		if (r != 1) {
			if (r == 0)
				die("%s: the echo process went away", p->what);
			die_errno("read (%s)", p->what);
		}
	}
}

/* the child: echo bytes until end of file */
static void echo(int rd, int wr)
{
	char c;
	for (;;) {
		ssize_t r = read(rd, &c, 1);
		if (r == 0)
			_exit(0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		if (write(wr, &c, 1) != 1)
			_exit(errno == EPIPE ? 0 : 1);
	}
}

static void bench_pipe(void)
{
	int to[2], from[2];
	if (pipe(to) != 0 || pipe(from) != 0)
		die_errno("pipe");
	pid_t pid = fork_child();
	if (pid == 0) {
		close(to[1]);
		close(from[0]);
		echo(to[0], from[1]);
	}
	close(to[0]);
	close(from[1]);
	struct pair p = { to[1], from[0], "pipe" };
	bench_latency("lat.pipe", do_roundtrip, &p, 0, 1e-3, "us");
	close(to[1]);
	close(from[0]);
	kill_child(pid);
}

static void bench_unix(void)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		die_errno("socketpair AF_UNIX");
	pid_t pid = fork_child();
	if (pid == 0) {
		close(sv[0]);
		echo(sv[1], sv[1]);
	}
	close(sv[1]);
	struct pair p = { sv[0], sv[0], "AF_UNIX" };
	bench_latency("lat.unix", do_roundtrip, &p, 0, 1e-3, "us");
	close(sv[0]);
	kill_child(pid);
}

static int inet_socket(int type, struct sockaddr_in *addr)
{
	int fd = socket(AF_INET, type, 0);
	if (fd < 0)
		die_errno("socket");
	memset(addr, 0, sizeof *addr);
	addr->sin_family = AF_INET;
	addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return fd;
}

static void nodelay(int fd)
{
	int one = 1;
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
		die_errno("setsockopt TCP_NODELAY");
}

static void bench_udp(void)
{
	struct sockaddr_in addr;
	socklen_t len = sizeof addr;
	int s = inet_socket(SOCK_DGRAM, &addr);
	if (bind(s, (struct sockaddr *)&addr, sizeof addr) != 0)
		die_errno("bind UDP 127.0.0.1");
	if (getsockname(s, (struct sockaddr *)&addr, &len) != 0)
		die_errno("getsockname");
	pid_t pid = fork_child();
	if (pid == 0) {
		char c;
		struct sockaddr_in from;
		for (;;) {
			socklen_t flen = sizeof from;
			ssize_t r = recvfrom(s, &c, 1, 0, (struct sockaddr *)&from, &flen);
			if (r < 0) {
				if (errno == EINTR)
					continue;
				_exit(1);
			}
			if (sendto(s, &c, 1, 0, (struct sockaddr *)&from, flen) != 1)
				_exit(1);
		}
	}
	close(s);
	struct sockaddr_in me;
	int c = inet_socket(SOCK_DGRAM, &me);
	if (connect(c, (struct sockaddr *)&addr, sizeof addr) != 0)
		die_errno("connect UDP 127.0.0.1:%d", ntohs(addr.sin_port));
	struct pair p = { c, c, "UDP" };
	bench_latency("lat.udp", do_roundtrip, &p, 0, 1e-3, "us");
	close(c);
	kill_child(pid);
}

static void tcp_echo(int fd)
{
	nodelay(fd);
	echo(fd, fd);
}

static void bench_tcp(void)
{
	pid_t pid;
	int c = tcp_connect_child(128, 0, 0, tcp_echo, "connect TCP", &pid);
	nodelay(c);
	struct pair p = { c, c, "TCP" };
	bench_latency("lat.tcp", do_roundtrip, &p, 0, 1e-3, "us");
	close(c);
	kill_child(pid);
}

static void do_connect(uint64_t n, void *ctx)
{
	struct sockaddr_in *addr = ctx;
	for (uint64_t i = 0; i < n; i++) {
		int c = socket(AF_INET, SOCK_STREAM, 0);
		if (c < 0)
			die_errno("socket");
		if (connect(c, (struct sockaddr *)addr, sizeof *addr) != 0)
			die_errno("connect TCP 127.0.0.1:%d", ntohs(addr->sin_port));
		char ch;
		ssize_t r = read(c, &ch, 1);
		if (r != 0)
			die_errno("connect: waiting for the server to close");
		close(c);
	}
}

static void bench_connect(void)
{
	struct sockaddr_in addr;
	int l = tcp_listen_loopback(128, 0, &addr);
	pid_t pid = fork_child();
	if (pid == 0) {
		for (;;) {
			int a = accept(l, NULL, NULL);
			if (a < 0) {
				if (errno == EINTR || errno == ECONNABORTED)
					continue;
				_exit(1);
			}
			close(a);
		}
	}
	close(l);
	/* Every connection leaves a TIME_WAIT socket behind: a sample lasts at
	 * most 50 ms, so a run stays far below the ephemeral port range. */
	double saved = opt.target_ms;
	if (opt.target_ms > 50)
		opt.target_ms = 50;
	bench_latency("lat.tcp_connect", do_connect, &addr, 0, 1e-3, "us");
	opt.target_ms = saved;
	kill_child(pid);
}

int main(int argc, char **argv)
{
	bench_init(argc, argv, "lat_ipc", "", NULL, "");
	static const struct bench_case cases[] = {
		{ "lat.pipe", bench_pipe }, { "lat.unix", bench_unix }, { "lat.udp", bench_udp },
		{ "lat.tcp", bench_tcp }, { "lat.tcp_connect", bench_connect },
	};
	run_wanted(cases, sizeof cases / sizeof cases[0]);
	return 0;
}

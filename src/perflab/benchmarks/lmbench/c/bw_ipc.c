/*
 * bw_ipc - local communication bandwidths, in MB/s (MB = 2^20 bytes).
 *
 *   bw.pipe  a child writes 64 KB chunks into a pipe as fast as it can; the
 *            parent reads them with 64 KB reads (LMbench: bw_pipe, whose
 *            default message is 64 KB)
 *   bw.unix  the same through an AF_UNIX stream socket pair (bw_unix)
 *   bw.tcp   the same over a TCP connection on 127.0.0.1 with 10 MB writes
 *            and reads (-m BYTES) and 1 MB socket buffers, as bw_tcp sets
 *            them: the LMbench summary shows bw_tcp's largest message size,
 *            10 MB
 *
 * The bytes the parent receives per unit of time are the figure; nothing is
 * done with the data on either side.  Both processes run on one CPU, the
 * first the program may use, as lat_ipc's do (see bench.h; -U unpins): unpinned, a
 * virtual machine's cross-CPU wake-ups make these figures vary several-fold
 * from run to run.
 */
#include "bench.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

static size_t chunk = 64 * 1024;
static size_t tcp_chunk = 10 * 1024 * 1024;

struct stream {
	int fd;
	char *buf;
	size_t chunk;
	const char *what;
};

/* one iteration = `chunk` bytes received */
static void do_receive(uint64_t n, void *ctx)
{
	struct stream *s = ctx;
	for (uint64_t i = 0; i < n; i++) {
		size_t left = s->chunk;
		while (left > 0) {
			ssize_t r = read(s->fd, s->buf, left);
			if (r <= 0) {
				if (r < 0 && errno == EINTR)
					continue;
				if (r == 0)
					die("%s: the writer went away", s->what);
				die_errno("read (%s)", s->what);
			}
			left -= (size_t)r;
		}
	}
}

static void writer(int fd, size_t len)
{
	char *buf = xmalloc(len);
	memset(buf, 'w', len);
	for (;;) {
		size_t left = len;
		char *p = buf;
		while (left > 0) {
			ssize_t w = write(fd, p, left);
			if (w < 0) {
				if (errno == EINTR)
					continue;
				_exit(errno == EPIPE || errno == ECONNRESET ? 0 : 1);
			}
			left -= (size_t)w;
			p += w;
		}
	}
}

static void measure(const char *metric, int rfd, size_t len, const char *what)
{
	struct stream s = { rfd, xmalloc(len), len, what };
	memset(s.buf, 0, len);
	bench_bandwidth(metric, do_receive, &s, (double)len);
	free(s.buf);
}

/* a child writes into fds[1] without pause; we read fds[0] */
static void bench_stream(const char *metric, int fds[2], const char *what)
{
	pid_t pid = fork_child();
	if (pid == 0) {
		close(fds[0]);
		writer(fds[1], chunk);
	}
	close(fds[1]);
	measure(metric, fds[0], chunk, what);
	close(fds[0]);
	kill_child(pid);
}

static void bench_pipe(void)
{
	int p[2];
	if (pipe(p) != 0)
		die_errno("pipe");
	bench_stream("bw.pipe", p, "pipe");
}

static void bench_unix(void)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		die_errno("socketpair AF_UNIX");
	bench_stream("bw.unix", sv, "AF_UNIX");
}

static void tcp_writer(int fd)
{
	writer(fd, tcp_chunk);
}

/* 1 MB socket buffers on both ends, as bw_tcp sets them */
static void bench_tcp(void)
{
	pid_t pid;
	int c = tcp_connect_child(8, 1024 * 1024, 1024 * 1024, tcp_writer, "connect", &pid);
	measure("bw.tcp", c, tcp_chunk, "TCP");
	close(c);
	kill_child(pid);
}

static int handle(int c, const char *arg)
{
	if (c == 'm') {
		tcp_chunk = pl_parse_size((char)c, arg);
		return 1;
	}
	if (c == 'p') {
		chunk = pl_parse_size((char)c, arg);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	bench_init(argc, argv, "bw_ipc", "m:p:", handle, "[-m TCP_MESSAGE] [-p PIPE_MESSAGE]");
	if (opt.tiny && tcp_chunk == 10 * 1024 * 1024)
		tcp_chunk = 1024 * 1024;
	if (chunk < 1 || tcp_chunk < 1)
		die("message sizes must be positive");
	static const struct bench_case cases[] = {
		{ "bw.pipe", bench_pipe }, { "bw.unix", bench_unix }, { "bw.tcp", bench_tcp },
	};
	run_wanted(cases, sizeof cases / sizeof cases[0]);
	return 0;
}

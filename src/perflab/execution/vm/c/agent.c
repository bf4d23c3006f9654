/*
 * agent: perflab's init inside a QEMU guest (PID 1 of the initramfs).
 *
 * PID 1 mounts /proc, /sys, /dev, /tmp and /run, then forks a worker and only
 * reaps orphans until the worker ends; then it syncs and powers the guest off
 * (QEMU exits).  The worker is not PID 1 on purpose: perflab's launcher treats
 * a parent of PID 1 as "my runner died" and refuses to start.
 *
 * The worker talks to the host over the second UART, /dev/ttyS1 (raw mode);
 * the kernel's console stays on ttyS0, so no kernel message can fall inside a
 * frame.  Every message, both ways, is one frame:
 *
 *     "@PL " TYPE " " LENGTH " " FNV1A32-HEX "\n"  then LENGTH bytes, then "\n"
 *
 * guest -> host: HELLO (key=value lines: uname, CPUs, memory), RESULT, BYE.
 * host -> guest: RUN, STOP (ask the running launcher to stop), READ, SYMS, MKDIR, STATE, OFF.
 * MKDIR makes a directory (answer MADE), STATE lists what a job could have changed in a
 * shared boot (answer FILE): see make_directory and guest_state.
 * READ's payload is a path; the answer is FILE, the file's content (at most
 * READ_LIMIT bytes; empty when it cannot be read).  SYMS (no payload) answers
 * FILE with the text symbols' lines of /proc/kallsyms (types t T w W), for the
 * host to name kernel addresses (read right after HELLO, before any RUN: a job
 * could mount a forged one): half the bytes of the whole file, whose 3.9 MB
 * (Debian 6.1) took 4.1 s of QEMU's CPU through the UART under icount.
 * RUN's payload is NUL-terminated strings: N, then N launcher arguments
 * (options, "--", the program's argv), then M, then M environment entries,
 * then "1"/"0" (capture stdout), then the root to run in ("" for the
 * initramfs; else a directory, e.g. the host's root over 9p: the launcher is
 * opened first and started with fexecve after chroot, so it need not be in
 * that root).  Optionally then: an interval in ms, K, and K paths of the
 * guest's files (its /proc) to read before the launcher starts, every interval
 * while it runs and after it ended: the monitors of a guest run.  Then H, and
 * per helper (a monitor's perf): its root, N, N arguments, its control and
 * acknowledgement FIFOs, its output file, M and M arguments of a command run
 * (in the same root) once it ended, before the output is read (perf script).  A helper is started before the
 * readings, answers "ping" on its FIFOs when ready, is told "enable" just
 * before the launcher starts and "disable" just after it ended (perf's
 * --control fifo:CTL,ACK), then gets SIGINT; its output file and its stderr
 * come back as readings (an empty output: it did not run).  The worker starts the launcher exactly as
 * the host executor does (stdin /dev/null, stdout and stderr to files, result
 * channel on fd 3) and answers RESULT: "R O E W\n" (four lengths), then the
 * launcher's result text, the stdout, the stderr's tail and the readings: per
 * reading of a file "T_NS PATH_LEN TEXT_LEN\n", the path, the text (whole readings
 * up to READINGS_LIMIT bytes; the host refuses any frame over 256 MiB); a reading
 * left out for that limit is "T_NS PATH_LEN -1\n" and the path, so the host says so
 * rather than "it did not run" (within LEFT_OUT_LIMIT bytes more).  Around the
 * launcher (before the fork, after it is reaped) the worker executes the
 * process markers of perflab's instruction-counting plugin (vm/c/insns.c):
 * no-ops here, window bounds where the plugin is loaded.
 *
 * `agent --remote DIR IDLE`: the same worker on a machine reached over SSH
 * (execution/targets/ssh.py), not PID 1: frames on stdin and stdout (ssh's
 * channel), the launcher and its files in the run directory DIR (HELLO says
 * rundir=DIR, and home=$HOME), which the shell that started the agent
 * removes once it ended.
 * End of its stdin, a write that fails, SIGHUP/SIGTERM/SIGINT, or no byte
 * from the controller for IDLE seconds (it sends TICK frames while it waits):
 * the running launcher is stopped (it stops its benchmark) and reaped, then
 * the agent exits - nothing of the run is left running on the machine.
 *
 * Before HELLO the worker carries out /etc/perflab/setup when the initramfs
 * has one, a line at a time, stopping at the first that fails (HELLO then
 * says setup_error=LINE: REASON):
 *     insmod PATH                            load a module (finit_module)
 *     mount SOURCE TARGET TYPE ro|rw [DATA]  mkdir -p TARGET, then mount
 *     bind SOURCE TARGET                     a recursive bind mount
 *     settle PPM MAX_MS CALLS AGREE          wait for a quiet kernel (below); HELLO says
 *                                            settle=settled|unsettled and what it took
 *
 * settle: right after boot a kernel is still busy with its own work (deferred
 * initcalls, kworkers, RCU) for up to a second of guest time, and a process
 * timed then is slowed by it - on every boot alike, so repeated runs agree on
 * the wrong figure. The worker times rounds of CALLS getppid() calls until
 * AGREE consecutive rounds agree within PPM parts per million (the kernel's
 * own work has stopped stealing the CPU), or MAX_MS of guest time have passed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define PORT "/dev/ttyS1"
/* A guest's paths; under --remote, the run directory's. */
static char launcher_path[4096] = "/usr/lib/perflab/launch";
static char out_path[4096] = "/run/perflab/stdout";
static char err_path[4096] = "/run/perflab/stderr";
static char helper_err_path[4096] = "/run/perflab/helper.err";
static char rundir[4096];
#define LAUNCHER launcher_path
#define OUT_FILE out_path
#define ERR_FILE err_path
#define STDOUT_LIMIT (64L << 20)
#define STDERR_TAIL 4096
#define FRAME_LIMIT (1L << 20)
#define READ_LIMIT (64L << 20)
/* The readings of one RUN, at most: with the stdout and the result this keeps a RESULT frame
 * under the host's limit (machine.FRAME_LIMIT, 256 MiB), which refuses a longer one. */
#ifndef READINGS_LIMIT      /* a test builds the agent with a small one */
#define READINGS_LIMIT (128L << 20)
#endif
/* What the notes of readings left out may add to READINGS_LIMIT. */
#define LEFT_OUT_LIMIT (1L << 20)
/* nopl 0x?..(%rax): 'P' 'L' CHANNEL KIND, a marker for vm/c/insns.c; nothing on a CPU. */
#define MARK_PROCESS_START() __asm__ volatile(".byte 0x0f,0x1f,0x80,0x50,0x4c,0x30,0x53" ::: "memory")
#define MARK_PROCESS_END() __asm__ volatile(".byte 0x0f,0x1f,0x80,0x50,0x4c,0x30,0x45" ::: "memory")

static int port = -1, port_out = -1;
static int remote_mode;          /* --remote: the controller may go away (EOF) */
static unsigned idle_seconds;    /* --remote: the watchdog's bound, 0 for none */
static volatile pid_t running;   /* the launcher of the RUN in progress */

static void end_helpers(void);

/* The controller is gone: stop the launcher (it stops its benchmark), reap it, and the RUN's
 * helpers (a monitor's perf would outlive the agent on an SSH machine), end. */
static void hang_up(int sig)
{
	pid_t child = running;
	if (child > 0) {
		kill(child, SIGTERM);
		waitpid(child, NULL, 0);
	}
	end_helpers();
	_exit(sig ? 128 + sig : 0);
}

static void say(const char *fmt, const char *arg)
{
	/* Diagnostics to the console (ttyS0): they end up in the host's console tail. */
	fprintf(stderr, "perflab-agent: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n");
}

static uint32_t fnv1a(const char *p, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)p[i];
		h *= 16777619u;
	}
	return h;
}

static void write_all(const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(port_out, p, n);
		if (w < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			say("write to the host failed: %s", strerror(errno));
			if (remote_mode)
				hang_up(0);
			_exit(3);
		}
		p += w;
		n -= (size_t)w;
	}
}

static void send_frame(const char *type, const char *payload, size_t n)
{
	char head[80];
	int h = snprintf(head, sizeof head, "@PL %s %zu %08x\n", type, n, fnv1a(payload, n));
	write_all(head, (size_t)h);
	write_all(payload, n);
	write_all("\n", 1);
}

/* Input from the host: bytes are gathered in `in` until a whole frame is there. */
static char *in;
static size_t in_len, in_cap;

static int fill(int block)
{
	if (in_cap - in_len < 4096) {
		in_cap = in_cap ? in_cap * 2 : 65536;
		in = realloc(in, in_cap);
		if (!in) {
			say("%s", "out of memory");
			_exit(3);
		}
	}
	struct pollfd p = {port, POLLIN, 0};
	if (!block && poll(&p, 1, 0) <= 0)
		return 0;
	ssize_t r = read(port, in + in_len, in_cap - in_len);
	if (r < 0)
		return errno == EINTR || errno == EAGAIN ? 0 : -1;
	if (r == 0 && remote_mode)
		hang_up(0);              /* ssh's channel closed: the controller is gone */
	if (r > 0 && idle_seconds)
		alarm(idle_seconds);
	in_len += (size_t)r;
	return (int)r;
}

/* A whole frame at the start of `in`: its type and payload (copied), 1; else 0. Junk before "@PL " is dropped. */
static int take_frame(char *type, char **payload, size_t *n)
{
	for (;;) {
		char *start = memmem(in, in_len, "@PL ", 4);
		if (!start) {
			if (in_len > 3) {      /* keep a possible partial marker */
				memmove(in, in + in_len - 3, 3);
				in_len = 3;
			}
			return 0;
		}
		if (start != in) {
			in_len -= (size_t)(start - in);
			memmove(in, start, in_len);
		}
		char *nl = memchr(in, '\n', in_len);
		if (!nl)
			return 0;
		size_t len;
		unsigned hash;
		char t[16];
		*nl = '\0';
		if (sscanf(in, "@PL %15s %zu %x", t, &len, &hash) != 3 || len > FRAME_LIMIT) {
			say("bad frame header from the host: %s", in);
			in_len -= (size_t)(nl + 1 - in);
			memmove(in, nl + 1, in_len);
			continue;
		}
		size_t head = (size_t)(nl + 1 - in);
		if (in_len < head + len + 1) {
			*nl = '\n';
			return 0;
		}
		char *body = in + head;
		if (fnv1a(body, len) != hash) {
			say("frame %s from the host failed its checksum", t);
			in_len -= head + len + 1;
			memmove(in, in + head + len + 1, in_len);
			continue;
		}
		*payload = malloc(len + 1);
		memcpy(*payload, body, len);
		(*payload)[len] = '\0';
		*n = len;
		strcpy(type, t);
		in_len -= head + len + 1;
		memmove(in, in + head + len + 1, in_len);
		return 1;
	}
}

static void wait_frame(char *type, char **payload, size_t *n)
{
	while (!take_frame(type, payload, n))
		if (fill(1) < 0) {
			say("reading from the host failed: %s", strerror(errno));
			_exit(3);
		}
}

static char setup_error[1024];
static char settle_facts[512];
/* What each setup line took by the guest's clock, "LINE NS|" each (the line cut to 60 bytes):
 * HELLO says it (setup_times=), and the host records the modules' part (vm_boot_modules). */
static char setup_times[4096];
/* The guest's clock (CLOCK_BOOTTIME: since the kernel's clock started) when PID 1 began: HELLO
 * says it, and when HELLO was sent, so a boot splits into the kernel's part and the agent's
 * (instruction-time under icount, and so the same on every boot). 0 under --remote. */
static long long init_ns;

static long long boot_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Time rounds of `calls` getppid() until `agree` rounds in a row agree within `ppm`. */
static int settle(long ppm, long max_ms, long calls, int agree)
{
	long long last[64], began = now_ns(), elapsed = 0;
	long rounds = 0, spread_ppm = -1;
	if (ppm < 1 || max_ms < 1 || calls < 1 || agree < 2 || agree > 64) {
		errno = EINVAL;
		return -1;
	}
	for (;;) {
		long long t0 = now_ns();
		for (long i = 0; i < calls; i++)
			syscall(SYS_getppid);
		long long t1 = now_ns();
		last[rounds % agree] = t1 - t0;
		rounds++;
		elapsed = t1 - began;
		if (rounds >= agree) {
			long long lo = last[0], hi = last[0];
			for (int i = 1; i < agree; i++) {
				lo = last[i] < lo ? last[i] : lo;
				hi = last[i] > hi ? last[i] : hi;
			}
			spread_ppm = lo > 0 ? (long)((hi - lo) * 1000000LL / lo) : -1;
			if (spread_ppm >= 0 && spread_ppm <= ppm)
				break;
		}
		if (elapsed >= max_ms * 1000000LL)
			break;
	}
	snprintf(settle_facts, sizeof settle_facts,
		 "settle=%s\nsettle_ns=%lld\nsettle_rounds=%ld\nsettle_round_ns=%lld\nsettle_spread_ppm=%ld\n",
		 spread_ppm >= 0 && spread_ppm <= ppm ? "settled" : "unsettled", elapsed, rounds,
		 last[(rounds - 1) % agree], spread_ppm);
	return 0;
}

static int mkdirs(const char *path)
{
	char buf[4096];
	snprintf(buf, sizeof buf, "%s", path);
	for (char *p = buf + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			mkdir(buf, 0755);
			*p = '/';
		}
	return mkdir(buf, 0755) == 0 || errno == EEXIST ? 0 : -1;
}

static int setup_line(char *line)
{
	char *w[6] = {0};
	int n = 0;
	for (char *tok = strtok(line, " "); tok && n < 6; tok = strtok(NULL, " "))
		w[n++] = tok;
	if (n == 2 && strcmp(w[0], "insmod") == 0) {
		int fd = open(w[1], O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return -1;
		long r = syscall(SYS_finit_module, fd, "", 0);
		close(fd);
		return r == 0 || errno == EEXIST ? 0 : -1;
	}
	if (n >= 5 && strcmp(w[0], "mount") == 0) {
		unsigned long flags = strcmp(w[4], "ro") == 0 ? MS_RDONLY : 0;
		if (mkdirs(w[2]) != 0)
			return -1;
		/* A disk's node appears once its driver has probed it: wait a little for it. */
		for (int i = 0; i < 50; i++) {
			if (mount(w[1], w[2], w[3], flags, w[5]) == 0)
				return 0;
			if (errno != ENOENT || w[1][0] != '/')
				return -1;
			usleep(100000);
		}
		return -1;
	}
	if (n == 3 && strcmp(w[0], "bind") == 0)
		return mount(w[1], w[2], NULL, MS_BIND | MS_REC, NULL);
	if (n == 5 && strcmp(w[0], "settle") == 0)
		return settle(atol(w[1]), atol(w[2]), atol(w[3]), atoi(w[4]));
	errno = EINVAL;
	return -1;
}

static void setup(void)
{
	FILE *f = fopen("/etc/perflab/setup", "r");
	char line[1024], copy[1024];
	while (f && fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = '\0';
		if (!line[0])
			continue;
		snprintf(copy, sizeof copy, "%s", line);
		long long began = boot_ns();
		int failed = setup_line(line) != 0;
		size_t used = strlen(setup_times);
		snprintf(setup_times + used, sizeof setup_times - used, "%.60s %lld|", copy, boot_ns() - began);
		if (failed) {
			snprintf(setup_error, sizeof setup_error, "%.900s: %s", copy, strerror(errno));
			say("setup failed: %s", setup_error);
			break;
		}
	}
	if (f)
		fclose(f);
}

static void hello(void)
{
	struct utsname u;
	char text[8192], model[256] = "", line[512];
	long mem_kib = 0;
	uname(&u);
	FILE *f = fopen("/proc/cpuinfo", "r");
	while (f && fgets(line, sizeof line, f))
		if (!model[0] && strncmp(line, "model name", 10) == 0) {
			char *colon = strchr(line, ':');
			if (colon) {
				snprintf(model, sizeof model, "%s", colon + 2);
				model[strcspn(model, "\n")] = '\0';
			}
		}
	if (f)
		fclose(f);
	f = fopen("/proc/meminfo", "r");
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "MemTotal: %ld kB", &mem_kib) == 1)
			break;
	if (f)
		fclose(f);
	int n = snprintf(text, sizeof text,
			 "release=%s\nversion=%s\nmachine=%s\ncpus=%ld\ncpu_model=%s\nmemory_kib=%ld\nlauncher=%d\n"
			 "setup_error=%s\nrundir=%s\nhostname=%s\nhome=%s\ninit_ns=%lld\nhello_ns=%lld\nsetup_times=%s\n%s",
			 u.release, u.version, u.machine, sysconf(_SC_NPROCESSORS_ONLN), model, mem_kib,
			 access(LAUNCHER, X_OK) == 0, setup_error, rundir, u.nodename,
			 rundir[0] && getenv("HOME") ? getenv("HOME") : "", init_ns, rundir[0] ? 0 : boot_ns(),
			 setup_times, settle_facts);
	if (n >= (int)sizeof text)
		n = (int)sizeof text - 1;      /* cut, never read past the buffer */
	send_frame("HELLO", text, (size_t)n);
}

static char *read_file(const char *path, long keep_head, long keep_tail, size_t *n)
{
	*n = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return calloc(1, 1);
	off_t size = lseek(fd, 0, SEEK_END), from = 0;
	if (keep_head && size > keep_head)
		size = keep_head;
	if (keep_tail && size > keep_tail)
		from = size - keep_tail;
	char *buf = malloc((size_t)(size - from) + 1);
	ssize_t r = pread(fd, buf, (size_t)(size - from), from);
	close(fd);
	*n = r > 0 ? (size_t)r : 0;
	return buf;
}

/* A whole file, also one whose size is not known ahead (/proc), up to READ_LIMIT bytes. */
static char *read_whole(const char *path, size_t *n)
{
	size_t cap = 1 << 16;
	char *buf = malloc(cap);
	*n = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return buf;
	for (;;) {
		if (*n == cap) {
			if (cap >= (size_t)READ_LIMIT)
				break;
			cap *= 2;
			buf = realloc(buf, cap);
		}
		ssize_t r = read(fd, buf + *n, cap - *n);
		if (r <= 0)
			break;
		*n += (size_t)r;
	}
	close(fd);
	return buf;
}

/* /proc/kallsyms's text symbols ("ADDRESS TYPE NAME[\tMODULE]" lines of type t, T, w or W),
 * the only ones the host names addresses with; the rest is half the file. */
static char *text_symbols(size_t *n)
{
	size_t len = 0, kept = 0;
	char *buf = read_whole("/proc/kallsyms", &len);
	for (size_t at = 0; at < len;) {
		char *end = memchr(buf + at, '\n', len - at);
		size_t line = end ? (size_t)(end - (buf + at)) + 1 : len - at;
		char *space = memchr(buf + at, ' ', line);
		if (space && (size_t)(space - (buf + at)) + 2 < line && space[2] == ' ' && strchr("tTwW", space[1])) {
			memmove(buf + kept, buf + at, line);
			kept += line;
		}
		at += line;
	}
	*n = kept;
	return buf;
}

/* The readings of one RUN: every file, at one instant, appended to a buffer. */
struct readings {
	char **paths;
	long npaths;
	char *buf;
	size_t len, cap;
};

static void append(struct readings *r, const char *p, size_t n)
{
	if (r->len + n > r->cap) {
		while (r->len + n > r->cap)
			r->cap = r->cap ? r->cap * 2 : 1 << 16;
		r->buf = realloc(r->buf, r->cap);
	}
	memcpy(r->buf + r->len, p, n);
	r->len += n;
}

static void take_readings(struct readings *r)
{
	long long t = now_ns();
	for (long i = 0; i < r->npaths; i++) {
		size_t n = 0;
		char *text = read_whole(r->paths[i], &n);
		char head[96];
		int h = snprintf(head, sizeof head, "%lld %zu %zu\n", t, strlen(r->paths[i]), n);
		if (r->len + (size_t)h + strlen(r->paths[i]) + n > (size_t)READINGS_LIMIT) {
			free(text);      /* whole readings only: the ones past the limit are left out, and noted */
			h = snprintf(head, sizeof head, "%lld %zu -1\n", t, strlen(r->paths[i]));
			if (r->len + (size_t)h + strlen(r->paths[i]) <= (size_t)(READINGS_LIMIT + LEFT_OUT_LIMIT)) {
				append(r, head, (size_t)h);
				append(r, r->paths[i], strlen(r->paths[i]));
			}
			continue;
		}
		append(r, head, (size_t)h);
		append(r, r->paths[i], strlen(r->paths[i]));
		append(r, text, n);
		free(text);
	}
}

/* A helper around one RUN (see the top): started, driven through its control FIFO, stopped. */
#define HELPER_ERR helper_err_path
#define HELPER_WAIT_MS 120000
struct helper {
	pid_t pid;
	int ctl, ack;
	char *out, *root;
	char **post;
	int ok;
};

/* --remote, while a helper is waited for: what perflab sent meanwhile, read (its TICKs), for the
 * watchdog counts from the last byte read and a long perf script is no silent controller. */
static void keep_reading(void)
{
	if (remote_mode)
		fill(0);
}

/* The guest's busy time in ns (/proc/stat: all but idle and iowait), -1 if unread. Under icount
 * (sleep=off) an idle guest's clock jumps from timer to timer, so while a helper waits for the
 * host (perf paging itself in over 9p) the guest's clock runs far ahead of the host's: 120 s of
 * it passed in about a second on a loaded host and the helper was left behind. Its busy time
 * does not move while it only waits. */
static long long busy_ns(void)
{
	char buf[256];
	int fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
	if (fd >= 0)
		close(fd);
	unsigned long long v[8] = {0};
	if (n <= 0)
		return -1;
	buf[n] = 0;
	if (sscanf(buf, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
		   &v[5], &v[6], &v[7]) < 4)
		return -1;
	long hz = sysconf(_SC_CLK_TCK);
	return (long long)((v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) * (1000000000ULL / (unsigned long long)(hz > 0 ? hz : 100)));
}

/* What a wait for a helper (HELPER_WAIT_MS) is counted in: wall time on an SSH machine
 * (--remote), the guest's busy time in a guest (busy_ns). */
typedef long long (*wait_clock)(void);
static wait_clock helper_clock(void)
{
	return !remote_mode && busy_ns() >= 0 ? busy_ns : now_ns;
}

/* Write a command on the helper's control FIFO and wait for its "ack". */
static int helper_say(struct helper *h, const char *what)
{
	char line[64];
	int n = snprintf(line, sizeof line, "%s\n", what);
	if (write(h->ctl, line, (size_t)n) != n)
		return -1;
	wait_clock clock_of_wait = helper_clock();
	long long until = clock_of_wait() + HELPER_WAIT_MS * 1000000LL;
	char got[64];
	size_t have = 0;
	while (clock_of_wait() < until) {
		struct pollfd fd = {h->ack, POLLIN, 0};
		if (poll(&fd, 1, 100) <= 0) {
			int status;
			keep_reading();
			if (waitpid(h->pid, &status, WNOHANG) == h->pid) {
				h->pid = -1;
				return -1;
			}
			continue;
		}
		ssize_t r = read(h->ack, got + have, sizeof got - 1 - have);
		if (r > 0) {
			have += (size_t)r;
			got[have] = 0;
			if (strstr(got, "ack\n"))
				return 0;
			if (have >= sizeof got - 1)
				have = 0;
		}
	}
	return -1;
}

/* A helper's program started in `root` (chroot; "" for the initramfs): stdin and stdout on
 * /dev/null, stderr appended to HELPER_ERR, a fixed environment. Its pid, -1 if fork failed. */
static pid_t spawn_in(const char *root, char **argv)
{
	pid_t pid = fork();
	if (pid == 0) {
		/* A process group of its own: what it starts (perf script | awk under sh) ends with it
		 * (kill_group), not left running on an SSH machine once the agent is gone. */
		setpgid(0, 0);
		int nul = open("/dev/null", O_RDWR);
		int err = open(HELPER_ERR, O_WRONLY | O_CREAT | O_APPEND, 0600);
		dup2(nul, 0);
		dup2(nul, 1);
		dup2(err, 2);
		if (root && root[0] && (chroot(root) != 0 || chdir("/") != 0))
			_exit(127);
		char *env[] = {"PATH=/usr/bin:/bin:/usr/sbin:/sbin", "HOME=/tmp", "LANG=C", NULL};
		execve(argv[0], argv, env);
		_exit(127);
	}
	return pid;
}

static void helper_start(struct helper *h, char *root, char **argv, char *ctl, char *ack)
{
	unlink(ctl);
	unlink(ack);
	if (mkfifo(ctl, 0600) != 0 || mkfifo(ack, 0600) != 0)
		return;
	/* Read-write opens of a FIFO never block, whether or not the helper has opened its end. */
	h->ctl = open(ctl, O_RDWR | O_CLOEXEC);
	h->ack = open(ack, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	h->pid = spawn_in(root, argv);
	h->ok = h->pid > 0 && helper_say(h, "ping") == 0;
}

/* The helpers of the RUN under way, and a helper's command after it: what hang_up ends too. */
static struct helper *live_helpers;
static long live_nhelpers;
static volatile pid_t post_running;

/* A helper or its command after it, and every process it started (spawn_in: its own group), killed and reaped. */
static void kill_group(pid_t pid)
{
	kill(-pid, SIGKILL);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static void end_helpers(void)
{
	for (long i = 0; i < live_nhelpers; i++)
		if (live_helpers[i].pid > 0)
			kill_group(live_helpers[i].pid);
	pid_t post = post_running;
	if (post > 0)
		kill_group(post);
}

/* The helper's command after it ended (perf script), to its end. */
static void helper_post(struct helper *h)
{
	if (!h->post || !h->post[0])
		return;
	pid_t pid = spawn_in(h->root, h->post);
	int status;
	if (pid > 0) {
		post_running = pid;
		if (!remote_mode)
			waitpid(pid, &status, 0);
		while (remote_mode && waitpid(pid, &status, WNOHANG) == 0) {
			keep_reading();
			poll(NULL, 0, 20);
		}
		post_running = 0;
	}
}

static void helper_stop(struct helper *h)
{
	if (h->pid > 0) {
		kill(h->pid, SIGINT);     /* perf writes its output and exits */
		wait_clock clock_of_wait = helper_clock();
		long long until = clock_of_wait() + HELPER_WAIT_MS * 1000000LL;
		int status;
		while (waitpid(h->pid, &status, WNOHANG) == 0) {
			if (clock_of_wait() > until) {
				kill_group(h->pid);
				break;
			}
			keep_reading();
			poll(NULL, 0, 10);
		}
		h->pid = -1;      /* reaped: hang_up must not signal its number again */
	}
	if (h->ctl >= 0)
		close(h->ctl);
	if (h->ack >= 0)
		close(h->ack);
}

/* The next NUL-terminated string of a payload (NULL at its end). */
static char *next_string(char **p, char *end)
{
	if (*p >= end)
		return NULL;
	char *s = *p;
	*p += strnlen(s, (size_t)(end - s)) + 1;
	return s;
}

/* One RUN: the launcher, as the host executor starts it; the RESULT frame back. */
static void run(char *payload, size_t n)
{
	char *p = payload, *end = payload + n;
	char **args = NULL, **env = NULL;
	long nargs = 0, nenv = 0;
	char *s = next_string(&p, end);
	nargs = s ? atol(s) : 0;
	args = calloc((size_t)nargs + 2, sizeof *args);
	args[0] = LAUNCHER;
	for (long i = 0; i < nargs; i++)
		args[i + 1] = next_string(&p, end);
	s = next_string(&p, end);
	nenv = s ? atol(s) : 0;
	env = calloc((size_t)nenv + 1, sizeof *env);
	for (long i = 0; i < nenv; i++)
		env[i] = next_string(&p, end);
	s = next_string(&p, end);
	int capture = s && s[0] == '1';
	char *root = next_string(&p, end);
	s = next_string(&p, end);
	long interval_ms = s ? atol(s) : 0;
	struct readings readings = {0};
	s = next_string(&p, end);
	readings.npaths = s ? atol(s) : 0;
	readings.paths = calloc((size_t)readings.npaths + 1, sizeof *readings.paths);
	for (long i = 0; i < readings.npaths; i++)
		readings.paths[i] = next_string(&p, end);
	for (long i = 0; i < readings.npaths; i++)
		if (!readings.paths[i])
			readings.npaths = i;
	s = next_string(&p, end);
	long nhelpers = s ? atol(s) : 0;
	struct helper *helpers = calloc((size_t)nhelpers + 1, sizeof *helpers);
	live_helpers = helpers;
	live_nhelpers = nhelpers;
	unlink(HELPER_ERR);
	for (long i = 0; i < nhelpers; i++) {
		char *hroot = next_string(&p, end);
		s = next_string(&p, end);
		long hargc = s ? atol(s) : 0;
		char **hargv = calloc((size_t)hargc + 1, sizeof *hargv);
		for (long k = 0; k < hargc; k++)
			hargv[k] = next_string(&p, end);
		char *ctl = next_string(&p, end), *ack = next_string(&p, end);
		helpers[i].out = next_string(&p, end);
		helpers[i].root = hroot;
		s = next_string(&p, end);
		long npost = s ? atol(s) : 0;
		helpers[i].post = calloc((size_t)npost + 1, sizeof *helpers[i].post);
		for (long k = 0; k < npost; k++)
			helpers[i].post[k] = next_string(&p, end);
		helpers[i].ctl = helpers[i].ack = -1;
		if (hargc > 0 && hargv[hargc - 1] && ctl && ack && helpers[i].out)
			helper_start(&helpers[i], hroot, hargv, ctl, ack);
		free(hargv);
	}

	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC) != 0) {
		say("pipe: %s", strerror(errno));
		_exit(3);
	}
	take_readings(&readings);
	for (long i = 0; i < nhelpers; i++)
		if (helpers[i].ok)
			helpers[i].ok = helper_say(&helpers[i], "enable") == 0;
	long long due = now_ns() + interval_ms * 1000000LL;
	MARK_PROCESS_START();
	pid_t child = fork();
	if (child == 0) {
		int nul = open("/dev/null", O_RDWR);
		signal(SIGPIPE, SIG_DFL);      /* --remote ignores it; the benchmark must not */
		int out = capture ? open(OUT_FILE, O_WRONLY | O_CREAT | O_TRUNC, 0600) : nul;
		int err = open(ERR_FILE, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(nul, 0);
		dup2(out, 1);
		dup2(err, 2);
		dup2(pipefd[1], 3);    /* dup2 clears close-on-exec on the copy */
		for (int fd = 4; fd < 64; fd++)
			close(fd);
		if (root && root[0]) {
			/* The launcher lives in the initramfs: opened here, started after chroot. */
			int self = open(LAUNCHER, O_RDONLY | O_CLOEXEC);
			if (self < 0 || chroot(root) != 0 || chdir("/") != 0) {
				say("cannot enter %s", root);
				_exit(127);
			}
			fexecve(self, args, env);
			_exit(127);
		}
		execve(LAUNCHER, args, env);
		_exit(127);
	}
	running = child;
	close(pipefd[1]);
	char *res = malloc(65536);
	size_t res_len = 0;
	int stop_sent = 0;
	for (;;) {
		struct pollfd fds[2] = {{pipefd[0], POLLIN, 0}, {port, POLLIN, 0}};
		int wait_ms = -1;
		if (readings.npaths && interval_ms > 0) {
			long long left = due - now_ns();
			if (left <= 0) {
				take_readings(&readings);
				due += interval_ms * 1000000LL * (1 + (now_ns() - due) / (interval_ms * 1000000LL));
				continue;
			}
			wait_ms = (int)((left + 999999) / 1000000);
		}
		int ready = poll(fds, 2, wait_ms);
		if (ready < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) {   /* a pipe's end: POLLHUP alone */
			char type[16], *body;
			size_t len;
			fill(0);
			while (take_frame(type, &body, &len)) {
				if (strcmp(type, "STOP") == 0 && !stop_sent && child > 0) {
					kill(child, SIGTERM);     /* the launcher stops its benchmark, reports interrupted=1 */
					stop_sent = 1;
				}
				free(body);
			}
		}
		if (fds[0].revents & (POLLIN | POLLHUP)) {
			ssize_t r = read(pipefd[0], res + res_len, 65535 - res_len);
			if (r <= 0)
				break;
			res_len += (size_t)r;
			if (res_len >= 65535)
				break;
		}
	}
	close(pipefd[0]);
	if (child > 0)
		waitpid(child, NULL, 0);
	running = 0;
	MARK_PROCESS_END();
	for (long i = 0; i < nhelpers; i++)
		if (helpers[i].ok)
			helper_say(&helpers[i], "disable");
	take_readings(&readings);
	for (long i = 0; i < nhelpers; i++) {
		helper_stop(&helpers[i]);
		if (helpers[i].ok)
			helper_post(&helpers[i]);
		free(helpers[i].post);
		char *paths[2] = {helpers[i].out, HELPER_ERR};
		struct readings one = {paths, 2, readings.buf, readings.len, readings.cap};
		if (!helpers[i].ok)
			unlink(helpers[i].out);      /* not enabled: nothing it wrote counts */
		take_readings(&one);
		readings.buf = one.buf, readings.len = one.len, readings.cap = one.cap;
		unlink(helpers[i].out);
	}
	live_nhelpers = 0;
	live_helpers = NULL;
	free(helpers);
	size_t out_len = 0, err_len = 0;
	char *out = capture ? read_file(OUT_FILE, STDOUT_LIMIT, 0, &out_len) : calloc(1, 1);
	char *err = read_file(ERR_FILE, 0, STDERR_TAIL, &err_len);
	char head[96];
	int h = snprintf(head, sizeof head, "%zu %zu %zu %zu\n", res_len, out_len, err_len, readings.len);
	size_t total = (size_t)h + res_len + out_len + err_len + readings.len;
	char *msg = malloc(total);
	memcpy(msg, head, (size_t)h);
	memcpy(msg + h, res, res_len);
	memcpy(msg + h + res_len, out, out_len);
	memcpy(msg + h + res_len + out_len, err, err_len);
	if (readings.len)
		memcpy(msg + h + res_len + out_len + err_len, readings.buf, readings.len);
	send_frame("RESULT", msg, total);
	unlink(OUT_FILE);
	unlink(ERR_FILE);
	free(msg);
	free(out);
	free(err);
	free(res);
	free(args);
	free(env);
	free(readings.paths);
	free(readings.buf);
}

static int serve(void);

static int worker(void)
{
	port = open(PORT, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (port < 0) {
		say("cannot open " PORT ": %s (a kernel with 8250 serial ports is needed)", strerror(errno));
		return 3;
	}
	struct termios t;
	if (tcgetattr(port, &t) == 0) {
		cfmakeraw(&t);
		cfsetspeed(&t, B115200);
		tcsetattr(port, TCSANOW, &t);
	}
	port_out = port;
	setup();
	hello();
	return serve();
}

/* --remote DIR IDLE: the worker over ssh's channel (see the top). */
static int remote(const char *dir, long idle)
{
	snprintf(rundir, sizeof rundir, "%s", dir);
	snprintf(launcher_path, sizeof launcher_path, "%s/launch", dir);
	snprintf(out_path, sizeof out_path, "%s/stdout", dir);
	snprintf(err_path, sizeof err_path, "%s/stderr", dir);
	snprintf(helper_err_path, sizeof helper_err_path, "%s/helper.err", dir);
	port = 0;
	port_out = 1;
	remote_mode = 1;
	idle_seconds = idle > 0 ? (unsigned)idle : 0;
	signal(SIGPIPE, SIG_IGN);       /* a closed channel is a failed write: hang_up */
	signal(SIGHUP, hang_up);
	signal(SIGTERM, hang_up);
	signal(SIGINT, hang_up);
	signal(SIGALRM, hang_up);
	if (idle_seconds)
		alarm(idle_seconds);
	hello();
	return serve();
}

/* MKDIR ROOT\0PATH\0: `mkdir -p PATH` as seen from ROOT ("" for the initramfs's), in a
 * child that chroots there, as the launcher would: no process is started, which under icount
 * cost 0.07-0.09 s a directory. The answer is MADE: "" done, else the reason. */
static void make_directory(char *payload, size_t n)
{
	char *p = payload, *end = payload + n;
	char *root = next_string(&p, end), *path = next_string(&p, end);
	char why[256] = "";
	if (!root || !path || path[0] != '/') {
		snprintf(why, sizeof why, "expected a root and an absolute path");
	} else {
		pid_t child = fork();
		if (child == 0) {
			if (root[0] && (chroot(root) != 0 || chdir("/") != 0))
				_exit(errno & 0xff);
			_exit(mkdirs(path) == 0 ? 0 : (errno & 0xff));
		}
		int status = 0;
		if (child < 0)
			snprintf(why, sizeof why, "fork: %s", strerror(errno));
		else if (waitpid(child, &status, 0) < 0 || !WIFEXITED(status))
			snprintf(why, sizeof why, "its child ended abnormally");
		else if (WEXITSTATUS(status))
			snprintf(why, sizeof why, "%s", strerror(WEXITSTATUS(status)));
	}
	send_frame("MADE", why, strlen(why));
}

/* STATE: what a job could have changed for the next ones in a shared boot (machine.py's
 * Guest.state): the mount table, "@@files", then the files of the initramfs's root (its own
 * file system only: not /proc, /tmp, the host's root or a disk, which are mounts) whose
 * modification time is not older than the first STATE's, one a line. Read natively: the
 * same listing through busybox's sh, cat and find cost 0.15-0.45 s a job under icount. */
static struct timespec state_mark;
static int state_marked;

static int newer(const struct stat *st)
{
	return st->st_mtim.tv_sec > state_mark.tv_sec ||
	       (st->st_mtim.tv_sec == state_mark.tv_sec && st->st_mtim.tv_nsec >= state_mark.tv_nsec);
}

static void list_changed(struct readings *out, char *path, size_t len, dev_t dev)
{
	DIR *d = opendir(len ? path : "/");
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		size_t more = strlen(e->d_name) + 1;
		if (len + more >= 4096)
			continue;
		path[len] = '/';
		memcpy(path + len + 1, e->d_name, more);
		struct stat st;
		if (lstat(path, &st) != 0 || st.st_dev != dev)
			continue;
		if (S_ISDIR(st.st_mode)) {
			list_changed(out, path, len + more, dev);
		} else if (newer(&st)) {
			append(out, path, len + more);
			append(out, "\n", 1);
		}
	}
	path[len] = '\0';
	closedir(d);
}

static void guest_state(void)
{
	struct readings out = {0};
	struct stat root;
	char path[4096] = "";
	if (!state_marked) {
		/* The coarse clock is what stamps a file's mtime: a file written later is not older. */
		clock_gettime(CLOCK_REALTIME_COARSE, &state_mark);
		state_marked = 1;
	}
	size_t n = 0;
	char *mounts = read_whole("/proc/self/mountinfo", &n);
	append(&out, mounts, n);
	free(mounts);
	append(&out, "@@files\n", 8);
	if (lstat("/", &root) == 0)
		list_changed(&out, path, 0, root.st_dev);
	send_frame("FILE", out.buf ? out.buf : "", out.len);
	free(out.buf);
}

/* Frames from the controller, one at a time, until OFF. */
static int serve(void)
{
	for (;;) {
		char type[16], *payload;
		size_t n;
		wait_frame(type, &payload, &n);
		if (strcmp(type, "RUN") == 0) {
			run(payload, n);
		} else if (strcmp(type, "READ") == 0) {
			char *path = malloc(n + 1);
			memcpy(path, payload, n);
			path[n] = 0;
			size_t len = 0;
			char *data = read_whole(path, &len);
			send_frame("FILE", data, len);
			free(data);
			free(path);
		} else if (strcmp(type, "SYMS") == 0) {
			size_t len = 0;
			char *data = text_symbols(&len);
			send_frame("FILE", data, len);
			free(data);
		} else if (strcmp(type, "MKDIR") == 0) {
			make_directory(payload, n);
		} else if (strcmp(type, "STATE") == 0) {
			guest_state();
		} else if (strcmp(type, "OFF") == 0) {
			send_frame("BYE", "", 0);
			tcdrain(port);
			free(payload);
			return 0;
		}
		free(payload);   /* a STOP between runs: nothing to stop */
	}
}

static void mount_or_say(const char *source, const char *target, const char *type)
{
	mkdir(target, 0755);
	if (mount(source, target, type, 0, NULL) != 0)
		say("cannot mount %s", target);
}

/* The loopback interface comes up down in a bare initramfs; benchmarks over
 * 127.0.0.1 (TCP, UDP, select on sockets) need it up. */
static void loopback_up(void)
{
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	memset(&ifr, 0, sizeof ifr);
	strcpy(ifr.ifr_name, "lo");
	if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) != 0 ||
	    (ifr.ifr_flags |= IFF_UP, ioctl(s, SIOCSIFFLAGS, &ifr) != 0))
		say("%s", "cannot bring the loopback interface up");
	if (s >= 0)
		close(s);
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "--remote") == 0)
		return remote(argv[2], atol(argv[3]));
	if (getpid() != 1) {
		fprintf(stderr, "perflab-agent: this is the init of perflab's VM guest, not a command\n");
		return 2;
	}
	init_ns = boot_ns();
	mount_or_say("proc", "/proc", "proc");
	mount_or_say("sysfs", "/sys", "sysfs");
	/* devtmpfs has every device node; without it, the nodes the initramfs carries stay. */
	if (mount("devtmpfs", "/dev", "devtmpfs", 0, NULL) != 0)
		say("%s", "no devtmpfs: using the initramfs's /dev");
	mount_or_say("tmpfs", "/tmp", "tmpfs");
	mount_or_say("tmpfs", "/run", "tmpfs");
	mkdir("/run/perflab", 0700);
	loopback_up();
	setenv("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", 1);

	pid_t w = fork();
	if (w == 0)
		_exit(worker());
	for (;;) {
		int status;
		pid_t got = wait(&status);
		if (got == w || (got < 0 && errno == ECHILD)) {
			if (got == w && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
				say("%s", "the worker ended abnormally; powering off");
			break;
		}
	}
	sync();
	reboot(RB_POWER_OFF);
	/* No ACPI power-off in this kernel: a reboot makes QEMU (-no-reboot) exit too. */
	reboot(RB_AUTOBOOT);
	for (;;)
		pause();
}

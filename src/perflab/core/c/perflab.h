/*
 * perflab.h - the runtime every perflab C program shares.
 *
 * Written for perflab.  A program includes it (cbuild puts this directory on
 * the include path) and gets:
 *
 *   - errors: pl_die, pl_die_errno (exit 1), pl_usage_error (exit 2), each
 *     one line "<program>: <message>" on stderr;
 *   - time: pl_now_ns (CLOCK_MONOTONIC, ns), pl_now (seconds),
 *     pl_seconds_since (seconds from a pl_now_ns instant, ns resolution);
 *   - options: pl_parse_uint, pl_parse_real, pl_parse_seconds, pl_parse_choice,
 *     pl_parse_size
 *     (K/M/G suffixes, powers of 1024), pl_parse_list (2,4,8) and
 *     pl_parse_cpu_list (0,2-3); a bad value is one line naming the option,
 *     exit 2;
 *   - CPUs: pl_allowed_cpus, pl_pin (a process or thread to one CPU),
 *     pl_pin_set (to a set), pl_thread_attr_cpu (a thread created on one CPU);
 *   - signals: pl_on_signal (sigaction, or die), pl_ignore_sigpipe,
 *     pl_mask_signals;
 *   - markers: pl_mark_measured_start/end bound a benchmark's measured part for
 *     perflab's instruction-counting QEMU plugin (execution/vm/c/insns.c): a
 *     7-byte no-op on any CPU, a window's bounds where the plugin is loaded;
 *   - output, the one protocol: every result is a line on stdout
 *       {"metric": "NAME", "value": NUMBER, "unit": "UNIT"}
 *     optionally followed by more keys ("event", lists, ...) that a family's
 *     parser may read.  A metric may be printed several times (samples, one
 *     per thread or interval); the order is kept.  Numbers are printed with
 *     the fewest digits that read back as the same double (at most 17), so
 *     nothing is lost; a non-finite value is printed as null (the parser
 *     refuses it).  Strings are JSON-escaped.
 *
 * Nothing here uses stdio for stdout or stderr, nor the heap: a program that
 * moves the break under malloc (will-it-scale's brk1) can still report.
 * Everything is static: each program is one translation unit.
 */
#ifndef PERFLAB_RUNTIME_H
#define PERFLAB_RUNTIME_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wunused-function"
#endif

/* nopl disp32(%rax) with 'P' 'L' '1' 'S'|'E' as displacement: the measured part's bounds (insns.c) */
#if defined(__x86_64__)
#define pl_mark_measured_start() __asm__ volatile(".byte 0x0f,0x1f,0x80,0x50,0x4c,0x31,0x53" ::: "memory")
#define pl_mark_measured_end() __asm__ volatile(".byte 0x0f,0x1f,0x80,0x50,0x4c,0x31,0x45" ::: "memory")
#else
#define pl_mark_measured_start() ((void)0)
#define pl_mark_measured_end() ((void)0)
#endif

/* the name errors start with; a program sets it first thing */
static const char *pl_progname = "perflab";

/* optional: writes context after "<program>: " (e.g. "task 3: "); returns its length */
static int (*pl_fail_context)(char *buf, size_t len);
/* optional: runs after the message is written, before exit; may leave itself (_exit) */
static void (*pl_on_fail)(int status);
/* leave with _exit instead of exit (no atexit handlers, no stdio flush): task processes */
static int pl_fail_fast;

/* ---- writing ----------------------------------------------------------- */

/* all of buf to fd; 0, or -1 with errno */
static int pl_write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* ---- errors -------------------------------------------------------------- */

/* "<program>: [context]<message>[: strerror(e)]" on stderr, then leave with status */
static void pl_vfail(int status, int e, const char *fmt, va_list ap) __attribute__((noreturn, format(printf, 3, 0)));
static void pl_vfail(int status, int e, const char *fmt, va_list ap)
{
	char line[1024];
	size_t n = 0;
	int m = snprintf(line, sizeof line, "%s: ", pl_progname);
	if (m > 0 && (size_t)m < sizeof line)
		n = (size_t)m;
	if (pl_fail_context) {
		m = pl_fail_context(line + n, sizeof line - n);
		if (m > 0 && (size_t)m < sizeof line - n)
			n += (size_t)m;
	}
	m = vsnprintf(line + n, sizeof line - n, fmt, ap);
	n = (m < 0 || (size_t)m >= sizeof line - n) ? strlen(line) : n + (size_t)m;
	if (e >= 0) {
		m = snprintf(line + n, sizeof line - n, ": %s", strerror(e));
		n = (m < 0 || (size_t)m >= sizeof line - n) ? strlen(line) : n + (size_t)m;
	}
	if (n > sizeof line - 2)
		n = sizeof line - 2;
	line[n++] = '\n';
	pl_write_all(2, line, n);
	if (pl_on_fail)
		pl_on_fail(status);
	if (pl_fail_fast)
		_exit(status);
	exit(status);
}

static void pl_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void pl_die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	pl_vfail(1, -1, fmt, ap);
}

/* pl_die with the text of errno appended */
static void pl_die_errno(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void pl_die_errno(const char *fmt, ...)
{
	int e = errno;
	va_list ap;
	va_start(ap, fmt);
	pl_vfail(1, e, fmt, ap);
}

/* a bad command line: exit 2 */
static void pl_usage_error(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void pl_usage_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	pl_vfail(2, -1, fmt, ap);
}

/* ---- time ---------------------------------------------------------------- */

static inline int64_t pl_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline double pl_now(void)
{
	return (double)pl_now_ns() / 1e9;
}

/* seconds since the pl_now_ns() instant t0: a whole number of ns over 1e9,
 * the same double "%.9f" of it would read back as */
static inline double pl_seconds_since(int64_t t0)
{
	return (double)(pl_now_ns() - t0) / 1e9;
}

/* ---- options --------------------------------------------------------------- */

/* an integer from lo to hi */
static unsigned long long pl_parse_uint(char opt, const char *arg, unsigned long long lo, unsigned long long hi)
{
	char *end = (char *)arg;
	errno = 0;
	unsigned long long v = 0;
	if (*arg != '-' && *arg != '\0')
		v = strtoull(arg, &end, 10);
	if (*arg == '-' || *arg == '\0' || errno || *end || v < lo || v > hi)
		pl_usage_error("-%c: invalid value '%.100s' (expected an integer from %llu to %llu)", opt, arg, lo, hi);
	return v;
}

/* a finite number above lo (or equal to it with lo_ok) and at most hi; `what` says what is expected */
static double pl_parse_real(char opt, const char *arg, double lo, int lo_ok, double hi, const char *what)
{
	char *end;
	errno = 0;
	double v = strtod(arg, &end);
	if (end == arg || *end || errno == ERANGE || !isfinite(v) || v < lo || (v == lo && !lo_ok) || v > hi)
		pl_usage_error("-%c: invalid value '%.100s' (expected %s)", opt, arg, what);
	return v;
}

/* seconds: > 0 (>= 0 with allow_zero), at most 1e7 (115 days) */
static double pl_parse_seconds(char opt, const char *arg, int allow_zero)
{
	return pl_parse_real(opt, arg, 0, allow_zero, 1e7,
			     allow_zero ? "seconds, a number >= 0" : "seconds, a number > 0");
}

/* one of the n words of choices: its index (`expected` lists them for the error) */
static int pl_parse_choice(char opt, const char *arg, const char *const *choices, int n, const char *expected)
{
	for (int k = 0; k < n; k++)
		if (strcmp(arg, choices[k]) == 0)
			return k;
	pl_usage_error("-%c: invalid value '%.100s' (expected %s)", opt, arg, expected);
}

/* "64m", "512k", "1.5G", "1048576" -> bytes (K, M, G: powers of 1024, either case) */
static size_t pl_parse_size(char opt, const char *arg)
{
	char *end;
	errno = 0;
	double v = strtod(arg, &end);
	int ok = end != arg && errno != ERANGE && isfinite(v) && v >= 0;
	switch (ok ? *end : 0) {
	case 'k': case 'K': v *= 1024; end++; break;
	case 'm': case 'M': v *= 1024.0 * 1024; end++; break;
	case 'g': case 'G': v *= 1024.0 * 1024 * 1024; end++; break;
	}
	if (!ok || *end || v > (double)(SIZE_MAX / 2))
		pl_usage_error("-%c: invalid value '%.100s' (expected a size: bytes, or a number with K, M or G)", opt, arg);
	return (size_t)v;
}

/* "2,4,8" -> {2,4,8}, at most max of them; returns the count */
static int pl_parse_list(char opt, const char *arg, int *out, int max)
{
	int n = 0;
	const char *s = arg;
	while (*s) {
		char *end;
		errno = 0;
		long v = strtol(s, &end, 10);
		if (end == s || errno || v < 0 || v > INT32_MAX || n >= max || (*end && *end != ','))
			pl_usage_error("-%c: invalid value '%.100s' (expected up to %d whole numbers, comma-separated)",
				       opt, arg, max);
		out[n++] = (int)v;
		s = *end ? end + 1 : end;
	}
	if (n == 0)
		pl_usage_error("-%c: invalid value '%.100s' (expected up to %d whole numbers, comma-separated)", opt, arg, max);
	return n;
}

/* "0,2-3" -> that set of CPUs (at least one, each below CPU_SETSIZE) */
static void pl_parse_cpu_list(char opt, const char *arg, cpu_set_t *set)
{
	const char *p = arg;
	CPU_ZERO(set);
	while (*p) {
		char *end;
		long lo = strtol(p, &end, 10), hi = lo;
		if (end == p || lo < 0 || lo >= CPU_SETSIZE)
			goto bad;
		p = end;
		if (*p == '-') {
			hi = strtol(p + 1, &end, 10);
			if (end == p + 1 || hi < lo || hi >= CPU_SETSIZE)
				goto bad;
			p = end;
		}
		for (long c = lo; c <= hi; c++)
			CPU_SET(c, set);
		if (*p == ',')
			p++;
		else if (*p)
			goto bad;
	}
	if (CPU_COUNT(set) > 0)
		return;
bad:
	pl_usage_error("-%c %s: expected a CPU list such as 0,2-3", opt, arg);
}

/* ---- CPUs ------------------------------------------------------------------ */

/* the CPUs this process may run on, in increasing order (a heap array *out); returns their number */
static int pl_allowed_cpus(int **out)
{
	for (int size = 1024;; size *= 2) {
		cpu_set_t *set = CPU_ALLOC(size);
		size_t bytes = CPU_ALLOC_SIZE(size);
		if (!set)
			pl_die("out of memory");
		if (sched_getaffinity(0, bytes, set) == 0) {
			int n = CPU_COUNT_S(bytes, set), k = 0;
			int *cpus = calloc((size_t)n + 1, sizeof *cpus);
			if (!cpus)
				pl_die("out of memory");
			for (int cpu = 0; cpu < size && k < n; cpu++)
				if (CPU_ISSET_S(cpu, bytes, set))
					cpus[k++] = cpu;
			CPU_FREE(set);
			if (n < 1)
				pl_die("sched_getaffinity: no CPU allowed");
			*out = cpus;
			return n;
		}
		CPU_FREE(set);
		if (errno != EINVAL || size > (1 << 20))
			pl_die_errno("sched_getaffinity");
	}
}

/* bind process (or thread) `pid` (0: the caller) to the CPUs of `set`; 0, or -1 with errno */
static int pl_pin_set(pid_t pid, const cpu_set_t *set)
{
	return sched_setaffinity(pid, sizeof *set, set);
}

/* bind `pid` (0: the caller) to one CPU; 0, or -1 with errno */
static int pl_pin(pid_t pid, int cpu)
{
	cpu_set_t *set = CPU_ALLOC(cpu + 1);
	size_t bytes = CPU_ALLOC_SIZE(cpu + 1);
	if (!set) {
		errno = ENOMEM;
		return -1;
	}
	CPU_ZERO_S(bytes, set);
	CPU_SET_S(cpu, bytes, set);
	int rc = sched_setaffinity(pid, bytes, set);
	CPU_FREE(set);
	return rc;
}

/* a thread created with attr starts on `cpu`; 0 or an error number */
static int pl_thread_attr_cpu(pthread_attr_t *attr, int cpu)
{
	cpu_set_t *set = CPU_ALLOC(cpu + 1);
	size_t bytes = CPU_ALLOC_SIZE(cpu + 1);
	if (!set)
		return ENOMEM;
	CPU_ZERO_S(bytes, set);
	CPU_SET_S(cpu, bytes, set);
	int rc = pthread_attr_setaffinity_np(attr, bytes, set);
	CPU_FREE(set);
	return rc;
}

/* ---- signals --------------------------------------------------------------- */

/* handler for sig (no flags, nothing blocked while it runs), or die */
static void pl_on_signal(int sig, void (*handler)(int))
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = handler;
	sigemptyset(&sa.sa_mask);
	if (sigaction(sig, &sa, NULL) != 0)
		pl_die_errno("sigaction %d", sig);
}

/* a write to a closed pipe fails with EPIPE (reported) instead of killing the program */
static void pl_ignore_sigpipe(void)
{
	signal(SIGPIPE, SIG_IGN);
}

/* block (SIG_BLOCK) or unblock (SIG_UNBLOCK) the n signals of sigs in the calling thread */
static void pl_mask_signals(int how, const int *sigs, size_t n)
{
	sigset_t set;
	sigemptyset(&set);
	for (size_t k = 0; k < n; k++)
		sigaddset(&set, sigs[k]);
	pthread_sigmask(how, &set, NULL);
}

/* ---- output: the metric lines ----------------------------------------------- */

/* A line under construction in a buffer the caller owns (a program that must
 * not allocate while it runs allocates it up front). */
struct pl_line {
	char *buf;
	size_t cap, len;
};

static void pl_put(struct pl_line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void pl_put(struct pl_line *l, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(l->buf + l->len, l->cap - l->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= l->cap - l->len)
		pl_die("internal error: output line too long");
	l->len += (size_t)n;
}

/* a JSON string: quotes, backslashes and control characters escaped */
static void pl_put_string(struct pl_line *l, const char *s)
{
	pl_put(l, "\"");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			pl_put(l, "\\%c", c);
		else if (c < 0x20)
			pl_put(l, "\\u%04x", c);
		else
			pl_put(l, "%c", c);
	}
	pl_put(l, "\"");
}

/* a number with the fewest digits (15 to 17) that read back as the same double; null if not finite */
static void pl_put_number(struct pl_line *l, double v)
{
	char text[40];
	if (!isfinite(v)) {
		pl_put(l, "null");
		return;
	}
	for (int digits = 15; digits <= 17; digits++) {
		snprintf(text, sizeof text, "%.*g", digits, v);
		if (strtod(text, NULL) == v)
			break;
	}
	pl_put(l, "%s", text);
}

/* {"metric": "m", "value": v, "unit": "u" ... : start a line (end it with pl_line_end) */
static void pl_line_start(struct pl_line *l, char *buf, size_t cap, const char *metric, double value, const char *unit)
{
	l->buf = buf;
	l->cap = cap;
	l->len = 0;
	pl_put(l, "{\"metric\": ");
	pl_put_string(l, metric);
	pl_put(l, ", \"value\": ");
	pl_put_number(l, value);
	pl_put(l, ", \"unit\": ");
	pl_put_string(l, unit);
}

/* , "key": (the value follows: pl_put_*, or a list written with pl_put) */
static void pl_line_key(struct pl_line *l, const char *key)
{
	pl_put(l, ", ");
	pl_put_string(l, key);
	pl_put(l, ": ");
}

static void pl_line_str(struct pl_line *l, const char *key, const char *value)
{
	pl_line_key(l, key);
	pl_put_string(l, value);
}

static void pl_line_num(struct pl_line *l, const char *key, double value)
{
	pl_line_key(l, key);
	pl_put_number(l, value);
}

static void pl_line_int(struct pl_line *l, const char *key, long long value)
{
	pl_line_key(l, key);
	pl_put(l, "%lld", value);
}

static void pl_line_bool(struct pl_line *l, const char *key, int value)
{
	pl_line_key(l, key);
	pl_put(l, "%s", value ? "true" : "false");
}

/* close the line and write it to stdout, or die */
static void pl_line_end(struct pl_line *l)
{
	pl_put(l, "}\n");
	if (pl_write_all(1, l->buf, l->len) != 0)
		pl_die_errno("writing to stdout");
}

/* one plain metric line */
static void pl_metric(const char *metric, double value, const char *unit)
{
	char buf[512];
	struct pl_line l;
	pl_line_start(&l, buf, sizeof buf, metric, value, unit);
	pl_line_end(&l);
}

#endif /* PERFLAB_RUNTIME_H */

/*
 * insns: a QEMU TCG plugin that counts the instructions a guest executes between
 * markers the guest itself executes, per translated block of kernel code.
 *
 * Written for perflab (docs/vm.md, "Where, inside the guest").  QEMU loads it with
 *     -plugin file=insns.so,out=PATH
 * Debian ships no plugin header, so the few entry points used are declared below
 * from QEMU's documented plugin ABI (API version 1, QEMU 7.2).
 *
 * Counting: every translated block gets a counter that QEMU adds the block's
 * instruction count to each time the block runs (an inline add, no call); the
 * blocks of user space (addresses below the kernel's half) all add to one.
 * Nothing is sampled, so under icount two runs of the same kernel and program
 * give the same counts.  A block left early (a fault in its middle) counts whole,
 * alike on every run.
 *
 * Markers: the guest marks a window with a 7-byte no-op, `nopl disp32(%rax)`
 * (0f 1f 80) whose displacement is 'P' 'L' CHANNEL KIND: CHANNEL '0' is the
 * benchmark process as perflab's agent starts it, '1' the benchmark's own
 * measured part; KIND 'S' starts it, 'E' ends it.  The instruction does
 * nothing on a real CPU or under KVM.  Windows of one channel nest (several
 * tasks): the outermost start and end bound them.  At the end of a channel-0
 * window the plugin appends to PATH, for each channel counted since the last:
 *     window SEQ CHANNEL N
 *     VADDR INSNS        (N lines, hex address, kernel blocks; VADDR 0: user space)
 * then "end SEQ"; the host reads the file after the agent's RESULT, which the
 * guest sends only after the marker ran, and empties it.
 *
 * Any guest program can run the markers (a user-space instruction, like the
 * agent's), and one that repeats them floods the file with windows.  With
 * limit=BYTES the file holds at most that much unread: a window to be written
 * to a file already that full empties it first and says "capped SEQ" (the
 * windows up to SEQ were dropped), so the host's disk holds the limit plus one
 * window, and the last window is always there.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* QEMU's plugin ABI, version 1 (the entry points this plugin uses). */
typedef uint64_t qemu_plugin_id_t;
typedef struct {
	const char *target_name;
	struct {
		int min, cur;
	} version;
	bool system_emulation;
	union {
		struct {
			int smp_vcpus, max_vcpus;
		} system;
	};
} qemu_info_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
enum { PLUGIN_CB_NO_REGS = 0 };
enum { PLUGIN_INLINE_ADD_U64 = 0 };
typedef void (*tb_trans_cb)(qemu_plugin_id_t, struct qemu_plugin_tb *);
typedef void (*vcpu_udata_cb)(unsigned int, void *);
typedef void (*udata_cb)(qemu_plugin_id_t, void *);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t, tb_trans_cb);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *, int, void *, uint64_t);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *, vcpu_udata_cb, int, void *);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t, udata_cb, void *);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *, size_t);
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *);
void qemu_plugin_outs(const char *);

#define EXPORT __attribute__((visibility("default")))
EXPORT int qemu_plugin_version = 1;

#define KERNEL_HALF 0xffff800000000000ull
#define CHANNELS 2
#define CHUNK 8192

struct block {
	uint64_t vaddr;             /* 0: every block of user space */
	uint64_t count;             /* instructions run, added by QEMU's inline op */
	uint64_t mark[CHANNELS];    /* count when the channel's window opened */
	uint64_t taken[CHANNELS];   /* counted in the channel's windows since the last dump */
};

struct chunk {
	struct chunk *next;
	size_t used;
	struct block blocks[CHUNK];
};

static struct chunk *chunks;          /* newest first; blocks never move (QEMU holds &count) */
static struct block *user;
static int depth[CHANNELS];
static FILE *out;
static unsigned long long seq;
static long long limit;               /* bytes of unread windows the file may hold; 0: no limit */

static struct block *new_block(uint64_t vaddr)
{
	if (!chunks || chunks->used == CHUNK) {
		struct chunk *c = calloc(1, sizeof *c);
		if (!c)
			abort();
		c->next = chunks;
		chunks = c;
	}
	struct block *b = &chunks->blocks[chunks->used++];
	b->vaddr = vaddr;
	/* A block made inside an open window counts from zero there: its mark stays 0. */
	return b;
}

static void open_window(int ch)
{
	for (struct chunk *c = chunks; c; c = c->next)
		for (size_t i = 0; i < c->used; i++)
			c->blocks[i].mark[ch] = c->blocks[i].count;
}

static void close_window(int ch)
{
	for (struct chunk *c = chunks; c; c = c->next)
		for (size_t i = 0; i < c->used; i++) {
			struct block *b = &c->blocks[i];
			b->taken[ch] += b->count - b->mark[ch];
			b->mark[ch] = b->count;
		}
}

static void dump(void)
{
	struct stat st;
	if (limit > 0 && fstat(fileno(out), &st) == 0 && st.st_size >= limit && ftruncate(fileno(out), 0) == 0)
		fprintf(out, "capped %llu\n", seq);   /* appends (O_APPEND) land at the new end */
	seq++;
	for (int ch = 0; ch < CHANNELS; ch++) {
		size_t n = 0;
		for (struct chunk *c = chunks; c; c = c->next)
			for (size_t i = 0; i < c->used; i++)
				n += c->blocks[i].taken[ch] != 0;
		if (!n)
			continue;
		fprintf(out, "window %llu %d %zu\n", seq, ch, n);
		for (struct chunk *c = chunks; c; c = c->next)
			for (size_t i = 0; i < c->used; i++) {
				struct block *b = &c->blocks[i];
				if (b->taken[ch]) {
					fprintf(out, "%" PRIx64 " %" PRIu64 "\n", b->vaddr, b->taken[ch]);
					b->taken[ch] = 0;
				}
			}
	}
	fprintf(out, "end %llu\n", seq);
	fflush(out);
}

/* Runs before the marker instruction, in the vCPU that executes it. */
static void marker(unsigned int vcpu, void *what)
{
	(void)vcpu;
	uintptr_t w = (uintptr_t)what;
	int ch = (int)(w >> 1), start = (int)(w & 1);
	if (start) {
		if (depth[ch]++ == 0)
			open_window(ch);
	} else if (depth[ch] > 0 && --depth[ch] == 0) {
		close_window(ch);
		if (ch == 0)
			dump();
	}
}

static void translated(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	(void)id;
	uint64_t vaddr = qemu_plugin_tb_vaddr(tb);
	size_t n = qemu_plugin_tb_n_insns(tb);
	struct block *b = vaddr >= KERNEL_HALF ? new_block(vaddr) : user;
	qemu_plugin_register_vcpu_tb_exec_inline(tb, PLUGIN_INLINE_ADD_U64, &b->count, n);
	if (vaddr >= KERNEL_HALF)
		return;
	for (size_t i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		const unsigned char *p = qemu_plugin_insn_data(insn);
		if (qemu_plugin_insn_size(insn) != 7 || p[0] != 0x0f || p[1] != 0x1f || p[2] != 0x80 ||
		    p[3] != 'P' || p[4] != 'L' || p[5] < '0' || p[5] >= '0' + CHANNELS || (p[6] != 'S' && p[6] != 'E'))
			continue;
		uintptr_t what = ((uintptr_t)(p[5] - '0') << 1) | (p[6] == 'S');
		qemu_plugin_register_vcpu_insn_exec_cb(insn, marker, PLUGIN_CB_NO_REGS, (void *)what);
	}
}

static void at_exit(qemu_plugin_id_t id, void *p)
{
	(void)id;
	(void)p;
	if (out)
		fclose(out);
	out = NULL;
}

EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
	const char *path = NULL;
	for (int i = 0; i < argc; i++)
		if (strncmp(argv[i], "out=", 4) == 0)
			path = argv[i] + 4;
		else if (strncmp(argv[i], "limit=", 6) == 0)
			limit = atoll(argv[i] + 6);
	if (!info->system_emulation || !path) {
		qemu_plugin_outs("perflab insns plugin: needs system emulation and out=PATH\n");
		return -1;
	}
	out = fopen(path, "a");
	if (!out) {
		qemu_plugin_outs("perflab insns plugin: cannot open its output file\n");
		return -1;
	}
	user = new_block(0);
	qemu_plugin_register_vcpu_tb_trans_cb(id, translated);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}

"""The source tree kernbench builds when no `tree:` is given: a C project generated here.

It is made deterministically from a seed (the same size and seed give the same
bytes, on every machine), shaped like a small kernel: shared headers under
include/kb/ (types, lists, bit operations, locks, and generated structure
headers, which include one another), subsystem directories (kernel/, mm/,
fs/ext/, net/ipv4/, drivers/block/ ...) each with an internal header and C
files that include 3-6 shared headers, their own directory's header and now
and then another directory's, and functions of three kinds: small ones over
the headers' inline helpers, list walks, and a few big ones (a switch of many
cases with loops) that give the optimiser real work. Each file exports an
init function; init/main.c calls them all, so the result links into one
program, `vmlinux`.

The Makefile has one rule per object with its header dependencies, a
built-in.a per directory and a final link, so `make -jN` parallelises as a
kernel build does; `make clean` removes every product.
"""

from __future__ import annotations

import hashlib
import os
import random
from dataclasses import dataclass
from pathlib import Path

GENERATOR_VERSION = 1   # bump when the generated text changes: it is recorded with every run

DIRECTORIES = (
    "kernel", "mm", "fs", "lib", "fs/ext", "net/core", "drivers/block", "block", "net/ipv4", "drivers/char",
    "ipc", "crypto", "drivers/net", "security", "kernel/sched", "fs/proc", "sound/core", "drivers/input",
    "arch/x86/kernel", "arch/x86/mm", "net/unix", "kernel/time", "drivers/tty", "fs/nfs", "virt/kvm",
    "drivers/pci", "kernel/irq", "fs/fat",
)
STEMS = ("core", "main", "ops", "sys", "util", "table", "cache", "alloc", "map", "queue", "lock", "dev", "file",
         "inode", "super", "dir", "namei", "read", "write", "sched", "timer", "irq", "proc", "swap", "page",
         "slab", "hash", "crc", "bitmap", "tree", "list", "sort", "seq", "event", "signal", "exit", "fork",
         "pipe", "poll", "select", "socket", "route", "input", "output", "filter", "tcp", "udp", "ip",
         "arp", "icmp", "mount", "attr", "xattr", "acl", "audit", "key", "policy", "hooks", "crypt", "cipher")


@dataclass(frozen=True)
class Size:
    directories: int
    files_per_directory: int
    gen_headers: int        # generated structure headers shared across directories
    functions: tuple[int, int]   # small functions per file (min, max)
    big_share: float        # share of files with a big function
    big_cases: tuple[int, int]   # cases of a big function's switch


SIZES: dict[str, Size] = {
    "tiny": Size(2, 3, 3, (1, 2), 0.34, (4, 8)),
    "small": Size(8, 12, 12, (4, 8), 0.3, (20, 50)),
    "full": Size(28, 22, 40, (8, 14), 0.45, (60, 150)),
}


@dataclass
class Tree:
    path: Path
    files: int          # C files
    headers: int
    digest: str         # sha256 of every generated file's name and bytes


def _fixed_headers() -> dict[str, str]:
    return {
        "include/kb/types.h": """#ifndef KB_TYPES_H
#define KB_TYPES_H
typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef signed int s32;
typedef signed long long s64;
typedef unsigned long kb_size_t;
typedef _Bool kb_bool;
#define NULL_PTR ((void *)0)
#endif
""",
        "include/kb/kernel.h": """#ifndef KB_KERNEL_H
#define KB_KERNEL_H
#include "kb/types.h"
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define kb_min(a, b) ((a) < (b) ? (a) : (b))
#define kb_max(a, b) ((a) > (b) ? (a) : (b))
#define container_of(ptr, type, member) ((type *)((char *)(ptr) - __builtin_offsetof(type, member)))
#define KB_ROL32(v, s) (((v) << ((s) & 31)) | ((v) >> ((32 - ((s) & 31)) & 31)))
static inline u32 kb_hash32(u32 v, unsigned bits)
{
	return (v * 0x61C88647u) >> (32 - bits);
}
static inline u64 kb_mix64(u64 v)
{
	v ^= v >> 33;
	v *= 0xff51afd7ed558ccdULL;
	v ^= v >> 33;
	return v;
}
#endif
""",
        "include/kb/list.h": """#ifndef KB_LIST_H
#define KB_LIST_H
#include "kb/kernel.h"
struct list_head { struct list_head *next, *prev; };
#define LIST_HEAD_INIT(name) { &(name), &(name) }
static inline void INIT_LIST_HEAD(struct list_head *l) { l->next = l; l->prev = l; }
static inline void __list_add(struct list_head *n, struct list_head *prev, struct list_head *next)
{
	next->prev = n; n->next = next; n->prev = prev; prev->next = n;
}
static inline void list_add(struct list_head *n, struct list_head *head) { __list_add(n, head, head->next); }
static inline void list_add_tail(struct list_head *n, struct list_head *head) { __list_add(n, head->prev, head); }
static inline void list_del(struct list_head *e)
{
	e->next->prev = e->prev; e->prev->next = e->next; e->next = e; e->prev = e;
}
static inline int list_empty(const struct list_head *h) { return h->next == h; }
#define list_for_each(pos, head) for (pos = (head)->next; pos != (head); pos = pos->next)
#define list_entry(ptr, type, member) container_of(ptr, type, member)
#endif
""",
        "include/kb/bitops.h": """#ifndef KB_BITOPS_H
#define KB_BITOPS_H
#include "kb/kernel.h"
#define BITS_PER_LONG 64
#define BIT(n) (1ULL << (n))
static inline void kb_set_bit(unsigned n, u64 *map) { map[n / BITS_PER_LONG] |= BIT(n % BITS_PER_LONG); }
static inline void kb_clear_bit(unsigned n, u64 *map) { map[n / BITS_PER_LONG] &= ~BIT(n % BITS_PER_LONG); }
static inline int kb_test_bit(unsigned n, const u64 *map) { return (map[n / BITS_PER_LONG] >> (n % BITS_PER_LONG)) & 1; }
static inline unsigned kb_hweight64(u64 w) { return (unsigned)__builtin_popcountll(w); }
static inline unsigned kb_find_first_bit(const u64 *map, unsigned size)
{
	for (unsigned i = 0; i * BITS_PER_LONG < size; i++)
		if (map[i])
			return i * BITS_PER_LONG + (unsigned)__builtin_ctzll(map[i]);
	return size;
}
#endif
""",
        "include/kb/spinlock.h": """#ifndef KB_SPINLOCK_H
#define KB_SPINLOCK_H
#include "kb/types.h"
typedef struct { volatile int locked; } kb_spinlock_t;
static inline void kb_spin_lock(kb_spinlock_t *l) { while (__atomic_exchange_n(&l->locked, 1, __ATOMIC_ACQUIRE)) ; }
static inline void kb_spin_unlock(kb_spinlock_t *l) { __atomic_store_n(&l->locked, 0, __ATOMIC_RELEASE); }
typedef struct { long counter; } kb_atomic_t;
static inline long kb_atomic_add_return(long i, kb_atomic_t *v) { return __atomic_add_fetch(&v->counter, i, __ATOMIC_SEQ_CST); }
#endif
""",
        "include/kb/string.h": """#ifndef KB_STRING_H
#define KB_STRING_H
#include "kb/types.h"
static inline void *kb_memcpy(void *d, const void *s, kb_size_t n)
{
	u8 *dp = d; const u8 *sp = s;
	while (n--) *dp++ = *sp++;
	return d;
}
static inline void *kb_memset(void *d, int c, kb_size_t n)
{
	u8 *dp = d;
	while (n--) *dp++ = (u8)c;
	return d;
}
static inline kb_size_t kb_strlen(const char *s) { const char *p = s; while (*p) p++; return (kb_size_t)(p - s); }
#endif
""",
    }


FIXED_SHARED = ("kb/list.h", "kb/bitops.h", "kb/spinlock.h", "kb/string.h")


def _gen_header(rng: random.Random, index: int, others: list[str]) -> tuple[str, str, str]:
    """(path, text, struct name) of one generated structure header."""
    name = f"{rng.choice(STEMS)}{index}"
    struct = f"kb_{name}"
    nfields = rng.randint(4, 10)
    fields = [(rng.choice(("u32", "u64", "u16", "s32")), f"f{i}") for i in range(nfields)]
    lines = [f"#ifndef KB_GEN_{name.upper()}_H", f"#define KB_GEN_{name.upper()}_H", '#include "kb/kernel.h"',
             '#include "kb/list.h"']
    for other in rng.sample(others, min(len(others), rng.randint(0, 2))):
        lines.append(f'#include "{other}"')
    lines.append(f"struct {struct} {{")
    lines += [f"\t{t} {n};" for t, n in fields]
    lines += ["\tstruct list_head node;", "\tu64 bits[2];", "};"]
    lines.append(f"#define {name.upper()}_MAGIC 0x{rng.getrandbits(32):08x}u")
    for k in range(rng.randint(2, 5)):
        a, b = rng.sample(fields, 2)
        op = rng.choice(("+", "^", "*", "|"))
        lines += [f"static inline u64 {struct}_get{k}(const struct {struct} *p, u64 x)", "{",
                  f"\tu64 v = (u64)p->{a[1]} {op} (u64)p->{b[1]};",
                  f"\tv = kb_mix64(v + x + {rng.randint(1, 9999)}u);",
                  f"\treturn v ^ ({name.upper()}_MAGIC >> {rng.randint(1, 20)});", "}"]
    lines += [f"static inline void {struct}_init(struct {struct} *p, u32 seed)", "{"]
    lines += [f"\tp->{n} = ({t})(seed * {rng.randint(3, 999)}u + {rng.randint(0, 99)}u);" for t, n in fields]
    lines += ["\tINIT_LIST_HEAD(&p->node);", "\tp->bits[0] = seed; p->bits[1] = ~(u64)seed;", "}"]
    lines.append("#endif")
    return f"include/kb/gen/{name}.h", "\n".join(lines) + "\n", struct


def _small_function(rng: random.Random, fname: str, struct: str, bitops: bool) -> list[str]:
    kind = rng.randrange(3 if bitops else 2)
    if kind == 0:
        k = rng.randint(0, 1)
        return [f"static u64 {fname}(struct {struct} *p, u64 x)", "{",
                "\tu64 acc = x;",
                f"\tfor (unsigned i = 0; i < {rng.randint(3, 17)}u; i++) {{",
                f"\t\tacc += {struct}_get{k}(p, acc ^ i);",
                "\t\tif (unlikely(acc & 1))",
                f"\t\t\tacc = KB_ROL32((u32)acc, {rng.randint(1, 31)}) + (acc >> 7);",
                "\t}", "\treturn acc;", "}"]
    if kind == 1:
        return [f"static u64 {fname}(struct {struct} *p, u64 x)", "{",
                "\tstruct list_head head, *pos;",
                f"\tstruct {struct} items[{rng.randint(2, 6)}];",
                "\tu64 sum = 0;",
                "\tINIT_LIST_HEAD(&head);",
                "\tfor (unsigned i = 0; i < ARRAY_SIZE(items); i++) {",
                f"\t\t{struct}_init(&items[i], (u32)(x + i));",
                "\t\tlist_add_tail(&items[i].node, &head);", "\t}",
                "\tlist_for_each(pos, &head) {",
                f"\t\tstruct {struct} *e = list_entry(pos, struct {struct}, node);",
                f"\t\tsum += {struct}_get0(e, sum) + (e->bits[0] & 0xff);", "\t}",
                "\treturn sum ^ (u64)(p != NULL_PTR);", "}"]
    return [f"static u64 {fname}(struct {struct} *p, u64 x)", "{",
            f"\tu64 map[{rng.randint(2, 8)}] = {{0}};",
            f"\tfor (unsigned i = 0; i < {rng.randint(5, 40)}u; i++)",
            "\t\tkb_set_bit((unsigned)(kb_hash32((u32)(x + i), 7) % (sizeof(map) * 8)), map);",
            f"\treturn kb_find_first_bit(map, sizeof(map) * 8) + {struct}_get1(p, x);", "}"]


def _big_function(rng: random.Random, fname: str, struct: str, cases: int) -> list[str]:
    lines = [f"static u64 {fname}(struct {struct} *p, unsigned op, u64 x)", "{",
             "\tu64 r = x, t[8] = {0};", "\tswitch (op) {"]
    for c in range(cases):
        lines.append(f"\tcase {c}:")
        for _ in range(rng.randint(1, 4)):
            form = rng.randrange(4)
            if form == 0:
                lines.append(f"\t\tr = r * {rng.randint(3, 99999)}u + {struct}_get0(p, r) + {rng.randint(0, 999)}u;")
            elif form == 1:
                lines += [f"\t\tfor (unsigned i = 0; i < {rng.randint(2, 32)}u; i++)",
                          f"\t\t\tt[i & 7] += (r >> (i & 15)) ^ {rng.randint(1, 65535)}u;"]
            elif form == 2:
                lines += [f"\t\tif (r % {rng.randint(2, 97)}u == {rng.randint(0, 1)}u)",
                          f"\t\t\tr ^= kb_mix64(r + {rng.randint(1, 999)}u);",
                          "\t\telse", f"\t\t\tr += t[{rng.randint(0, 7)}] << {rng.randint(1, 9)};"]
            else:
                lines.append(f"\t\tr = kb_min(r, (u64){rng.getrandbits(31)}u) + kb_hash32((u32)r, {rng.randint(4, 16)});")
        lines.append("\t\tbreak;")
    lines += ["\tdefault:", "\t\tr = ~r;", "\t}",
              "\tfor (unsigned i = 0; i < 8; i++)", "\t\tr += t[i];", "\treturn r;", "}"]
    return lines


def _symbol(path: str) -> str:
    return path.removesuffix(".c").replace("/", "_")


def generate(dest: str | os.PathLike, size: str = "tiny", seed: int = 1) -> Tree:
    """Write the tree of this size and seed into `dest` (created; must be empty or absent)."""
    spec = SIZES[size]
    rng = random.Random(f"perflab-kernbench-{GENERATOR_VERSION}-{size}-{seed}")
    files: dict[str, str] = dict(_fixed_headers())
    gen_headers: list[tuple[str, str]] = []   # (include name, struct)
    for i in range(spec.gen_headers):
        path, text, struct = _gen_header(rng, i, [g for g, _ in gen_headers] + list(FIXED_SHARED))
        files[path] = text
        gen_headers.append((path.removeprefix("include/"), struct))
    directories = list(DIRECTORIES[:spec.directories])
    objects: dict[str, list[str]] = {}
    deps: dict[str, list[str]] = {}
    inits: list[str] = []
    internal = {d: f"{d}/{d.replace('/', '_')}_internal.h" for d in directories}
    for d in directories:
        stems = rng.sample(STEMS, spec.files_per_directory)
        sources = [f"{d}/{s}.c" for s in stems]
        guard = d.replace("/", "_").upper() + "_INTERNAL_H"
        struct_inc, struct = rng.choice(gen_headers)
        head = [f"#ifndef {guard}", f"#define {guard}", '#include "kb/kernel.h"', f'#include "{struct_inc}"',
                f"struct {d.replace('/', '_')}_state {{", f"\tstruct {struct} obj;", "\tkb_spinlock_t lock;",
                "\tu64 counters[16];", "};", f"#define {d.replace('/', '_').upper()}_SLOTS {rng.randint(8, 64)}"]
        head += [f"u64 {_symbol(s)}_op(u64 x);" for s in sources]
        head.append("#endif")
        files[internal[d]] = "\n".join(head[:3] + ['#include "kb/spinlock.h"'] + head[3:]) + "\n"
        objects[d] = []
        for n, src in enumerate(sources):
            sym = _symbol(src)
            includes = ["kb/kernel.h"] + rng.sample(FIXED_SHARED, rng.randint(1, 3))
            chosen = rng.sample(gen_headers, min(len(gen_headers), rng.randint(2, 4)))
            includes += [inc for inc, _ in chosen]
            includes.append(internal[d])
            if len(directories) > 1 and rng.random() < 0.3:
                includes.append(internal[rng.choice([o for o in directories if o != d])])
            includes = list(dict.fromkeys(includes))
            _, struct = rng.choice(chosen)
            body = ["/* generated by perflab's kernbench tree generator: do not edit */"]
            body += [f'#include "{inc}"' for inc in includes]
            body.append("")
            body.append(f"static struct {struct} {sym}_table[{rng.randint(2, 16)}];")
            calls = []
            for k in range(rng.randint(*spec.functions)):
                fname = f"{sym}_fn{k}"
                body += _small_function(rng, fname, struct, "kb/bitops.h" in includes) + [""]
                calls.append(f"\tacc += {fname}(&{sym}_table[{k} % ARRAY_SIZE({sym}_table)], acc);")
            if rng.random() < spec.big_share:
                body += _big_function(rng, f"{sym}_big", struct, rng.randint(*spec.big_cases)) + [""]
                calls.append(f"\tfor (unsigned op = 0; op < 8; op++)\n\t\tacc += {sym}_big(&{sym}_table[0], op * 3, acc);")
            body += [f"u64 {sym}_op(u64 x)", "{", "\tu64 acc = x;", *calls, "\treturn acc;", "}", ""]
            earlier = sources[n - 1] if n else None
            body += [f"int {sym}_init(void)", "{", f"\tfor (unsigned i = 0; i < ARRAY_SIZE({sym}_table); i++)",
                     f"\t\t{struct}_init(&{sym}_table[i], i + {rng.randint(1, 1000)}u);",
                     f"\treturn (int)(({sym}_op({rng.randint(1, 99)}u)"
                     + (f" ^ {_symbol(earlier)}_op(1)" if earlier else "") + ") & 0x7fff);", "}"]
            files[src] = "\n".join(body) + "\n"
            obj = src.removesuffix(".c") + ".o"
            objects[d].append(obj)
            deps[obj] = [src] + [f"include/{inc}" if inc.startswith("kb/") else inc for inc in includes]
            inits.append(f"{sym}_init")
    files["include/generated/initcalls.h"] = ("#ifndef KB_INITCALLS_H\n#define KB_INITCALLS_H\n"
                                              + "".join(f"int {i}(void);\n" for i in inits)
                                              + "static int (*const kb_initcalls[])(void) = {\n"
                                              + "".join(f"\t{i},\n" for i in inits) + "};\n#endif\n")
    files["init/main.c"] = ('#include <stdio.h>\n#include "kb/kernel.h"\n#include "generated/initcalls.h"\n\n'
                            "int main(void)\n{\n\tunsigned long sum = 0;\n"
                            "\tfor (unsigned i = 0; i < ARRAY_SIZE(kb_initcalls); i++)\n"
                            "\t\tsum += (unsigned long)kb_initcalls[i]();\n"
                            '\tprintf("%u initcalls, checksum %lu\\n", (unsigned)ARRAY_SIZE(kb_initcalls), sum);\n'
                            "\treturn 0;\n}\n")
    deps["init/main.o"] = ["init/main.c", "include/kb/kernel.h", "include/kb/types.h", "include/generated/initcalls.h"]
    files["Makefile"] = _makefile(directories, objects, deps)
    root = Path(dest)
    root.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    for rel in sorted(files):
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        data = files[rel].encode()
        target.write_bytes(data)
        digest.update(rel.encode() + b"\0" + data + b"\0")
    c_files = sum(1 for f in files if f.endswith(".c"))
    return Tree(root, c_files, sum(1 for f in files if f.endswith(".h")), digest.hexdigest())


def _makefile(directories: list[str], objects: dict[str, list[str]], deps: dict[str, list[str]]) -> str:
    archives = [f"{d}/built-in.a" for d in directories]
    every = [o for d in directories for o in objects[d]] + ["init/main.o"]
    lines = ["# generated by perflab's kernbench tree generator: one rule per object, a built-in.a per",
             "# directory and a final link, as a kernel build; `make -jN` parallelises the objects.",
             "CC ?= cc", "AR ?= ar", "CFLAGS ?= -O2 -g0 -Wall -Wno-unused-function -Werror=implicit-function-declaration",
             "KBFLAGS := -Iinclude -I. -std=gnu11", "", ".PHONY: all clean", "all: vmlinux", "",
             "vmlinux: init/main.o " + " ".join(archives),
             "\t@echo '  LD      $@'",
             "\t$(Q)$(CC) -o $@ init/main.o -Wl,--whole-archive " + " ".join(archives) + " -Wl,--no-whole-archive",
             "", "Q ?= @", ""]
    for d in directories:
        lines += [f"{d}/built-in.a: " + " ".join(objects[d]), "\t@echo '  AR      $@'",
                  "\t$(Q)rm -f $@ && $(AR) rcs $@ $^", ""]
    for obj in every:
        lines += [f"{obj}: " + " ".join(deps[obj]), "\t@echo '  CC      $@'",
                  "\t$(Q)$(CC) $(CFLAGS) $(KBFLAGS) -c -o $@ $<", ""]
    lines += ["clean:", "\trm -f vmlinux " + " ".join(archives)]
    for i in range(0, len(every), 40):
        lines.append("\trm -f " + " ".join(every[i:i + 40]))
    return "\n".join(lines) + "\n"

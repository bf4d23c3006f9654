#!/usr/bin/env python3
"""Accuracy of perflab's LMbench-class suite against LMbench 3, side by side.

Targets (issue 3): where the definitions match, each figure agrees with
LMbench 3 on the same machine within 15%; the run-to-run coefficient of
variation of every latency figure in `perflab run lmbench --quick` is printed
(aim: under 5% on a quiet machine).

Part 1 runs every figure with both tools, alternating them, --rounds times,
both pinned to the same CPU (--cpu) and on the same files; it prints ours,
LMbench's (medians over the rounds), the ratio and PASS/FAIL against 15%.
Figures whose definitions differ on purpose (docs/lmbench.md) are marked
"differs" and not counted. Part 2 runs `perflab run lmbench --quick`
--quick-runs times into a scratch store and prints each figure's CoV over the
runs' figures (each run's median, as `perflab report lmbench` prints it).

LMbench 3 comes from Debian's non-free component; when it is missing this
script enables non-free (/etc/apt/sources.list.d/perflab-nonfree.sources) and
installs it (root needed).

    .venv/bin/python tools/bench/lmbench_accuracy.py [--rounds 3] [--quick-runs 5] [--cpu 0]
                                                     [--dir /var/tmp] [--only PREFIX ...] [--enough US]
                                                     [--skip-cov] [--skip-accuracy]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from perflab.core import cbuild
from perflab.benchmarks.lmbench import catalog, driver

PERFLAB = shutil.which("perflab", path=os.path.dirname(sys.executable)) or shutil.which("perflab")
TOLERANCE = 0.15
FILE_SIZE = 64 << 20
NONFREE = """Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


def lmbench_dir() -> Path:
    arch = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu"}.get(platform.machine(), "")
    return Path("/usr/lib/lmbench/bin") / arch


def ensure_lmbench() -> Path:
    bindir = lmbench_dir()
    if (bindir / "lat_syscall").exists():
        return bindir
    if os.geteuid() != 0:
        sys.exit("LMbench 3 is not installed and installing it needs root: "
                 "enable Debian's non-free component and `apt-get install lmbench`")
    print("installing LMbench 3 from Debian non-free ...", flush=True)
    src = Path("/etc/apt/sources.list.d/perflab-nonfree.sources")
    if not src.exists():
        src.write_text(NONFREE)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-q"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-q", "lmbench"], check=True, env=env)
    if not (bindir / "lat_syscall").exists():
        sys.exit(f"lmbench installed but {bindir}/lat_syscall is missing")
    return bindir


# ---- running both tools ---------------------------------------------------

@dataclass
class Ctx:
    bindir: Path
    workdir: Path
    file: Path
    cpu: int
    env: dict = field(default_factory=dict)
    stat_file: Path | None = None
    binaries: dict[str, Path] = field(default_factory=dict)

    def pin(self) -> list[str]:
        return ["taskset", "-c", str(self.cpu)]

    def ours(self, program: str, metric: str, extra: list[str] | None = None) -> float:
        """Median of one process's samples of one of our figures, as the full mode takes them."""
        mode = driver.FULL
        cmd = [*self.pin(), str(self.binaries[program]), "-n", str(mode.samples_of(program)),
               "-t", f"{mode.target_ms:g}", "-d", str(self.workdir), "-o", metric, *(extra or [])]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if out.returncode != 0:
            raise RuntimeError(f"{program} -o {metric}: {out.stderr.strip()}")
        values = [json.loads(line)["value"] for line in out.stdout.splitlines() if line.strip()]
        if not values:
            raise RuntimeError(f"{program} -o {metric}: no output")
        return statistics.median(values)

    def lm(self, *args: str, env: dict | None = None) -> str:
        """Run an LMbench program pinned; its report (LMbench writes to stderr)."""
        cmd = [*self.pin(), str(self.bindir / args[0]), *args[1:]]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=self.workdir,
                             env=dict(os.environ, **self.env, **(env or {})))
        return out.stderr + out.stdout

    def server(self, name: str, *args: str) -> None:
        # the server daemonizes: it must not hold our pipes open
        subprocess.run([*self.pin(), str(self.bindir / name), "-s", *args], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60,
                       env=dict(os.environ, **self.env))
        time.sleep(0.3)

    def stop(self, name: str) -> None:
        subprocess.run([str(self.bindir / name), "-S", "localhost"], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)


def num(pattern: str, text: str) -> float:
    m = re.search(pattern, text, re.M)
    if not m:
        raise RuntimeError(f"LMbench output did not match {pattern!r}: {text.strip()[:200]!r}")
    return float(m.group(1))


@dataclass
class Check:
    metric: str
    ours: Callable[[Ctx], float]
    lmbench: Callable[[Ctx], float]
    how: str                      # the LMbench command compared with
    differs: str = ""             # why the definitions differ (not counted)


def checks() -> list[Check]:
    out: list[Check] = []
    f = "{file}"

    def add(metric, program, lm_fn, how, differs="", extra=None):
        out.append(Check(metric, lambda c, p=program, m=metric, e=extra: c.ours(p, m, e(c) if e else None),
                         lm_fn, how, differs))

    add("syscall.null", "lat_syscall", lambda c: num(r"syscall: ([\d.]+)", c.lm("lat_syscall", "null")), "lat_syscall null")
    add("syscall.null_io", "lat_syscall",
        lambda c: (num(r"read: ([\d.]+)", c.lm("lat_syscall", "read")) + num(r"write: ([\d.]+)", c.lm("lat_syscall", "write"))) / 2,
        "(lat_syscall read + write) / 2")
    add("syscall.stat", "lat_syscall", lambda c: num(r"stat: ([\d.]+)", c.lm("lat_syscall", "stat", str(c.stat_file))), "lat_syscall stat FILE")
    add("syscall.fstat", "lat_syscall", lambda c: num(r"fstat: ([\d.]+)", c.lm("lat_syscall", "fstat", str(c.stat_file))), "lat_syscall fstat FILE")
    add("syscall.open_close", "lat_syscall", lambda c: num(r"close: ([\d.]+)", c.lm("lat_syscall", "open", str(c.stat_file))), "lat_syscall open FILE")
    add("signal.install", "lat_sig", lambda c: num(r"installation: ([\d.]+)", c.lm("lat_sig", "install")), "lat_sig install")
    add("signal.handle", "lat_sig", lambda c: num(r"overhead: ([\d.]+)", c.lm("lat_sig", "catch")), "lat_sig catch")
    add("proc.fork", "lat_proc", lambda c: num(r"exit: ([\d.]+)", c.lm("lat_proc", "fork")), "lat_proc fork")
    add("proc.exec", "lat_proc", lambda c: num(r"execve: ([\d.]+)", c.lm("lat_proc", "exec")), "lat_proc exec")
    add("proc.sh", "lat_proc", lambda c: num(r"-c: ([\d.]+)", c.lm("lat_proc", "shell")), "lat_proc shell")
    for n in catalog.SELECT_COUNTS:
        add(f"select.fd{n}", "lat_select", lambda c, n=n: num(r"fd's: ([\d.]+)", c.lm("lat_select", "-n", str(n), "file")),
            f"lat_select -n {n} file",
            differs="LMbench passes N as nfds: only the fds below N are examined" if n < 100 else "")
        add(f"select.tcp{n}", "lat_select", lambda c, n=n: num(r"fd's: ([\d.]+)", c.lm("lat_select", "-n", str(n), "tcp")),
            f"lat_select -n {n} tcp",
            differs="LMbench passes N as nfds: only the fds below N are examined" if n < 100 else "")
    for k in catalog.CTX_SIZES_K:
        for p in catalog.CTX_PROCS:
            add(f"ctx.{p}p_{k}k", "lat_ctx", lambda c, p=p, k=k: _ctx(c, k)[p], f"lat_ctx -s {k} 2 4 ... 96",
                extra=lambda c, p=p, k=k: ["-p", str(p), "-s", str(k)])
    for k in catalog.FILE_SIZES_K:
        add(f"fs.create_{k}k", "lat_fs", lambda c, k=k: _fs(c)[k][0], "lat_fs DIR")
        add(f"fs.delete_{k}k", "lat_fs", lambda c, k=k: _fs(c)[k][1], "lat_fs DIR")
    file_arg = lambda c: ["-f", str(c.file)]  # noqa: E731
    add("vm.mmap", "lat_vm", lambda c: num(r"^\S+ ([\d.]+)", c.lm("lat_mmap", "64m", str(c.file))), "lat_mmap 64m FILE", extra=file_arg)
    add("vm.prot_fault", "lat_vm", lambda c: num(r"fault: ([\d.]+)", c.lm("lat_sig", "prot", str(c.file))), "lat_sig prot FILE", extra=file_arg)
    add("vm.page_fault", "lat_vm", lambda c: num(r"Pagefaults on \S+: ([\d.]+)", c.lm("lat_pagefault", str(c.file))), "lat_pagefault FILE", extra=file_arg)
    add("lat.pipe", "lat_ipc", lambda c: num(r"latency: ([\d.]+)", c.lm("lat_pipe")), "lat_pipe")
    add("lat.unix", "lat_ipc", lambda c: num(r"latency: ([\d.]+)", c.lm("lat_unix")), "lat_unix")
    add("lat.udp", "lat_ipc", lambda c: _client(c, "lat_udp", r"localhost: ([\d.]+)"), "lat_udp localhost")
    add("lat.tcp", "lat_ipc", lambda c: _client(c, "lat_tcp", r"localhost: ([\d.]+)"), "lat_tcp localhost")
    add("lat.tcp_connect", "lat_ipc", lambda c: _client(c, "lat_connect", r"localhost: ([\d.]+)"), "lat_connect localhost",
        differs="ours waits for the server's accept+close; LMbench's client outruns its server and stalls on SYN retransmits")
    add("bw.pipe", "bw_ipc", lambda c: num(r"bandwidth: ([\d.]+)", c.lm("bw_pipe")), "bw_pipe")
    add("bw.unix", "bw_ipc", lambda c: num(r"bandwidth: ([\d.]+)", c.lm("bw_unix")), "bw_unix")
    add("bw.tcp", "bw_ipc", lambda c: _client(c, "bw_tcp", r"^\S+ ([\d.]+) MB", "-m", "10m"), "bw_tcp -m 10m localhost")
    add("bw.file_reread", "bw_file", lambda c: num(r"^\S+ ([\d.]+)", c.lm("bw_file_rd", "64m", "io_only", str(c.file))), "bw_file_rd 64m io_only FILE", extra=file_arg)
    add("bw.file_open_close", "bw_file", lambda c: num(r"^\S+ ([\d.]+)", c.lm("bw_file_rd", "64m", "open2close", str(c.file))), "bw_file_rd 64m open2close FILE", extra=file_arg)
    add("bw.mmap_reread", "bw_file", lambda c: num(r"^\S+ ([\d.]+)", c.lm("bw_mmap_rd", "64m", "mmap_only", str(c.file))), "bw_mmap_rd 64m mmap_only FILE", extra=file_arg)
    add("bw.mmap_open_close", "bw_file", lambda c: num(r"^\S+ ([\d.]+)", c.lm("bw_mmap_rd", "64m", "open2close", str(c.file))), "bw_mmap_rd 64m open2close FILE", extra=file_arg)
    add("bw.bcopy_libc", "bw_mem", lambda c: num(r"^\S+ ([\d.]+)", c.lm("bw_mem", "32m", "bcopy")), "bw_mem 32m bcopy")
    add("bw.bcopy_hand", "bw_mem", lambda c: num(r"^\S+ ([\d.]+)", c.lm("bw_mem", "32m", "fcp")), "bw_mem 32m fcp")
    add("bw.mem_read", "bw_mem", lambda c: num(r"^\S+ ([\d.]+)", c.lm("bw_mem", "64m", "frd")), "bw_mem 64m frd")
    add("bw.mem_write", "bw_mem", lambda c: num(r"^\S+ ([\d.]+)", c.lm("bw_mem", "64m", "fwr")), "bw_mem 64m fwr")
    add("bw.bzero", "bw_mem", lambda c: num(r"^\S+ ([\d.]+)", c.lm("bw_mem", "64m", "bzero")), "bw_mem 64m bzero")
    add("mem.mhz", "lat_mem", lambda c: num(r"^(\d+) MHz", c.lm("mhz")), "mhz")
    add("mem.l1", "lat_mem", lambda c: _memrd(c)["l1"], "lat_mem_rd 64 128 (1 KB point)")
    add("mem.l2", "lat_mem", lambda c: _memrd(c)["l2"], "lat_mem_rd 64 128 (128 KB point)")
    add("mem.main", "lat_mem", lambda c: _memrd(c)["main"], "lat_mem_rd 64 128 (64 MB point)")
    add("mem.main_random", "lat_mem", lambda c: _memrd(c, "-t")["main"], "lat_mem_rd -t 64 128 (64 MB point)")
    return out


# LMbench programs that report several figures at once run once per round
_round_cache: dict = {}


def _ctx(c: Ctx, k: int) -> dict[int, float]:
    key = ("ctx", k)
    if key not in _round_cache:
        text = c.lm("lat_ctx", "-s", str(k), *map(str, catalog.CTX_PROCS))
        _round_cache[key] = {int(m.group(1)): float(m.group(2)) for m in re.finditer(r"^(\d+) ([\d.]+)$", text, re.M)}
    return _round_cache[key]


def _fs(c: Ctx) -> dict[int, tuple[float, float]]:
    if "fs" not in _round_cache:
        d = c.workdir / "lmbench_fs"
        d.mkdir(exist_ok=True)
        # Debian's lat_fs makes its files under tempnam(): $TMPDIR, else /tmp,
        # whatever directory it is given; where the files land matters (on
        # one ext4 here creating a file costs 12 us in one directory, 1 ms in
        # another), so both tools must use the same one
        text = c.lm("lat_fs", str(d), env={"TMPDIR": str(d)})
        _round_cache["fs"] = {int(m.group(1)): (1e6 / float(m.group(2)), 1e6 / float(m.group(3)))
                              for m in re.finditer(r"^(\d+)k\s+\d+\s+(\d+)\s+(\d+)", text, re.M)}
    return _round_cache["fs"]


def _memrd(c: Ctx, *options: str) -> dict[str, float]:
    key = ("memrd", *options)
    if key not in _round_cache:
        text = c.lm("lat_mem_rd", *options, "64", "128")
        points = {float(m.group(1)): float(m.group(2)) for m in re.finditer(r"^([\d.]+) ([\d.]+)$", text, re.M)}
        _round_cache[key] = {"l1": points[0.00098], "l2": points[0.125], "main": points[max(points)]}
    return _round_cache[key]


def _client(c: Ctx, name: str, pattern: str, *args: str) -> float:
    c.server(name)
    try:
        return num(pattern, c.lm(name, *args, "localhost"))
    finally:
        c.stop(name)


# ---- part 1: side by side ------------------------------------------------------

def make_file(path: Path, size: int) -> None:
    """The file both tools map and read: written in 64 KB blocks, as our programs write theirs."""
    block = bytes((i * 7 + 1) & 0xFF for i in range(65536))
    with open(path, "wb") as f:
        for _ in range(size // len(block)):
            f.write(block)


def accuracy(args, bindir: Path) -> tuple[int, int]:
    workdir = Path(tempfile.mkdtemp(prefix="perflab-accuracy-", dir=args.dir))
    try:
        ctx = Ctx(bindir, workdir, workdir / "file", args.cpu)
        # what LMbench's own config-run measures once and exports to every benchmark
        for var, prog in (("ENOUGH", "enough"), ("TIMING_O", "timing_o"), ("LOOP_O", "loop_o")):
            ctx.env[var] = subprocess.run([*ctx.pin(), str(bindir / prog)], capture_output=True, text=True,
                                          timeout=300).stdout.strip()
        if args.enough:
            ctx.env["ENOUGH"] = str(args.enough)
        print("LMbench calibration: " + ", ".join(f"{k}={v}" for k, v in ctx.env.items()), file=sys.stderr)
        make_file(ctx.file, FILE_SIZE)
        ctx.stat_file = workdir / "stat"
        ctx.stat_file.write_text("")
        # Debian's lat_proc execs /var/tmp/lmbench/hello
        hello = Path("/var/tmp/lmbench/hello")
        if not hello.exists():
            hello.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(bindir / "hello", hello)
        for program in catalog.PROGRAMS:
            ctx.binaries[program] = cbuild.build(program, driver.SOURCE_DIR)
        todo = [c for c in checks() if not args.only or any(c.metric.startswith(p) for p in args.only)]
        ours: dict[str, list[float]] = {c.metric: [] for c in todo}
        theirs: dict[str, list[float]] = {c.metric: [] for c in todo}
        errors: dict[str, str] = {}
        for r in range(args.rounds):
            _round_cache.clear()
            print(f"round {r + 1}/{args.rounds} ...", file=sys.stderr, flush=True)
            for c in todo:
                try:
                    # alternate which tool goes first
                    if r % 2 == 0:
                        ours[c.metric].append(c.ours(ctx))
                        theirs[c.metric].append(c.lmbench(ctx))
                    else:
                        theirs[c.metric].append(c.lmbench(ctx))
                        ours[c.metric].append(c.ours(ctx))
                except (RuntimeError, KeyError, subprocess.SubprocessError) as e:
                    errors[c.metric] = str(e)[:160]
        print(f"\nPart 1: ours vs LMbench 3, median of {args.rounds} alternating rounds, both pinned to CPU {args.cpu}")
        print(f"{'figure':<20} {'unit':<5} {'ours':>10} {'LMbench':>10} {'ratio':>7}  verdict  LMbench command")
        passed = counted = 0
        for c in todo:
            unit = catalog.FIGURES[c.metric].unit
            if c.metric in errors or not ours[c.metric] or not theirs[c.metric]:
                print(f"{c.metric:<20} {unit:<5} {'':>10} {'':>10} {'':>7}  ERROR    {errors.get(c.metric, '')}")
                continue
            a, b = statistics.median(ours[c.metric]), statistics.median(theirs[c.metric])
            ratio = a / b if b else float("inf")
            ok = abs(ratio - 1) <= TOLERANCE
            if c.differs:
                verdict = "differs"
            else:
                counted += 1
                passed += ok
                verdict = "PASS" if ok else "FAIL"
            print(f"{c.metric:<20} {unit:<5} {a:>10.4g} {b:>10.4g} {ratio:>7.3f}  {verdict:<7}  {c.how}"
                  + (f"  [{c.differs}]" if c.differs else ""))
        print(f"\n{passed} of {counted} comparable figures within {TOLERANCE:.0%} of LMbench 3 "
              f"({len(todo) - counted - len(errors)} marked as differing by definition, {len(errors)} errors)")
        return passed, counted
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# ---- part 2: run-to-run CoV of --quick ------------------------------------------

def quick_cov(args) -> None:
    with tempfile.TemporaryDirectory(prefix="perflab-cov-") as tmp:
        db = os.path.join(tmp, "perflab.db")
        durations = []
        for i in range(args.quick_runs):
            t = time.monotonic()
            proc = subprocess.run([PERFLAB, "--db", db, "run", "lmbench", "--quick"], capture_output=True, text=True)
            durations.append(time.monotonic() - t)
            print(f"quick run {i + 1}/{args.quick_runs}: {proc.stdout.strip() or proc.stderr.strip()}",
                  file=sys.stderr, flush=True)
        con = sqlite3.connect(db)
        rows = con.execute("SELECT run_id, metric, value FROM sample").fetchall()
        con.close()
    by_run: dict[tuple[int, str], list[float]] = {}
    for run_id, metric, value in rows:
        by_run.setdefault((run_id, metric), []).append(value)
    means: dict[str, list[float]] = {}   # each run's figure as the summary prints it: its samples' median
    for (_, metric), values in sorted(by_run.items()):
        means.setdefault(metric, []).append(statistics.median(values))
    print(f"\nPart 2: run-to-run CoV over {args.quick_runs} `perflab run lmbench --quick` runs "
          f"(each {statistics.mean(durations):.0f} s on average, max {max(durations):.0f} s)")
    print(f"{'figure':<20} {'unit':<5} {'mean':>10} {'CoV':>7}")
    latency_covs = []
    for metric, f in catalog.FIGURES.items():
        values = means.get(metric, [])
        if len(values) < 2:
            print(f"{metric:<20} {f.unit:<5} {'':>10} {'n/a':>7}")
            continue
        mean = statistics.fmean(values)
        cov = statistics.stdev(values) / mean if mean else float("nan")
        mark = ""
        if f.unit in ("us", "ns"):
            latency_covs.append((cov, metric))
            mark = "  latency" + ("" if cov < 0.05 else "  > 5%")
        print(f"{metric:<20} {f.unit:<5} {mean:>10.4g} {cov:>7.2%}{mark}")
    under = sum(1 for cov, _ in latency_covs if cov < 0.05)
    median = statistics.median(c for c, _ in latency_covs)
    worst = sorted(latency_covs, reverse=True)[:5]
    print(f"\nlatency figures: {under} of {len(latency_covs)} under 5% CoV; median CoV {median:.2%}; "
          f"worst: {', '.join(f'{m} {c:.1%}' for c, m in worst)}")


def main() -> None:
    import signal

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # clean up the work directory
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick-runs", type=int, default=5)
    ap.add_argument("--cpu", type=int, default=0, help="CPU both tools are pinned to in part 1")
    ap.add_argument("--dir", default="/var/tmp", help="directory for the test files (LMbench's FSDIR default is /var/tmp)")
    ap.add_argument("--only", nargs="*", default=[], metavar="PREFIX", help="only figures starting with these")
    ap.add_argument("--enough", type=int, default=20000, metavar="US",
                    help="LMbench's ENOUGH, µs per timed interval (default 20000, about our sample length); "
                         "0: what LMbench's own `enough` program says (on a noisy machine anything from "
                         "5000 to 1000000)")
    ap.add_argument("--skip-cov", action="store_true")
    ap.add_argument("--skip-accuracy", action="store_true")
    args = ap.parse_args()
    if not args.skip_accuracy:
        accuracy(args, ensure_lmbench())
    if not args.skip_cov:
        quick_cov(args)


if __name__ == "__main__":
    main()

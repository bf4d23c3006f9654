#!/usr/bin/env python3
"""Import of a big hyperfine file: time, memory, and how long a concurrent writer waits.

Targets (issue 8, item 17; before the fix a 48 MB file took 80 s and 1.16 GB,
and held the write lock for the whole import, so that a `perflab run` beside
it failed with "database is locked" after its 30 s busy timeout):
- peak memory of the `perflab import` process below 3x the file's size;
- a concurrent writer, committing one repetition's samples every 20 ms as
  `perflab run` does, never waits more than 1 s for the lock (and never fails);
- the import itself within 40 s on the 2-CPU test machine (half the time before).

The file is made here: COMMANDS commands of RUNS timed runs each, with exit
codes and memory figures (hyperfine >= 1.19), pretty-printed as hyperfine
writes it; 40 x 21,000 gives 48 MB and 2.52 million samples (--compact:
without indentation, 40 x 45,000 gives 48 MB and 5.4 million samples).

    .venv/bin/python tools/bench/import_speed.py [--commands 40 --runs 21000] [--compact] [--baseline SRC]

--baseline SRC also imports the file with the perflab source tree SRC (e.g. an
older checkout's src/, `git archive HEAD src | tar -x -C /tmp/old`), side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

PERFLAB = shutil.which("perflab", path=os.path.dirname(sys.executable)) or shutil.which("perflab")
TARGET_MEMORY_RATIO = 3.0
TARGET_WAIT_S = 1.0
TARGET_IMPORT_S = 40.0
WRITER_PERIOD_S = 0.020


def make_hyperfine(path: str, commands: int, runs: int, compact: bool = False, seed: int = 1) -> int:
    rng = random.Random(seed)
    results = []
    for c in range(commands):
        base = rng.uniform(0.0005, 0.05)
        times = [base * rng.lognormvariate(0, 0.05) for _ in range(runs)]
        results.append({
            "command": f"./bench --case {c}", "mean": statistics.fmean(times), "stddev": statistics.stdev(times),
            "median": statistics.median(times), "user": base / 2, "system": base / 4,
            "min": min(times), "max": max(times), "times": times,
            "memory_usage_byte": [rng.randrange(1_000_000, 9_000_000) for _ in range(runs)],
            "exit_codes": [0] * runs,
        })
    with open(path, "w") as f:
        json.dump({"results": results}, f, indent=None if compact else 2)
    return os.path.getsize(path)


def writer(db: str, stop_file: str, out: str) -> None:
    """Commit one repetition of 5 samples every WRITER_PERIOD_S, as the runner does,
    and record how long each commit took (its wait for the lock, mostly)."""
    from perflab.core.model import Sample
    from perflab.store import open_store

    store = open_store(db)
    run_id = store.create_run(box="bench", environment={"testbox": "bench"}, benchmark="cmd",
                              name="concurrent writer", params={})
    waits, failures, rep = [], [], 0
    while not os.path.exists(stop_file):
        samples = [Sample(f"m.{k}", random.random(), "s", -1) for k in range(5)]
        start = time.monotonic()
        try:
            store.add_samples(run_id, rep, samples)
        except Exception as e:  # "database is locked" after the busy timeout: what the fix prevents
            failures.append(str(e))
        waits.append(time.monotonic() - start)
        rep += 1
        time.sleep(WRITER_PERIOD_S)
    store.finish_run(run_id, "finished")
    with open(out, "w") as f:
        json.dump({"waits": waits, "failures": failures}, f)


def import_once(db: str, path: str, env: dict | None = None, command: list[str] | None = None) -> tuple[float, int, str]:
    """(wall seconds, max RSS in bytes, stdout+stderr) of one `perflab import` process."""
    start = time.monotonic()
    proc = subprocess.Popen(command or [PERFLAB, "--db", db, "import", path], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)
    out = proc.stdout.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"import failed ({proc.returncode}): {out}")
    return wall, usage.ru_maxrss * 1024, out.strip()


def measure(tmp: str, path: str, size: int, label: str, env: dict | None = None, command_of=None) -> bool:
    db = os.path.join(tmp, f"{label}.db")
    subprocess.run([PERFLAB, "--db", db, "runs"], capture_output=True, env=env)  # create the store first
    stop, out = os.path.join(tmp, f"{label}.stop"), os.path.join(tmp, f"{label}.writer.json")
    bench = subprocess.Popen([sys.executable, __file__, "--writer", db, stop, out], env=env)
    time.sleep(1.0)  # the writer is committing before the import starts
    wall, rss, text = import_once(db, path, env, command_of(db) if command_of else None)
    open(stop, "w").close()
    bench.wait()
    with open(out) as f:
        stats = json.load(f)
    waits = sorted(stats["waits"])
    worst = waits[-1] if waits else float("nan")
    p99 = waits[int(len(waits) * 0.99)] if waits else float("nan")
    ratio = rss / size
    print(f"[{label}] {text.splitlines()[-1] if text else ''}")
    print(f"[{label}] import time {wall:.1f} s, ratio to the {TARGET_IMPORT_S:.0f} s target {wall / TARGET_IMPORT_S:.2f}")
    print(f"[{label}] peak memory {rss / 1e6:.0f} MB = {ratio:.2f}x the file, ratio to the "
          f"{TARGET_MEMORY_RATIO:.0f}x target {ratio / TARGET_MEMORY_RATIO:.2f}")
    print(f"[{label}] concurrent writer: {len(waits)} commits, {len(stats['failures'])} failed, "
          f"longest wait {worst * 1000:.0f} ms (p99 {p99 * 1000:.0f} ms), ratio to the "
          f"{TARGET_WAIT_S * 1000:.0f} ms target {worst / TARGET_WAIT_S:.2f}")
    if stats["failures"]:
        print(f"[{label}] writer error: {stats['failures'][0]}")
    return (wall <= TARGET_IMPORT_S and ratio < TARGET_MEMORY_RATIO and worst <= TARGET_WAIT_S
            and not stats["failures"])


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == "--writer":
        writer(*sys.argv[2:])
        return 0
    if len(sys.argv) == 6 and sys.argv[1] == "--make":
        make_hyperfine(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "compact")
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--commands", type=int, default=40)
    ap.add_argument("--runs", type=int, default=21_000)
    ap.add_argument("--compact", action="store_true",
                    help="JSON without indentation (more samples per MB; try --runs 45000 for 48 MB)")
    ap.add_argument("--baseline", metavar="SRC", help="a perflab src/ tree to import with as well")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "hyperfine-big.json")
        # Made by another process: a child forked from a process that held the document
        # would inherit its high-water mark of memory (Linux keeps it across exec).
        subprocess.run([sys.executable, __file__, "--make", path, str(args.commands), str(args.runs),
                        "compact" if args.compact else "indented"], check=True)
        size = os.path.getsize(path)
        samples = args.commands * args.runs * 3
        print(f"file: {size / 1e6:.1f} MB, {args.commands} commands x {args.runs} runs = {samples:,} samples")
        ok = measure(tmp, path, size, "this tree")
        if args.baseline:
            env = dict(os.environ, PYTHONPATH=os.path.abspath(args.baseline))
            measure(tmp, path, size, "baseline", env,
                    lambda db: [sys.executable, "-c", "import sys; from perflab.cli import entry; sys.argv[0] = 'perflab'; entry()",
                                "--db", db, "import", path])
    print("all targets met" if ok else "a target was missed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The lab's queueing figures (issue 14), measured with a real redis-server and real workers.

1. submit -> start latency on an idle worker: median of N (target < 100 ms);
2. 1,000 queued no-op jobs drained by 2 workers of one box: none lost, none run twice;
3. idle worker CPU over 30 s, from /proc/PID/stat (target < 0.5 % of a core).

    .venv/bin/python tools/bench/lab_queue.py [--latency-n 30] [--drain 1000] [--idle-s 30]

Run it on a quiet machine (see `uptime`): other work distorts every figure.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from services import RedisServer  # noqa: E402

from perflab.automate.lab import app as lab  # noqa: E402
from perflab.automate.lab import client  # noqa: E402

PERFLAB = str(Path(sys.executable).with_name("perflab"))
NOOP = {"benchmark": "cmd", "runs": 1, "warmup": 0, "timeout": None, "tag": None, "comment": None, "monitors": {},
        "params": {"command": "/bin/true"}}


def cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])   # utime + stime (fields 14, 15 of proc(5))


def start_worker(tmp: Path, broker: str, db: str, box: str, n: int) -> subprocess.Popen:
    log = open(tmp / f"worker-{box}-{n}.log", "ab")
    return subprocess.Popen([PERFLAB, "worker", "--box", box, "--broker", broker, "--db", db,
                             "--spool", str(tmp / f"spool-{box}-{n}"), "--visibility-timeout", "600"],
                            stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, XDG_CACHE_HOME=str(tmp / "cache")))


def wait_for(predicate, timeout: float, what: str, step: float = 0.01):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(step)
    raise SystemExit(f"timed out waiting for {what}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency-n", type=int, default=30)
    ap.add_argument("--drain", type=int, default=1000)
    ap.add_argument("--idle-s", type=float, default=30.0)
    args = ap.parse_args()
    print(f"load before: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} "
          f"(1/5/15 min) on {os.cpu_count()} CPUs")
    tmp = Path(tempfile.mkdtemp(prefix="perflab-labbench-"))
    with RedisServer() as server:
        broker = server.url
        r = lab.redis_client(broker)
        app = lab.make_app(broker)
        workers = []
        try:
            # 1. latency: one worker, one job at a time, from publish to the task's first Redis write
            db = str(tmp / "shared.db")
            workers.append(start_worker(tmp, broker, db, "L", 0))
            wait_for(lambda: any(True for _ in r.scan_iter("perflab:worker:L:*")), 30, "the worker")
            sid, _ = client.submit(broker, [NOOP], ["L"])          # warm-up (imports of the first job)
            wait_for(lambda: r.hget(lab.submission_key(sid), "done:L") == "1", 60, "warm-up")
            latencies = []
            with app.producer_or_acquire() as producer:
                for i in range(args.latency_n):
                    before = r.hlen(lab.ATTEMPTS)
                    began = time.perf_counter()
                    app.send_task(lab.TASK, args=[NOOP, sid, "L"], queue=lab.queue_name("L"), producer=producer)
                    while r.hlen(lab.ATTEMPTS) == before:
                        time.sleep(0.0005)
                    latencies.append(time.perf_counter() - began)
                    wait_for(lambda: r.hget(lab.submission_key(sid), "done:L") == str(i + 2), 60, "a job")
            median = statistics.median(latencies) * 1000
            print(f"submit -> start on an idle worker: median {median:.1f} ms of {len(latencies)} "
                  f"(min {min(latencies)*1000:.1f}, max {max(latencies)*1000:.1f}); target 100 ms: "
                  f"ratio {median / 100:.2f}")

            # 3. idle CPU of that worker, now idle
            pid = workers[0].pid
            t0, c0 = time.monotonic(), cpu_ticks(pid)
            time.sleep(args.idle_s)
            t1, c1 = time.monotonic(), cpu_ticks(pid)
            share = (c1 - c0) / os.sysconf("SC_CLK_TCK") / (t1 - t0) * 100
            print(f"idle worker CPU over {t1 - t0:.0f} s: {share:.3f} % of a core; target 0.5 %: ratio {share / 0.5:.2f}")

            # 2. drain: N no-op jobs queued first, then 2 workers of one box
            db2 = str(tmp / "drain.db")
            sid2, count = client.submit(broker, [dict(NOOP, params={"command": f"/bin/true {i}"})
                                                 for i in range(args.drain)], ["Q"])
            began = time.monotonic()
            workers += [start_worker(tmp, broker, db2, "Q", n) for n in (1, 2)]
            wait_for(lambda: int(r.hget(lab.submission_key(sid2), "done:Q") or 0) >= count, 3600, "the drain", 0.5)
            drained = time.monotonic() - began
            time.sleep(3)  # the last uploads
            attempts = [int(v) for k, v in r.hgetall(lab.ATTEMPTS).items()]
            con = sqlite3.connect(db2)
            runs, distinct = con.execute("SELECT count(*), count(DISTINCT json_extract(job, '$.lab.task')) FROM run "
                                         "WHERE status = 'finished'").fetchone()
            con.close()
            spooled = sum(1 for n in (1, 2) for p in [tmp / f"spool-Q-{n}" / "Q.db"] if p.exists()
                          for _ in sqlite3.connect(p).execute("SELECT 1 FROM run"))
            lost, twice = count - distinct, runs - distinct
            print(f"drain of {count} no-op jobs by 2 workers: {drained:.1f} s ({count / drained:.1f} jobs/s); "
                  f"in the store {runs} runs of {distinct} tasks, {spooled} still spooled: lost {lost}, run twice {twice}; "
                  f"deliveries > 1: {sum(1 for a in attempts if a > 1)}")
        finally:
            for w in workers:
                w.terminate()
            for w in workers:
                w.wait(30)
    print(f"load after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Does a run over SSH measure what a run on the machine itself measures? (issue 46, "Done when")

Starts an sshd on 127.0.0.1 (a generated host key and client key, as the tests do:
tests/services.py), then runs will-it-scale getppid1 (one task, bound to CPU 0) with
`perflab run` alternately on this machine and over SSH on this same machine
(`--on ssh://...`: perflab's static programs shipped to a run directory, driven by the agent
over ssh's channel), --rounds times, each run --runs repetitions of --duration seconds, into
one store (tags `host` and `ssh`). It prints the median of per_process_ops of each side, their
ratio (goal: within 5% of 1), the load average before and after, and where the store is: every
run is kept there with its machine's facts (`perflab show ID`; the SSH runs' facts are read on
the far side, through the agent: ssh_machine, hostname, kernel ...).

    tools/bench/ssh_agreement.py                       # 5 rounds of 3 x 5 s each side
    tools/bench/ssh_agreement.py --rounds 3 --duration 2 --runs 2   # does it run

Run it on a quiet machine: both sides share this machine's CPUs, and other processes' load is
noise of its own (a round-by-round alternation spreads slow drift over both sides alike). Each
`perflab run` starts in a session of its own, as sshd starts the far side's: with the kernel's
autogroup on, a session is a scheduling group, and under load a benchmark in this shell's
session (shared with whatever else it started) got 2.3 times less CPU than the one in sshd's
session (first measurement, load average 8.8-14 on 2 CPUs).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from services import SshServer  # noqa: E402

METRIC = "will-it-scale.per_process_ops"
GOAL = 0.05


def perflab() -> str:
    here = Path(sys.executable).parent / "perflab"
    return str(here) if here.exists() else (shutil.which("perflab") or "perflab")


def load() -> str:
    return "%.2f %.2f %.2f" % os.getloadavg()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--db", help="the store (default: a new file, kept)")
    args = ap.parse_args()
    db = args.db or tempfile.mkstemp(prefix="perflab-agreement-", suffix=".db")[1]
    if not args.db:
        os.unlink(db)
    before = load()
    with SshServer() as server:
        env = dict(os.environ, PERFLAB_DB=db, PERFLAB_SSH_CONFIG=str(server.config))
        common = ["run", "will-it-scale", "--test", "getppid1", "--nr-task", "1", "--duration", str(args.duration),
                  "--warmup-time", "1", "--runs", str(args.runs)]
        for round_no in range(args.rounds):
            sides = [("host", []), ("ssh", ["--on", server.on])]
            if round_no % 2:
                sides.reverse()       # neither side always first
            for tag, extra in sides:
                # A session of its own for both sides: sshd starts one per connection, and with the
                # kernel's autogroup (kernel.sched_autogroup_enabled) a session is a scheduling group:
                # under other load, a benchmark in a busy session gets less CPU than one in its own.
                done = subprocess.run([perflab(), *common, "--tag", tag, *extra], env=env, capture_output=True, text=True,
                                      start_new_session=True)
                if done.returncode != 0:
                    print(f"{tag} run failed: {done.stderr.strip()}", file=sys.stderr)
                    return 1
                print(f"round {round_no + 1} {tag}: {done.stdout.strip()}", flush=True)
    after = load()
    con = sqlite3.connect(db)
    values = {tag: [v for (v,) in con.execute(
        "SELECT s.value FROM sample s JOIN run r ON r.id = s.run_id WHERE r.tag = ? AND s.metric = ?", (tag, METRIC))]
        for tag in ("host", "ssh")}
    facts = {tag: json.loads(con.execute(
        "SELECT e.facts FROM run r JOIN environment e ON e.id = r.environment_id WHERE r.tag = ? ORDER BY r.id DESC",
        (tag,)).fetchone()[0]) for tag in ("host", "ssh")}
    host, ssh = statistics.median(values["host"]), statistics.median(values["ssh"])
    ratio = ssh / host
    # Each round's two runs side by side (they ran one right after the other): slow drift of the
    # machine's load cancels in their ratio; the median of the rounds' ratios beside the ratio of medians.
    per_run = {tag: [statistics.median([v for (v,) in con.execute(
        "SELECT value FROM sample WHERE run_id = ? AND metric = ?", (rid, METRIC))])
        for (rid,) in con.execute("SELECT id FROM run WHERE tag = ? ORDER BY id", (tag,))] for tag in ("host", "ssh")}
    paired = statistics.median(s / h for h, s in zip(per_run["host"], per_run["ssh"]))
    print(f"getppid1, 1 task, {args.rounds} rounds x {args.runs} x {args.duration:g} s per side "
          f"({len(values['host'])} + {len(values['ssh'])} samples)")
    print(f"  host median {host:,.0f} ops/s   (spread {min(values['host']):,.0f} .. {max(values['host']):,.0f})")
    print(f"  ssh  median {ssh:,.0f} ops/s   (spread {min(values['ssh']):,.0f} .. {max(values['ssh']):,.0f})")
    print(f"  ratio ssh/host {ratio:.4f}: {abs(ratio - 1) * 100:.2f}% apart; goal within {GOAL * 100:g}%: "
          f"{'met' if abs(ratio - 1) <= GOAL else 'NOT met'}")
    print(f"  median of the {len(per_run['host'])} rounds' ratios ssh/host {paired:.4f} "
          f"(rounds: {', '.join(f'{s / h:.3f}' for h, s in zip(per_run['host'], per_run['ssh']))})")
    print(f"  load average before {before}, after {after}; autogroup "
          f"{Path('/proc/sys/kernel/sched_autogroup_enabled').read_text().strip() if Path('/proc/sys/kernel/sched_autogroup_enabled').exists() else 'n/a'}")
    f = facts["ssh"]
    print(f"  the ssh runs' facts (read on the far side): ssh_machine={f.get('ssh_machine')} hostname={f.get('hostname')} "
          f"kernel={f.get('kernel_release')} cpu={f.get('cpu_model')} governor={f.get('cpufreq_governor')} "
          f"thp={f.get('thp_enabled')} loadavg_start={f.get('loadavg_start')}")
    print(f"  store: {db}  (perflab --db {db} runs)")
    return 0 if abs(ratio - 1) <= GOAL else 2


if __name__ == "__main__":
    sys.exit(main())

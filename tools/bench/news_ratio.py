#!/usr/bin/env python3
"""The C News paper's claim, measured here: bnews/cnews time per article, for filing and for expiry.

Target (issue 10): the ratio bnews/cnews for filing and for expiry, each with
its CoV over 5 runs, beside the paper's (C rnews over 19x B rnews in real
time, over 25x in system time, about 3.6x in user time; C expire minutes
where B expire took hours).

Both styles run through perflab itself (`perflab run news`, the one runner,
a temporary store), on the same generated feed (same seed), one style after
the other, `--runs` repetitions each (a repetition: a fresh spool, filing,
expiry). Printed per phase and per time (real, user, sys): the mean seconds
per article of each style with its CoV over the repetitions, and the ratio
bnews/cnews.

    .venv/bin/python tools/bench/news_ratio.py [--articles 2000] [--groups 100] [--runs 5]
        [--expire-days 7] [--seed 1] [--fs tmpfs|ext4|xfs|btrfs] [--dir PATH]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PERFLAB = shutil.which("perflab", path=str(Path(sys.executable).parent)) or shutil.which("perflab")
PAPER = {("file", ""): "over 19x", ("file", "_sys"): "over 25x", ("file", "_user"): "about 3.6x",
         ("expire", ""): "hours -> minutes (about 6x: 90 min -> 15 min, first C expire 10x)"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--articles", type=int, default=2000)
    ap.add_argument("--groups", type=int, default=100)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--expire-days", type=float, default=7)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--fs", help="a fresh filesystem of this type for the spool (needs root)")
    ap.add_argument("--dir", help="an existing directory for the spool")
    args = ap.parse_args()
    if not PERFLAB:
        sys.exit("news_ratio: the perflab command is not installed (use the repository's .venv)")
    with tempfile.TemporaryDirectory(prefix="news-ratio-") as tmp:
        db = Path(tmp) / "ratio.db"
        argv = [PERFLAB, "run", "news", "--style", "bnews", "--style", "cnews", "--articles", str(args.articles),
                "--groups", str(args.groups), "--runs", str(args.runs), "--expire-days", str(args.expire_days),
                "--seed", str(args.seed), "--db", str(db)]
        if args.fs:
            argv += ["--fs", args.fs]
        if args.dir:
            argv += ["--dir", args.dir]
        proc = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ))
        if proc.returncode != 0:
            sys.exit(f"news_ratio: perflab run failed:\n{proc.stdout}{proc.stderr}")
        con = sqlite3.connect(db)
        rows = con.execute("SELECT json_extract(r.params, '$.style'), s.metric, s.value FROM sample s "
                           "JOIN run r ON r.id = s.run_id WHERE s.metric LIKE 'news.%'").fetchall()
        con.close()
    values: dict[tuple[str, str], list[float]] = {}
    for style, metric, value in rows:
        values.setdefault((style, metric), []).append(value)

    def stat(style, metric):
        xs = values.get((style, metric), [])
        mean = statistics.fmean(xs) if xs else float("nan")
        cov = statistics.stdev(xs) / mean * 100 if len(xs) > 1 and mean > 0 else float("nan")
        return mean, cov, len(xs)

    print(f"news: {args.articles} articles, {args.groups} groups, seed {args.seed}, expire after "
          f"{args.expire_days:g} days, {args.runs} runs per style"
          + (f", fs {args.fs}" if args.fs else "") + (f", dir {args.dir}" if args.dir else ""))
    print(f"{'phase':7} {'time':5} {'bnews s/article':>16} {'CoV':>6} {'cnews s/article':>16} {'CoV':>6} "
          f"{'bnews/cnews':>12}  paper (C over B)")
    for phase in ("file", "expire"):
        for kind, label in (("", "real"), ("_user", "user"), ("_sys", "sys")):
            metric = f"news.{phase}{kind}_s_per_article"
            (bm, bc, _), (cm, cc, _) = stat("bnews", metric), stat("cnews", metric)
            ratio = bm / cm if cm > 0 else float("inf")
            print(f"{phase:7} {label:5} {bm:16.3e} {bc:5.1f}% {cm:16.3e} {cc:5.1f}% {ratio:11.1f}x  "
                  f"{PAPER.get((phase, kind), '')}")


if __name__ == "__main__":
    main()

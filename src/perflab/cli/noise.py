"""`perflab noise JOB.yaml | -- COMMAND`: the machine's noise, measured by an A/A of a job."""

from __future__ import annotations

import os

import click

from perflab.cli.common import FiniteFloat, db_option, get_store

DEFAULT_ROUNDS = 20   # 20 runs per side: the largest n the table shows, and a lag-1 estimate within ±0.3


def _is_job_file(words: tuple[str, ...]) -> bool:
    """One word naming a job file (a path, a .yaml/.yml name or a shipped job file): a job; else a command.
    A .yaml word that names no file is a job file that is missing, not a command (issue 31, L5)."""
    return len(words) == 1 and words[0].endswith((".yaml", ".yml"))


def _jobs_of(words: tuple[str, ...], overrides: tuple[str, ...], shell: bool) -> list:
    from perflab import jobs as jobfiles

    if not words:
        raise click.UsageError("give a job file (perflab noise JOB.yaml) or a command after -- (perflab noise -- CMD)")
    if _is_job_file(words):
        path = words[0]
        if not os.path.isfile(path):
            shipped = {p.name: p for p in jobfiles.shipped()}
            if path not in shipped:
                from perflab.core.errors import PerflabError

                raise PerflabError(f"job file {path}: no such file (shipped job files: `perflab jobs list`)")
            path = str(shipped[path])
        return jobfiles.load_atomic(path, list(overrides))
    if overrides:
        raise click.BadParameter("--set applies to a job file", param_hint="--set")
    from perflab.benchmarks.cmd import FAMILY

    job = jobfiles.atomic("cmd", {"argv": list(words), "shell": shell})
    FAMILY.command(job.parsed)    # the executable exists: checked before the store is opened
    return [job]


@click.command("noise")
@click.option("--rounds", type=click.IntRange(min=3), default=DEFAULT_ROUNDS, show_default=True,
              help="Rounds of the A/A: each runs side A and side B once, in a random order.")
@click.option("--change", "change_pct", type=FiniteFloat(0, open_min=True), default=2.0, show_default=True,
              metavar="PCT", help="The change you want to see: the runs per side each metric needs for it.")
@click.option("--warmup", "-w", type=click.IntRange(min=0), default=None,
              help="Untimed runs of each side first (default: the job's, at least 1).")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a key of the job file.")
@click.option("--shell", is_flag=True, help="Run the command through /bin/sh -c.")
@click.option("--seed", type=int, help="Seed of the order within rounds (default: a fresh random one).")
@click.option("--box", help="Testbox name (default: hostname).")
@click.option("--repo", type=click.Path(), help="Git checkout of the system under test: its commit is recorded.")
@db_option
@click.argument("words", nargs=-1, type=click.UNPROCESSED)
def noise_cmd(rounds, change_pct, warmup, overrides, shell, seed, box, repo, db, words) -> None:
    """Measure this machine's noise: an A/A of a job (the same job as sides A and B).

    The two sides run interleaved, round by round, in a random order within each
    round, and are stored like any run (tag noise-ID). Per metric it prints the CoV,
    the lag-1 serial correlation, whether the level moves in stretches, what the
    A/A itself finds, and the smallest change it could detect with 5, 10 and 20
    runs per side at 90% power; CPU time (user + system) is shown beside wall time.
    `check` and `robot` then say which metrics can see the change asked about.
    See docs/noise.md.

    \b
    Examples:
      perflab noise -- gzip -6 -c -k /tmp/big.file
      perflab noise bench.yaml --rounds 30 --change 1
    """
    import uuid

    from perflab.analysis import noise
    from perflab.report.noise import render
    from perflab.runner.loop import run_jobs
    from perflab.runner.service import raise_first_failure

    noise_id = uuid.uuid4().hex[:8]
    pairs = []
    for job in _jobs_of(words, overrides, shell):
        job = job.with_(warmup=warmup if warmup is not None else max(int(job.warmup or 0), 1))
        pairs.append([noise.noise_job(job, noise_id, side, rounds) for side in ("A", "B")])
    store = get_store(db, recording=True)   # records the A/A runs, reads their samples
    outcomes = run_jobs(store, [j for pair in pairs for j in pair], interleave=True, randomise=True, seed=seed,
                        box=box, repo=repo)
    raise_first_failure(outcomes)
    reports = [noise.from_runs(store, outcomes[i].run_id, outcomes[i + 1].run_id, change_pct / 100)
               for i in range(0, len(outcomes), 2)]
    click.echo(render(reports), nl=False)


COMMANDS = [noise_cmd]

"""Starting and resuming a bisection: everything is checked before the first step."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

from perflab.analysis.noise import plan_runs
from perflab.automate.bisect.algorithm import Bisection, Result
from perflab.automate.bisect.record import BisectError, Record, Settings, check_metric, find_record, record_dir
from perflab.automate.measurer import Measurer, kernel_spec
from perflab.core.errors import UsageProblem
from perflab.jobs.job import AtomicJob
from perflab.core.git import check_clean, git, repo_root, resolve

LAST_LOOK = 20      # the ends' last look, in runs per end (Settings: 5, 10, 20)


def start(store, *, repo: str, good: str, bad: str, build_cmd: str, job: AtomicJob | dict, metric: str, tag: str | None,
          box: str | None = None, build_timeout: float | None = None, settings: Settings | None = None,
          broker: str | None = None, source_url: str | None = None,
          say: Callable[[str], None] = lambda _m: None, measurer: Measurer | None = None,
          kernel: str | None = None, vm_mode: str | None = None, runs: int | None = None,
          noise_how: str = "perflab noise JOB") -> Result:
    """Validate everything, then bisect; BisectError/UsageProblem before any step for bad input.

    `job`: validated here unless it was already (a job file's is, by its expansion); a dict is its
    JSON form. `measurer`: how commits are measured (default: the record's, here or on its lab box).
    `kernel`: the repository is a kernel tree and each commit's build makes this image (a path in
    the build output directory); the job runs in a guest booted from it, in mode `vm_mode`, or, for
    a job on a kexec-capable SSH machine, on the machine kexec'ed into it (docs/bisect.md).
    `runs`: the ends' first look after this many runs each (else chosen from the job's stored noise,
    `perflab noise`, which `noise_how` says how to measure when there is none)."""
    from perflab import jobs

    root = repo_root(repo)
    good_sha = resolve(root, good, "--good")
    bad_sha = resolve(root, bad, "--bad")
    if good_sha == bad_sha:
        raise BisectError(f"--good {good} and --bad {bad} are the same commit {good_sha[:12]}: nothing to bisect")
    if git(root, "merge-base", "--is-ancestor", good_sha, bad_sha, check=False).returncode != 0:
        raise BisectError(f"--good {good} ({good_sha[:12]}) is not an ancestor of --bad {bad} ({bad_sha[:12]}); "
                          "git bisect needs the good commit in the bad one's history")
    check_clean(root)
    job = jobs.resolve(job)
    spec = None
    exact_time = job.target.exact_time      # a job file's own kernel under icount
    if kernel is not None:
        spec = kernel_spec(kernel, vm_mode, job)
        exact_time = spec.target(kernel).exact_time
        job = job.with_(kernel=None, vm={})      # each commit's kernel is set when it is measured
    elif vm_mode:
        raise UsageProblem(f"--vm {vm_mode}: give the kernel the build makes with --kernel IMAGE "
                           "(e.g. arch/x86/boot/bzImage)")
    direction, unit = check_metric(job, metric)
    # Every figure of a guest under icount is exact by construction, as its samples say (the target
    # marks them); else the Record decodes what the catalog's metric and unit say (valgrind's counts).
    exact = True if exact_time else None
    if broker:
        check_lab(broker, box, root, source_url, (good_sha, bad_sha))
    settings = _planned(store, job, metric, settings or Settings(), runs, box, say, noise_how)
    bisect_id = secrets.token_hex(4)
    tag = tag or f"bisect-{bisect_id}"
    rec = Record(id=bisect_id, repo=str(root), good=good_sha, bad=bad_sha, build=build_cmd,
                 job=job, metric=metric, tag=tag, direction=direction, unit=unit or "", exact=exact, box=box,
                 build_timeout=build_timeout, broker=broker, source_url=source_url,
                 kernel=spec.to_dict() if spec else None,
                 settings=asdict(settings), created=time.strftime("%Y-%m-%dT%H:%M:%S"),
                 path=str(record_dir(store) / f"{bisect_id}.json"))
    rec.save()
    say(f"bisection {bisect_id}: {good_sha[:12]}..{bad_sha[:12]} in {root}, metric {metric}, "
        f"runs tagged {tag}, record {rec.path}"
        + (f"; kernel $KBUILD_OUTPUT/{spec.image} " + _booted(spec, box if broker else None) if spec else ""))
    return Bisection(store, rec, say, measurer).run()


def _booted(spec, box: str | None) -> str:
    """Where each commit's kernel boots, in words: a lab box's worker decides between a guest and its
    SSH machine (kexec) unless a VM was asked for."""
    if spec.on:
        return f"kexec'ed on {spec.on}"
    if box and not spec.vm_asked:
        return f"booted on box {box} (kexec'ed when the box is an SSH machine, else in a VM ({spec.vm['mode']}))"
    return f"booted in a VM ({spec.vm['mode']})"


def _planned(store, job: AtomicJob, metric: str, settings: Settings, runs: int | None, box: str | None,
             say: Callable[[str], None], how: str) -> Settings:
    """The settings with the ends' looks the stored noise (or `runs`) asks for, said before the start.

    The ends are looked at after n, 2n, ... runs each up to max(20, n), n being `runs`, else the fewest of
    5/10/20 at which the stored noise sees --threshold (analysis.noise.plan_runs): looks the noise says
    cannot see the change are not taken, and the ends' alpha is spent over the looks that remain. An exact
    metric keeps its own path (one run per commit)."""
    plan = plan_runs(store, job, settings.threshold, metrics=lambda name: name == metric, runs=runs, box=box,
                     who="bisect", how=how, default_runs=LAST_LOOK)
    for line in plan.lines:
        say(f"stored noise: {line}")
    noise = plan.report.metric(metric) if plan.report is not None else None
    n = runs or (plan.runs if noise is not None and not noise.exact else None)
    if not n:
        return settings
    looks = 1
    while n * 2 ** looks <= max(LAST_LOOK, n):
        looks += 1
    return replace(settings, ends_start=n, ends_looks=looks)


def check_lab(broker: str, box: str | None, root: Path, source_url: str | None, commits: tuple[str, ...]) -> None:
    """Before any step on a lab box: the box named, the broker reachable, the commits at the source URL."""
    from perflab.automate.lab import app as lab

    if not box:
        raise UsageProblem("--broker: give the lab box to measure on with --box NAME")
    lab.check_box(box)
    lab.redis_client(broker)   # one line, at once, when the broker is away
    if source_url:
        # The box fetches from there: the commits it will be asked for must be on its branches or tags
        # (when a head there is unknown here, the box's fetch will tell).
        done = git(root, "ls-remote", source_url, check=False, timeout=120)
        if done.returncode != 0:
            raise BisectError(f"--source-url {source_url}: git cannot read it "
                              f"({(done.stderr.strip() or 'failed').splitlines()[-1]})")
        heads = {line.split()[0] for line in done.stdout.splitlines() if line.strip()}
        if all(git(root, "cat-file", "-e", f"{h}^{{commit}}", check=False).returncode == 0 for h in heads):
            for sha in commits:
                if not any(git(root, "merge-base", "--is-ancestor", sha, h, check=False).returncode == 0
                           for h in heads):
                    raise BisectError(f"--source-url {source_url}: commit {sha[:12]} is on none of its branches "
                                      "or tags: push it there first (the box fetches the commits from it)")


def resume(store, *, bisect_id: str | None, repo: str | None,
           say: Callable[[str], None] = lambda _m: None, measurer: Measurer | None = None) -> Result:
    root = repo_root(repo) if repo else None
    from perflab import jobs

    rec = find_record(store, bisect_id, root)
    check_clean(Path(rec.repo))
    rec.job = jobs.resolve(rec.job)   # read back from its JSON form: validated once, here
    say(f"resuming bisection {rec.id}: {rec.good[:12]}..{rec.bad[:12]} in {rec.repo}, metric {rec.metric}, "
        f"{len(rec.steps)} steps recorded, runs tagged {rec.tag}")
    return Bisection(store, rec, say, measurer).run()


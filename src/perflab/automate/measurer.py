"""The Measurer: "build commit X and run these jobs there", the one way automation measures a commit.

bisect, robot and the lab's worker all measure commits, and only through this
seam. A Measurer's `measure(commit, jobs, slot=...)` returns one Measured per
job (its runs, stored in the store the caller reads; their samples by metric;
whether it failed), or raises BuildFailed when the commit does not build.

- LocalMeasurer: here. A Trees object gives a worktree at the commit, built
  (ScratchTree: a fresh one per call, removed afterwards, for the robot; the
  bisection keeps one per end and one for its steps; a lab box keeps built
  worktrees of fetched commits, perflab.automate.lab.checkouts); the jobs then
  run through the one runner with `cwd=` that worktree (no os.chdir: `./prog`
  is the program built there).
- BoxMeasurer: on a lab box. The jobs are queued with their `source` (repository
  URL, commit, build command); the box's worker builds and runs them with a
  LocalMeasurer of its own, and the runs are read back from the shared store.

A kernel under test is the same LocalMeasurer given a KernelSpec (`--kernel IMAGE
--vm MODE` of bisect and robot; a lab job's `source.kernel`): the commit is built out
of tree by KernelBuilds, and the jobs run in a guest booted from
the image it built — the runner's guest path, not a loop of its own. A kernel that
does not boot (the runner's JobOutcome.boot_failure) raises KernelFailed (a
BuildFailed: bisect skips the commit) with the console's tail. A test substitutes a
fake that returns scripted Measured values (tests/test_measurer.py).

`measurer_for(store, MeasurerSpec(...))` makes every Measurer: where (Here, with the
Trees to build commits in, or OnBox), the build command and its timeout, and the kernel
under test if any. bisect (bisect/trees.measurer_spec), the robot and a lab box's worker
each say only what differs: their trees and where kernels are built.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from perflab.core.buildlog import first_errors
from perflab.core.errors import PerflabError
from perflab.core.git import BuildFailed, add_worktree, git, prune_worktrees, remove_worktree
from perflab.core.steps import step
from perflab.execution.targets import BootFailure
from perflab.execution.targets.qemu import Qemu
from perflab.jobs.job import AtomicJob


@dataclass
class Measured:
    """What one job gave at a commit."""

    status: str                                   # done | failed | cancelled
    error: str | None = None                      # why it failed (None when it did not)
    runs: list[int] = field(default_factory=list)                 # ids of its runs in the store
    values: dict[str, list[float]] = field(default_factory=dict)  # metric -> its samples, run after run
    samples: int = 0                              # samples stored


class SourceFailed(PerflabError):
    """A box could not fetch or check out the commit (the submitter's fault, not the commit's)."""

    def __init__(self, box: str, error: str):
        super().__init__(f"box {box}: {error}")
        self.error = error


class Measurer(Protocol):
    """Builds a commit and runs jobs there."""

    place: str   # where, for messages: "" (here) or " on box NAME"

    def measure(self, commit: str, jobs: list[AtomicJob], *, slot: str = "") -> list[Measured]:
        """Run `jobs` (atomic jobs, tag and comment set) at `commit`; one Measured per job.

        `slot` names a worktree kept between calls (a bisection's "good", "bad", "step")
        where an implementation keeps any; BuildFailed when the build fails."""
        ...

    def summary(self, measured: list[Measured]) -> str:
        """How much was measured, in words: "12 samples", "3 runs"."""
        ...


class Trees(Protocol):
    """Where a LocalMeasurer gets a worktree at a commit, built."""

    def checkout(self, commit: str, slot: str) -> AbstractContextManager[Path]:
        """The worktree at `commit`, built, for the duration of the with block; BuildFailed."""
        ...


def build(path: Path, command: str, timeout: float | None, env: dict[str, str] | None = None) -> str | None:
    """Run the build command in a worktree through the runner's executor; why it failed, or None.

    `env`: variables added to perflab's environment for the command (a kernel build's output directory)."""
    from perflab.execution import interrupt
    from perflab.execution.executor import ProcessSpec, execute

    if not command.strip():
        return None
    spec = ProcessSpec(["/bin/sh", "-c", command], item=f"--build {command!r}", cwd=str(path),
                       timeout=timeout, capture_stdout=False, env={**os.environ, **env} if env else None)
    with step(f"building in {path}: {command}"), interrupt.stop_requests_as_flag():
        result = execute(spec)
        interrupt.check()
    if result.ok:
        return None
    if result.timed_out or result.signal:
        return result.describe_failure(timeout, tail_lines=3)
    # The compiler's first error, not make's "Waiting for unfinished jobs" after it.
    said = first_errors(result.stderr_tail)
    return f"exited with status {result.exit_status}" + (": " + " | ".join(said) if said else "")


class ScratchTree:
    """A fresh worktree of `repo` per checkout, built, removed when the block ends."""

    def __init__(self, repo: Path, build_cmd: str, build_timeout: float | None = None, prefix: str = "perflab-robot-"):
        self.repo, self.build_cmd, self.build_timeout, self.prefix = repo, build_cmd, build_timeout, prefix

    @contextmanager
    def checkout(self, commit: str, slot: str = "") -> Iterator[Path]:
        base = Path(tempfile.mkdtemp(prefix=self.prefix))
        path = base / "tree"
        add_worktree(self.repo, path, commit)
        try:
            why = build(path, self.build_cmd, self.build_timeout)
            if why is not None:
                raise BuildFailed(f"--build failed: {why}", why)
            yield path
        finally:
            remove_worktree(self.repo, path)
            shutil.rmtree(base, ignore_errors=True)
            prune_worktrees(self.repo)


class KeptTrees:
    """One worktree of `repo` per slot, kept between calls: moved to the commit asked for and built
    again only when its commit changed (a patch series' checks: base, head, the reverted head).

    `files=False`: the worktrees hold HEAD only (a kernel tree's commits are built by KernelBuilds;
    the runs need only the commit recorded): no 25-second checkout of a kernel tree per slot."""

    def __init__(self, worktrees, build_cmd: str, build_timeout: float | None = None, files: bool = True):
        self.worktrees, self.build_cmd, self.build_timeout, self.files = worktrees, build_cmd, build_timeout, files
        self.built: dict[str, str] = {}   # slot -> commit built there

    @contextmanager
    def checkout(self, commit: str, slot: str = "") -> Iterator[Path]:
        slot = slot or "default"
        if slot not in self.worktrees.paths:
            self.worktrees.add(slot, commit, files=self.files)
        path = self.worktrees.paths[slot]
        if self.move(path, commit):
            self.built.pop(slot, None)      # what was built there is of another commit
        if self.built.get(slot) != commit:
            why = build(path, self.build_cmd, self.build_timeout)
            if why is not None:
                raise BuildFailed(f"--build failed: {why}", why)
            self.built[slot] = commit
        yield path

    def move(self, path: Path, commit: str) -> bool:
        """The slot's worktree at `commit`; whether it moved. Only the files that differ are
        rewritten (none without files), so the build remakes what they feed."""
        if git(path, "rev-parse", "HEAD").stdout.strip() == commit:
            return False
        git(path, "checkout", "--quiet", "--force", "--detach", commit)
        return True


def run_here(store, jobs: list[AtomicJob], *, box: str | None, path: Path | None) -> list[Measured]:
    """Run jobs through the one runner in `path` (stored with its commit), or here when None.

    Jobs validated already (perflab.jobs.resolve) are not validated again by the runner."""
    from perflab.runner.loop import run_jobs

    where = str(path) if path is not None else None
    return [Measured("failed" if o.error else "done", o.error, [o.run_id] if o.run_id else [], o.values, o.samples)
            for o in run_jobs(store, jobs, box=box, repo=where, cwd=where)]


def measure_rounds(measurer: Measurer, job: AtomicJob, commits: dict[str, str], rounds: int, metric: str, *,
                   seed: str, say: Callable[[str], None] = lambda _m: None) -> dict[str, list[float]]:
    """`rounds` runs of each commit ({slot: commit}), one of each per round in an order drawn at
    random per round (a slow stretch of the machine hits every side alike); each run's value of
    `metric` (its mean when a run gives several). BuildFailed, or PerflabError when a run fails."""
    import random

    rng = random.Random(seed)
    out: dict[str, list[float]] = {commit: [] for commit in commits.values()}
    for _ in range(rounds):
        order = list(commits.items())
        rng.shuffle(order)
        for slot, commit in order:
            got = measurer.measure(commit, [job.with_(runs=1)], slot=slot)[0]
            values = got.values.get(metric, [])
            if not values:
                raise PerflabError(f"{metric}: the job at {commit[:12]}{measurer.place} gave no value"
                                   + (f" ({got.error})" if got.error else ""))
            out[commit].append(sum(values) / len(values))
    return out


class LocalMeasurer:
    """Builds commits in worktrees here and runs jobs in them through the one runner.

    With `kernel` (and `builds`, where the kernels are built), the jobs run in a guest booted
    from the kernel `builds` made of the commit; `trees` then only gives the worktree at the
    commit the runs are recorded with (its build command is the kernel's, run by `builds`)."""

    def __init__(self, store, trees: Trees, *, box: str | None = None, kernel: KernelSpec | None = None,
                 builds: KernelBuilds | None = None, say: Callable[[str], None] = lambda _m: None):
        self.store, self.trees, self.box = store, trees, box
        self.kernel, self.builds, self.say = kernel, builds, say
        self.place = kernel.place if kernel else ""
        self.far = None          # the commits' trees on the SSH machine the jobs run on (automate/far_tree.py)

    def measure(self, commit: str, jobs: list[AtomicJob], *, slot: str = "") -> list[Measured]:
        what = f"{commit[:12]}" + (f" ({slot})" if slot else "")
        if self.kernel is None:
            with step(f"{what}: building and measuring"), self.trees.checkout(commit, slot) as path:
                return run_here(self.store, self._placed(jobs, path, commit, what), box=self.box, path=path)
        with step(f"{what}: kernel built and measured{self.place}"), self.trees.checkout(commit, slot) as path:
            image = self.builds.image_of(commit)
            started = time.monotonic()
            measured = run_in_guest(self.store, commit, jobs, image, self.kernel, box=self.box, path=path)
        self.say(f"kernel {commit[:12]}: {self.builds.said(commit)}, "
                 f"boot {_boot_seconds(self.store, measured)}, boot+run {time.monotonic() - started:.1f} s")
        return measured

    def _placed(self, jobs: list[AtomicJob], path: Path, commit: str, what: str) -> list[AtomicJob]:
        """Jobs that run on an SSH machine: the built worktree copied there first, and each job run in
        that copy (automate/far_tree.py); other jobs as they are."""
        from perflab.automate import far_tree

        if self.far is None:
            self.far = far_tree.FarTrees.for_jobs(jobs) or False
        if not self.far:
            return jobs
        for job in jobs:
            far_tree.check_job(job, f"{job.benchmark} at {what}")
        self.far.place(path, commit, what)
        return [self.far.job(j) for j in jobs]

    def summary(self, measured: list[Measured]) -> str:
        return f"{sum(m.samples for m in measured)} samples"

    def in_mode(self, vm_mode: str) -> "LocalMeasurer":
        """The same commits' kernels (the same builds) booted in another mode: icount to count."""
        assert self.kernel is not None
        return LocalMeasurer(self.store, self.trees, box=self.box, builds=self.builds, say=self.say,
                             kernel=self.kernel.in_mode(vm_mode))

    def close(self) -> None:
        if self.far:
            self.far.close()
        if self.builds is not None:
            self.builds.close()


# -- kernels under test ---------------------------------------------------------------

# What the build command is told: where kbuild writes (KBUILD_OUTPUT is kbuild's own O=).
BUILD_DIR_VARS = ("KBUILD_OUTPUT", "PERFLAB_BUILD_DIR")


class KernelFailed(BuildFailed):
    """A kernel built but did not boot (panic, hang, not a kernel): the commit is skipped like an unbuildable one.

    `console_tail` is the kernel's last console lines; the message is one line."""

    def __init__(self, message: str, console_tail: str = ""):
        super().__init__(message, message)
        self.console_tail = console_tail

    @classmethod
    def of(cls, commit: str, failure: BootFailure) -> "KernelFailed":
        """From the runner's word that the guest of a job never came up."""
        return cls(f"kernel of {commit[:12]} did not boot: {failure.message.strip()}", failure.console_tail.strip())


@dataclass(frozen=True)
class KernelSpec:
    """The kernel a commit's build makes and where it is booted: a guest, or an SSH machine (kexec)."""

    image: str        # the image's path relative to the build output directory: arch/x86/boot/bzImage
    vm: dict          # vm keys laid over the job's own (a bisection's: the whole block, normalized)
    on: str = ""      # a kexec-capable SSH machine the image is kexec'ed on, instead of a guest
    keep: bool = False   # with `on`: leave each commit's image copied there (--keep-kernel)
    # `vm` holds keys that were asked for (--vm, the job's vm block), not only the defaults: a lab
    # box that is an SSH machine kexecs the kernel itself and refuses a guest (automate/lab/worker.py).
    vm_asked: bool = False

    def to_dict(self) -> dict:
        return {"image": self.image, "vm": dict(self.vm),
                **({"on": self.on} if self.on else {}), **({"keep": True} if self.keep else {}),
                **({"vm_asked": True} if self.vm_asked else {})}

    def target(self, image: Path | str):
        """Where a commit's jobs run: its built image, booted in this guest, or installed on the
        machine and kexec'ed there (execution/targets/kexec.py), the runs' parameter `kernel` the
        image's path in the build output (the same for every commit: their runs compare)."""
        if self.on:
            from perflab.execution.targets.ssh import Ssh

            return Ssh(on=self.on, kernel=str(image), keep_kernel=self.keep, kernel_name=self.image)
        return Qemu(kernel=str(image), vm=dict(self.vm))

    @property
    def place(self) -> str:
        """Where its jobs run, for messages."""
        if self.on:
            return f" on {self.on} (kexec)"
        return f" in a VM ({self.vm['mode']})" if "mode" in self.vm else " in a VM"

    def in_mode(self, vm_mode: str) -> "KernelSpec":
        """The same kernel booted in another mode (icount, to count)."""
        if self.on:
            raise PerflabError(f"vm mode {vm_mode}: the kernels run on {self.on}, not in a VM")
        return KernelSpec(self.image, {**self.vm, "mode": vm_mode}, vm_asked=True)


def kernel_spec(image: str, vm_mode: str | None, job: AtomicJob, where: str = "--kernel") -> KernelSpec:
    """`--kernel IMAGE --vm MODE` for a job, checked before anything is built (one-line errors)."""
    from perflab.execution import targets
    from perflab.execution.vm.machine import qemu_binary
    from perflab import jobs
    from perflab.jobs import guest
    from perflab.execution.targets import kexec

    on = getattr(job.target, "on", "")
    kexec.check_built_kernel(image, on)
    if on:
        return _machine_kernel_spec(image, vm_mode, job, on, where)
    # The options go on as `run --kernel --vm` puts them on a job (the targets' one way: --vm over
    # the job's vm block); the image is the build's, so only the machine block is kept.
    keys = targets.placed(job.target.keys(), targets.option_keys({"kernel": image, "vm_mode": vm_mode}))
    _path, vm = guest.normalize(job.benchmark, image, keys.get("vm") or {}, where, job.monitors)
    spec = KernelSpec(image, vm, vm_asked=bool(keys.get("vm")))
    # The job as each commit will run it, placed once now: what watches it (valgrind) must run in
    # the guest too, refused before the first build.
    jobs.placed(job, spec.target(image), where)
    qemu_binary()     # installed, or one line naming the package
    return spec


def _machine_kernel_spec(image: str, vm_mode: str | None, job: AtomicJob, on: str, where: str) -> KernelSpec:
    """`--kernel IMAGE` of a job on an SSH machine: each commit's image kexec'ed there; the machine
    checked kexec-capable (and the job placeable there) before anything is built."""
    from perflab import jobs
    from perflab.core.errors import UsageProblem

    if vm_mode:
        raise UsageProblem(f"--vm {vm_mode}: with --on {on} each commit's kernel is kexec'ed on the machine, "
                           "not booted in a VM")
    if job.target.kernel:
        raise UsageProblem(f"{where} {image}: the job names its own kernel ({job.target.kernel}) on {on}; "
                           "each commit's kernel is the one its build makes")
    spec = KernelSpec(image, {}, on=on, keep=bool(job.target.keep_kernel))
    placed = jobs.placed(job, spec.target(image), where)
    placed.target.check(placed.needs, placed.benchmark, placed.params)
    return spec


def run_in_guest(store, commit: str, jobs: list[AtomicJob], image: Path, kernel: KernelSpec, *, box: str | None,
                 path: Path) -> list[Measured]:
    """Run jobs in a guest booted from `image` (or on the SSH machine kexec'ed into it: `kernel.on`) through
    the one runner; KernelFailed when it did not boot."""
    from perflab import jobs as jobfiles
    from perflab.runner.loop import run_jobs

    # kernel.vm is the whole block, checked once where the bisection or robot pass began: no step
    # checks it again.
    guest_jobs = [jobfiles.placed(j, kernel.target(image), "--kernel") for j in jobs]
    outcomes = run_jobs(store, guest_jobs, box=box, repo=str(path), cwd=str(path))
    for o in outcomes:
        if o.boot_failure is not None:
            raise KernelFailed.of(commit, o.boot_failure)
    return [Measured("failed" if o.error else "done", o.error, [o.run_id] if o.run_id else [], o.values, o.samples)
            for o in outcomes]


def _boot_seconds(store, measured: list[Measured]) -> str:
    """The kernels' boot times as the runs recorded them (a guest's vm_boot_seconds; on a machine,
    kexec_boot_seconds: from the request, install and kexec included)."""
    seen = []
    for m in measured:
        for run_id in m.runs:
            facts = store.get_run(run_id).environment or {}
            if isinstance(facts, str):
                import json

                facts = json.loads(facts)
            seconds = facts.get("vm_boot_seconds") or facts.get("kexec_boot_seconds")
            if seconds:
                seen.append(f"{seconds} s")
    return ", ".join(seen) or "n/a"


class KernelBuilds:
    """Kernels of a repository's commits, built out of tree and kept, by the one kernel build path
    (execution/vm/kbuild.py, the recipes' too: locks, a clean checkout, the build's process group
    tied to perflab, an image published whole and checked before use).

    One worktree (`src`) is checked out at each commit in turn, and the build command runs
    there with KBUILD_OUTPUT (and PERFLAB_BUILD_DIR) naming one output directory (`out`) kept
    between builds: kbuild rebuilds only what the checkout changed. Each commit's image (with
    the build's .config and System.map beside it) is published to `images/SHA/`, so measuring a
    commit again needs no build. The user's checkout is never touched."""

    def __init__(self, repo: Path, src: Path, out: Path, images: Path, build_cmd: str, image: str,
                 build_timeout: float | None = None, owned: bool = True, base: Path | None = None,
                 say: Callable[[str], None] = lambda _m: None):
        self.repo, self.src, self.out, self.images, self.base = repo, src, out, images, base
        self.say = say                            # progress: a wait for another build of the same directories
        self.build_cmd, self.image, self.build_timeout, self.owned = build_cmd, image, build_timeout, owned
        self.seconds: dict[str, float] = {}      # commit -> seconds its build took here

    def said(self, commit: str) -> str:
        seconds = self.seconds.pop(commit, None)
        return "image kept from an earlier build" if seconds is None else f"build {seconds:.1f} s"

    def image_of(self, commit: str) -> Path:
        """The kernel image of `commit`, built when not kept yet; BuildFailed when the build fails."""
        from perflab.execution.targets import kexec
        from perflab.execution.vm import kbuild
        from perflab.execution.vm.recipe import DEB

        # A package (a pattern of the files the build leaves) is kept under one name, as a recipe's is.
        made = DEB if (package := kexec.is_package(self.image)) else self.image
        entry = self.images / commit
        kept = entry / Path(made).name
        expect = {"commit": commit, "image": self.image}
        if kbuild.published(entry, kept.name, expect) is not None:
            os.utime(entry)      # used: the newest are kept when old images are pruned (a series' clone)
            return kept

        def steps(run: kbuild.Running) -> None:
            since = time.time()
            if self.build_cmd.strip():
                try:
                    run.run(["/bin/sh", "-c", self.build_cmd], f"--build {self.build_cmd!r}",
                            {v: str(run.out) for v in BUILD_DIR_VARS})
                except BuildFailed as e:
                    raise BuildFailed(f"--build failed: {e.why}", e.why) from None
            if package:
                kexec.take_package(run.out, self.image, since, run.out / DEB)

        started = time.monotonic()
        try:
            kbuild.build(kbuild.Worktree(self.repo, self.src), commit, self.out, steps, image=made, entry=entry,
                         facts=lambda _out: {"build": self.build_cmd}, expect=expect, timeout=self.build_timeout,
                         say=self.say)
        except kbuild.NoImage:
            why = f"the build made no kernel at $KBUILD_OUTPUT/{self.image}"
            raise BuildFailed(f"--build: {why} (--kernel is relative to the build output directory)", why) from None
        self.seconds[commit] = time.monotonic() - started
        return kept

    def close(self) -> None:
        """Remove the worktree and the builds (when this object made them for one bisection or pass)."""
        from perflab.execution.vm import kbuild

        if not self.owned:
            return
        # A kernel tree's checkout and build directory: 25-40 s to remove here (a bisection's own,
        # in the user's repository: not kept; a series keeps its builds, automate/series.py).
        with step(f"removing the kernel builds in {self.out.parent}"):
            if self.src.exists():
                remove_worktree(self.repo, self.src, locked=True)
            for path in (self.src, self.out, self.images, self.base):
                if path is not None:
                    shutil.rmtree(path, ignore_errors=True)
            for path in (self.src, self.out):
                kbuild.lock_path(path).unlink(missing_ok=True)
            prune_worktrees(self.repo)


class BoxMeasurer:
    """Queues jobs with their source on a lab box and waits for their runs in the shared store."""

    def __init__(self, store, *, broker: str, box: str, source_url: str, build_cmd: str,
                 build_timeout: float | None = None, say: Callable[[str], None] = lambda _m: None,
                 kernel: KernelSpec | None = None):
        self.store, self.broker, self.box = store, broker, box
        self.source_url, self.build_cmd, self.build_timeout, self.say = source_url, build_cmd, build_timeout, say
        self.kernel = kernel
        # The box boots the kernel in a guest, or kexecs it when the box is an SSH machine: its worker knows.
        booted = " in a VM" if kernel and kernel.vm_asked else " (its kernel)" if kernel else ""
        self.place = f" on box {box}{booted}"

    def measure(self, commit: str, jobs: list[AtomicJob], *, slot: str = "") -> list[Measured]:
        from perflab.automate.lab.client import run_on_box

        source = {"repo": self.source_url, "commit": commit, "build": self.build_cmd,
                  "build_timeout": self.build_timeout}
        if self.kernel is not None:
            source["kernel"] = self.kernel.to_dict()    # the box builds the kernel and boots it itself
        # "source" is a key of the queued job's JSON beyond AtomicJob's fields: it travels in `extra`.
        with step(f"{commit[:12]}: built and measured{self.place}"):
            results = run_on_box(self.broker, self.box, [j.with_(source=source) for j in jobs], self.store,
                                 say=self.say)
        failed = next((r for r in results if r.status == "build-failed"), None)
        if failed is not None:
            if failed.boot_failure is not None:
                raise KernelFailed(failed.boot_failure.message, failed.boot_failure.console_tail)
            raise BuildFailed(failed.error)
        failed = next((r for r in results if r.status == "source-failed"), None)
        if failed is not None:
            raise SourceFailed(self.box, failed.error)
        rows = defaultdict(list)
        for row in self.store.samples([r.id for res in results for r in res.runs]):
            rows[row.run_id].append(row)
        out = []
        for res in results:
            values: dict[str, list[float]] = {}
            for run in res.runs:
                for row in rows.get(run.id, []):
                    values.setdefault(row.metric, []).append(row.value)
            out.append(Measured(res.status, res.error, [r.id for r in res.runs], values,
                                sum(len(rows.get(r.id, [])) for r in res.runs)))
        return out

    def summary(self, measured: list[Measured]) -> str:
        return f"{sum(len(m.runs) for m in measured)} runs"

    def in_mode(self, vm_mode: str) -> "BoxMeasurer":
        """The same commits' kernels booted in another mode on the box: icount to count."""
        assert self.kernel is not None
        return BoxMeasurer(self.store, broker=self.broker, box=self.box, source_url=self.source_url,
                           build_cmd=self.build_cmd, build_timeout=self.build_timeout, say=self.say,
                           kernel=self.kernel.in_mode(vm_mode))


# -- the one factory -------------------------------------------------------------------

@dataclass(frozen=True)
class OnBox:
    """Measure on a lab box: queued on `broker`; the box fetches the commits from `source_url`."""

    broker: str
    box: str
    source_url: str


@dataclass(frozen=True)
class KernelDirs:
    """Where a kernel tree's commits are built out of tree here (KernelBuilds): a worktree of `repo`
    checked out at each commit in turn, kbuild's output directory kept between builds, each commit's image."""

    repo: Path
    src: Path
    out: Path
    images: Path
    owned: bool = True            # removed when the Measurer is closed (a lab box keeps its builds)
    base: Path | None = None      # a directory removed with them


@dataclass(frozen=True)
class Here:
    """Measure on this machine. `trees(build, timeout)`: where commits are checked out and built with that command."""

    trees: Callable[[str, float | None], Trees]
    box: str | None = None                  # the testbox its runs are recorded under
    kernel_dirs: KernelDirs | None = None   # needed when a kernel is measured (MeasurerSpec.kernel)


@dataclass(frozen=True)
class MeasurerSpec:
    """What commits are measured with: where, how they are built, and the kernel they make, if any."""

    where: Here | OnBox
    build: str = ""
    build_timeout: float | None = None
    kernel: KernelSpec | None = None   # the build makes this kernel; the jobs run in a guest booted from it


def measurer_for(store, spec: MeasurerSpec, say: Callable[[str], None] = lambda _m: None) -> Measurer:
    """The Measurer of a spec: bisect, the robot and a lab box's worker all make theirs here."""
    where = spec.where
    if isinstance(where, OnBox):
        return BoxMeasurer(store, broker=where.broker, box=where.box, source_url=where.source_url,
                           build_cmd=spec.build, build_timeout=spec.build_timeout, say=say, kernel=spec.kernel)
    if spec.kernel is None:
        return LocalMeasurer(store, where.trees(spec.build, spec.build_timeout), box=where.box)
    dirs = where.kernel_dirs
    if dirs is None:
        raise ValueError("measurer_for: a kernel measured here needs the directories its builds are kept in")
    builds = KernelBuilds(dirs.repo, dirs.src, dirs.out, dirs.images, spec.build, spec.kernel.image,
                          spec.build_timeout, owned=dirs.owned, base=dirs.base, say=say)
    # The build command makes the kernel, in `builds`: the worktree at the commit only records the runs.
    return LocalMeasurer(store, where.trees("", None), box=where.box, kernel=spec.kernel, builds=builds, say=say)

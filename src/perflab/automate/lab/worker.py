"""`perflab worker`: consume one box's queue, one atomic job at a time.

The Celery worker runs with the solo pool: the job runs in the worker's own
process (no pool child that would outlive a kill -9 of its parent), so a
killed worker is a killed job; its message was not acknowledged (late acks)
and goes back to the box's queue after the visibility timeout, to run again
when a worker of that box is there.

Each delivery of a task counts an attempt (Redis hash perflab:attempts) and
the atomic job is run with a "lab" entry added to it, stored with the run
(the run's job): {"submission", "task", "attempt", "worker"}.

A job with a "source" (bisect/robot --box) is measured by a LocalMeasurer
(perflab.automate.measurer) in a worktree of that commit, fetched and built on
this box first (perflab.automate.lab.checkouts); with a "source.kernel", the
commit's kernel is built here and booted in a guest, or, on a worker serving an
SSH machine, kexec'ed on that machine (KernelSpec.on). What became of each
task — its status and the uuids of its runs — is left in perflab:result:TASK for
a submitter that waits on it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from perflab.automate.lab import app as lab
from perflab.automate.lab.boxlock import BoxLock
from perflab.automate.lab.checkouts import BuildFailed, Checkouts, SourceError, check_source, describe
from perflab.automate.lab.spool import Spool, check_driver
from perflab.automate.measurer import KernelFailed
from perflab.core.errors import PerflabError
from perflab.jobs.job import AtomicJob
from perflab.core.text import printable


# The job keys the submitter's target options set (`submit --kernel K --vm M`), beside the job's
# normalized keys (a guest job's vm block is always filled in): what a machine's worker refuses.
TARGET_OPTIONS = "target_options"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass
class WorkerState:
    box: str
    name: str
    # The SSH machine it drives ("" for this one): a controller refuses at the start what cannot run there.
    machine: str = ""
    state: str = "idle"
    job: str = ""
    submission: str = ""
    since: str = field(default_factory=_now)
    last_error: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def set(self, **values) -> None:
        with self.lock:
            for k, v in values.items():
                setattr(self, k, v)

    def as_hash(self, pending: int) -> dict:
        with self.lock:
            return {"box": self.box, "worker": self.name, "host": socket.gethostname(), "pid": os.getpid(),
                    "machine": self.machine, "state": self.state, "job": self.job, "submission": self.submission, "since": self.since,
                    "last_error": self.last_error, "spooled": pending, "seen": _now()}


def _describe(job: dict) -> str:
    params = ", ".join(f"{k}={v}" for k, v in (job.get("params") or {}).items())
    at = f" at {describe(job['source'])}" if isinstance(job.get("source"), dict) else ""
    return printable(f"{job.get('benchmark')} {params}".strip() + at, 160)


class _RejectWithoutTraceback(logging.Filter):
    """Celery logs a task's Reject (our requeue on SIGTERM, or with the broker away) with the
    traceback of the raise: the one line before it says all there is to say."""

    def filter(self, record: logging.LogRecord) -> bool:
        from celery.exceptions import Reject

        if record.exc_info and isinstance(record.exc_info[1], Reject):
            record.exc_info, record.exc_text = None, None
        return True


class Worker:
    def __init__(self, box: str, broker: str, db: str | None, spool_dir: Path,
                 visibility_timeout: float, heartbeat_s: float = lab.HEARTBEAT_S, machine: str | None = None):
        self.box = lab.check_box(box)
        # A box that is a machine of perflab's configuration, driven over SSH from here (None: this machine).
        self.machine = machine
        if machine is not None:
            from perflab.execution.targets.ssh_machine import machine_of

            machine_of(machine, "--machine")     # configured, and its settings readable: else one line now
        check_driver(db)
        self.broker = broker
        self.redis = lab.redis_client(broker)
        self.name = f"{socket.gethostname()}-{os.getpid()}"
        # Before the spool is touched: a second worker of this box refuses, naming the first.
        self.lock = BoxLock(self.redis, self.box, self.name, int(heartbeat_s * 3) + 1)
        self.lock.acquire()
        self.spool = Spool(spool_dir, box, db)
        self.checkouts = Checkouts(spool_dir / "src")
        self.state = WorkerState(box, self.name, machine or "")
        self.heartbeat_s = heartbeat_s
        self.app = lab.make_app(broker, visibility_timeout)
        self._stop = threading.Event()
        self.app.task(name=lab.TASK, bind=True, acks_late=True, reject_on_worker_lost=True)(self._task_body())

    # -- the task --------------------------------------------------------------
    def _task_body(self):
        worker = self

        def run_job(task, job: dict, submission: str, box: str):
            return worker.run_one(task.request.id, job, submission, box)

        return run_job

    def run_one(self, task_id: str, job: dict, submission: str, box: str) -> str:
        from perflab.automate.measurer import run_here
        from perflab.execution import interrupt

        import redis
        from celery.exceptions import Reject

        r = self.redis
        sub = lab.submission_key(submission)
        try:
            attempt = r.hincrby(lab.ATTEMPTS, task_id, 1)
            if r.sismember(lab.CANCELLED, submission):
                with r.pipeline() as p:
                    p.hincrby(sub, f"cancelled:{box}", 1)
                    p.set(lab.result_key(task_id), json.dumps({"status": "cancelled", "error": "", "runs": []}),
                          ex=lab.RESULT_TTL_S)
                    p.execute()
                return "cancelled"
            if r.sismember(lab.done_key(submission), task_id):
                return "done before"   # redelivered after it completed (killed before its acknowledgement)
        except redis.RedisError as e:
            # Not run, not lost: back to the queue (or, with the broker gone, left unacknowledged
            # and restored after the visibility timeout).
            self.state.set(last_error=f"broker: {_now()} {printable(str(e), 200)}")
            raise Reject(f"broker unreachable before the job: {e}", requeue=True) from None
        job = {**job, "lab": {"submission": submission, "task": task_id, "attempt": attempt, "worker": self.name}}
        self.state.set(state="running", job=_describe(job), submission=submission, since=_now())
        self._beat()
        outcome, status, error, boot_failure = None, "failed", "", None
        try:
            if self.machine is not None:
                job = self._on_machine(job)
            if job.get("source") is not None:
                source = check_source(job["source"])
                measurer = self._measurer(source, job["source"].get("kernel"), job)
                try:
                    outcome = measurer.measure(source["commit"], [AtomicJob.from_dict(job)])[0]
                finally:
                    if getattr(measurer, "far", None):
                        measurer.far.close()      # the commit's tree copied to this box's machine
            else:
                outcome = run_here(self.spool.store, [AtomicJob.from_dict(job)], box=self.box, path=None)[0]
            status = outcome.status
            error = outcome.error or ""
        except KernelFailed as e:
            # The console's tail travels in a key of its own, so that the submitter records it with the skip.
            status, error = "build-failed", str(e)
            boot_failure = {"message": printable(str(e), 1000), "console_tail": printable(e.console_tail, 3000)}
        except BuildFailed as e:
            status, error = "build-failed", str(e)
        except SourceError as e:
            status, error = "source-failed", str(e)
            self.state.set(last_error=f"{_now()} job {task_id}: {printable(error, 300)}")
        except interrupt.Interrupted as stop:
            if not r.sismember(lab.CANCELLED, submission):
                # SIGTERM/Ctrl-C of the worker during the job (the runner took the signal from
                # Celery): the attempt is kept (interrupted), the job goes back to the box's
                # queue, and the worker shuts down as Celery would have.
                from celery.exceptions import Reject
                from celery.worker import state as celery_state

                self.state.set(state="stopping", job="", submission="", since=_now())
                celery_state.should_stop = 0
                self._upload()
                raise Reject(f"worker stopped by signal {stop.signum} during the job", requeue=True) from None
            status = "cancelled"   # cancel of a running job: the run is kept, marked interrupted
        except PerflabError as e:
            error = str(e)
            self.state.set(last_error=f"{_now()} job {task_id}: {printable(error, 300)}")
        runs = [self.spool.store.get_run(run_id).uuid for run_id in outcome.runs] if outcome is not None else []
        result = {"status": status, "error": printable(error, 2000), "runs": runs, "attempt": attempt}
        if boot_failure is not None:
            result["boot_failure"] = boot_failure
        # Completed (the run is safe in the spool) before the acknowledgement, so that a
        # redelivery after a kill right here is recognised and not run twice.
        self._record_end(submission, task_id, f"{'failed' if status.endswith('failed') else status}:{box}", result)
        self.state.set(state="idle", job="", submission="", since=_now())
        self._upload()
        self._beat()
        return status

    def _on_machine(self, job: dict) -> dict:
        """A job as this worker runs it: on its machine, over SSH. A kernel the submitter gave
        (`submit --kernel debian:R|IMAGE`) is the kernel under test there, installed and kexec'ed (a
        machine configured with kexec = true), not a guest's, and so is each commit's kernel of a kernel
        bisection (source.kernel): a guest on the machine (--vm; source.kernel's vm asked for) is not
        built, and a job that names another machine is not this box's; PerflabError either way."""
        from perflab.execution.targets.ssh import ON_KEY, Ssh

        on = job.get(ON_KEY)
        if on and on != self.machine:
            raise PerflabError(f"the job says {ON_KEY}: {printable(str(on), 100)}, and box {self.box} is machine "
                               f"{self.machine}: submit it to that machine's box, or without {ON_KEY}")
        asked = job.get(TARGET_OPTIONS) if isinstance(job.get(TARGET_OPTIONS), dict) else {}
        if asked.get("vm"):
            raise PerflabError(f"--vm: box {self.box} is the SSH machine {self.machine}, whose kernel under test runs "
                               "on the machine itself (kexec); a guest on it is not built: submit without --vm")
        source = job.get("source")
        kernel_keys = source.get("kernel") if isinstance(source, dict) else None
        if isinstance(kernel_keys, dict) and kernel_keys.get("vm_asked"):
            # SourceError: the submitter's bisection stops at once on this one line, before any build.
            raise SourceError(f"source.kernel.vm: box {self.box} is the SSH machine {self.machine}, where each "
                              "commit's kernel is kexec'ed; a guest on it is not built: bisect without --vm (and "
                              "without a vm block in the job)")
        placed = {k: v for k, v in job.items() if k not in ("vm", "kernel")}
        placed[ON_KEY] = self.machine
        kernel = job.get("kernel")
        if kernel:
            placed["kernel"] = Ssh.check_kernel(kernel, "key 'kernel'")
        return placed

    def _measurer(self, source: dict, kernel_keys, job: dict):
        """The Measurer of a job's source: built in a checkout here, or (source.kernel) a kernel tree
        built out of tree here (its builds kept per repository) and booted in a guest on this box, or,
        when this box is an SSH machine, each commit's image kexec'ed there (what `bisect --on MACHINE
        --kernel IMAGE` does from a controller; the runner holds the machine's lock around each switch)."""
        from perflab.automate.measurer import Here, KernelDirs, KernelSpec, MeasurerSpec, measurer_for

        def trees(build: str, timeout: float | None):
            # The commit fetched into the repository's mirror and checked out here (built, unless a kernel's).
            return self.checkouts.trees({**source, "build": build, "build_timeout": timeout})

        if kernel_keys is None:
            spec = MeasurerSpec(Here(trees, box=self.box), source["build"], source["build_timeout"])
            return measurer_for(self.spool.store, spec)
        if self.machine is not None:
            kernel = self._machine_kernel(kernel_keys, job)
        elif not (isinstance(kernel_keys, dict) and isinstance(kernel_keys.get("image"), str)
                  and isinstance(kernel_keys.get("vm"), dict)):
            raise SourceError("job key 'source.kernel': expected {image: path in the build output, vm: {...}}")
        else:
            kernel = KernelSpec(kernel_keys["image"], kernel_keys["vm"])
        # Kept between jobs (a bisection's steps build incrementally), one per repository, build and image.
        key = hashlib.sha1(json.dumps([source["repo"], source["build"], kernel.image]).encode()).hexdigest()[:16]
        home = self.checkouts.directory / f"kernel-{key}"
        mirror = self.checkouts.directory / hashlib.sha1(source["repo"].encode()).hexdigest()[:16] / "mirror.git"
        dirs = KernelDirs(mirror, home / "src", home / "build", home / "images", owned=False)
        spec = MeasurerSpec(Here(trees, box=self.box, kernel_dirs=dirs), source["build"], source["build_timeout"], kernel)
        return measurer_for(self.spool.store, spec)

    def _machine_kernel(self, kernel_keys, job: dict):
        """The KernelSpec of source.kernel on this box's machine: each commit's image kexec'ed there,
        checked as `bisect --on MACHINE --kernel IMAGE` checks it (declared kexec-capable, the job
        placeable there) before anything is fetched or built; SourceError in one line otherwise."""
        from perflab.automate.measurer import kernel_spec

        if not (isinstance(kernel_keys, dict) and isinstance(kernel_keys.get("image"), str)):
            raise SourceError("job key 'source.kernel': expected {image: path in the build output}")
        try:
            return kernel_spec(kernel_keys["image"], None, AtomicJob.from_dict(job), "source.kernel.image")
        except PerflabError as e:
            raise SourceError(f"box {self.box} is the SSH machine {self.machine}: {e}") from None

    def _record_end(self, submission: str, task_id: str, counter: str, result: dict,
                    patience_s: float = 60.0) -> None:
        """Mark the task done and count it, retrying while the broker is briefly away: the run is
        already safe in the spool, and `submit --wait` counts on these."""
        import redis

        deadline = time.monotonic() + patience_s
        while True:
            try:
                with self.redis.pipeline() as p:   # MULTI/EXEC: both or neither
                    p.sadd(lab.done_key(submission), task_id)
                    p.hincrby(lab.submission_key(submission), counter, 1)
                    p.set(lab.result_key(task_id), json.dumps(result), ex=lab.RESULT_TTL_S)
                    p.execute()
                return
            except redis.RedisError as e:
                self.state.set(last_error=f"broker: {_now()} {printable(str(e), 200)}")
                if time.monotonic() > deadline:
                    raise
                time.sleep(1.0)

    # -- housekeeping --------------------------------------------------------------
    def _upload(self) -> None:
        try:
            if self.spool.upload():
                with self.state.lock:
                    if self.state.last_error.startswith("store:"):
                        self.state.last_error = ""
        except PerflabError as e:
            self.state.set(last_error=f"store: {_now()} {printable(str(e), 300)} (results kept in {self.spool.path})")

    def _beat(self) -> None:
        try:
            if not self.lock.renew():
                self._lost_box()
                return
            key = lab.worker_key(self.box, self.name)
            state = {k: str(v) for k, v in self.state.as_hash(self.spool.pending()).items()}
            stale = state["last_error"] if state["last_error"].startswith("broker:") else ""
            if stale:
                state["last_error"] = ""   # written only if the broker answers: then it is back
            with self.redis.pipeline() as p:
                p.hset(key, mapping=state)
                p.expire(key, int(self.heartbeat_s * 3) + 1)
                p.sadd(lab.BOXES, self.box)
                p.execute()
        except Exception:   # the broker away for a while: the next beat tries again
            return
        if stale:
            self._broker_back(stale)

    def _broker_back(self, stale: str) -> None:
        """The broker answers again: its error leaves the state (`queue` and the dashboard would
        show it for good) and goes to the log, dated both ends."""
        with self.state.lock:
            if self.state.last_error != stale:
                return
            self.state.last_error = ""
        print(f"perflab worker: broker back at {_now()} after {stale}", file=sys.stderr, flush=True)

    def _lost_box(self) -> None:
        """Another worker took this box while the broker had lost our lock (a restart without
        persistence): two workers must not share a box, so this one stops as on SIGTERM."""
        if not self._stop.is_set():
            self._stop.set()
            print(f"perflab worker: box {self.box} is now held by {printable(self.lock.holder(), 100)}: stopping",
                  file=sys.stderr, flush=True)
            os.kill(os.getpid(), signal.SIGTERM)

    def _cancel_running(self) -> None:
        from perflab.execution import interrupt

        with self.state.lock:
            sid = self.state.submission if self.state.state == "running" else ""
        try:
            if sid and self.redis.sismember(lab.CANCELLED, sid):
                # What SIGTERM does during a run: the benchmark is stopped, the run marked interrupted.
                interrupt._note(15, None)
        except Exception:
            pass

    def _heartbeat_loop(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            self._cancel_running()
            if self.state.state == "idle":
                # Again and again, not only at start: a killed worker stays a zombie (its
                # /proc entry looks alive) until its parent reaps it.
                self.spool.recover()
                if self.spool.pending():
                    self._upload()
            self._beat()

    def run(self) -> None:
        self._beat()   # the box's lock renewed at once: the spool's upload below may take a while
        beat = threading.Thread(target=self._heartbeat_loop, name="perflab-heartbeat", daemon=True)
        beat.start()
        reaped = self.spool.recover()
        self._upload()
        self._beat()
        logging.getLogger("celery.app.trace").addFilter(_RejectWithoutTraceback())
        worker = self.app.Worker(
            pool="solo", concurrency=1, queues=[lab.queue_name(self.box)], hostname=f"{self.box}@{self.name}",
            prefetch_multiplier=1, without_gossip=True, without_mingle=True, without_heartbeat=True,
            loglevel="WARNING", quiet=True, redirect_stdouts=False,
        )
        print(json.dumps({"worker": self.name, "box": self.box, "queue": lab.queue_name(self.box),
                          "spool": str(self.spool.path), "reaped": reaped}), flush=True)
        try:
            worker.start()
        finally:
            self._stop.set()
            beat.join(10)   # its last beat must not renew the lock or the heartbeat after they are removed
            try:
                self.redis.delete(lab.worker_key(self.box, self.name))
            except Exception:
                pass
            self.lock.release()
        if worker.exitcode:
            raise PerflabError(f"worker of box {self.box} ended with status {worker.exitcode} (see its log above)")

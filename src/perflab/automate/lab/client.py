"""Submitting to the lab, looking at its queues, cancelling (`perflab submit/queue/cancel`)."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass

from perflab.automate.lab import app as lab
from perflab.core.errors import PerflabError
from perflab.execution.targets import BootFailure
from perflab.jobs.job import AtomicJob


def submit(broker: str, jobs: list[AtomicJob], boxes: list[str], *, source: str = "",
           task_ids: list[str] | None = None) -> tuple[str, int]:
    """Queue every atomic job on every box; (submission id, number of tasks).

    Each task's message carries the job's JSON form (AtomicJob.to_dict), the one the worker
    stores with its run. The ids of the tasks queued (box by box, job by job) are appended to
    `task_ids` when given."""
    for box in boxes:
        lab.check_box(box)
    r = lab.redis_client(broker)   # fails at once, in one line, when the broker is away
    app = lab.make_app(broker)
    sid = uuid.uuid4().hex[:12]
    meta = {"created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "source": source,
            "boxes": json.dumps(boxes)}
    meta.update({f"total:{box}": len(jobs) for box in boxes})
    with r.pipeline() as p:
        p.hset(lab.submission_key(sid), mapping=meta)
        p.rpush(lab.SUBMISSIONS, sid)
        p.sadd(lab.BOXES, *boxes)
        p.execute()
    docs = [job.to_dict() for job in jobs]
    try:
        with app.producer_or_acquire() as producer:
            for box in boxes:
                for doc in docs:
                    sent = app.send_task(lab.TASK, args=[doc, sid, box], queue=lab.queue_name(box), retry=False,
                                         producer=producer)
                    if task_ids is not None:
                        task_ids.append(sent.id)
    except Exception as e:
        raise PerflabError(f"broker {broker}: queueing submission {sid} failed: {type(e).__name__}: {e}") from None
    return sid, len(jobs) * len(boxes)


@dataclass
class BoxProgress:
    box: str
    total: int
    done: int
    failed: int
    cancelled: int

    @property
    def ended(self) -> int:
        return self.done + self.failed + self.cancelled


def progress(r, sid: str) -> list[BoxProgress]:
    meta = r.hgetall(lab.submission_key(sid))
    if not meta:
        raise PerflabError(f"submission {sid!r} is not known to this broker")
    return [BoxProgress(box, int(meta.get(f"total:{box}", 0)), int(meta.get(f"done:{box}", 0)),
                        int(meta.get(f"failed:{box}", 0)), int(meta.get(f"cancelled:{box}", 0)))
            for box in json.loads(meta["boxes"])]


def wait(broker: str, sid: str, console=None, poll_s: float = 0.2) -> list[BoxProgress]:
    """Follow a submission with a progress bar per box until every job has ended."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    r = lab.redis_client(broker)
    rows = progress(r, sid)
    look_at_workers, warned = time.monotonic() + NO_WORKER_S, set()
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[note]}"), TimeElapsedColumn(), console=console) as bar:
        tasks = {p.box: bar.add_task(p.box, total=p.total, note="") for p in rows}
        while True:
            rows = progress(r, sid)
            for p in rows:
                note = ", ".join(f"{n} {what}" for n, what in ((p.failed, "failed"), (p.cancelled, "cancelled")) if n)
                bar.update(tasks[p.box], completed=p.ended, note=note)
            if all(p.ended >= p.total for p in rows):
                return rows
            if time.monotonic() > look_at_workers:
                look_at_workers += NO_WORKER_S
                for box in _boxes_without_worker(r, [p.box for p in rows if p.ended < p.total]):
                    if box not in warned:
                        bar.console.print(no_worker_note(box), markup=False, highlight=False, soft_wrap=True)
                        warned.add(box)
            time.sleep(poll_s)


NO_WORKER_S = 10.0   # how long a submitter waits before it looks whether the boxes have workers


def no_worker_note(box: str) -> str:
    return (f"waiting for box {box}: no worker of it is alive "
            f"(start one: perflab worker --box {box} --broker ... --db ...)")


def _boxes_without_worker(r, boxes: list[str]) -> list[str]:
    """Those of `boxes` no live worker serves (a scan of the heartbeat keys: not at every poll)."""
    served = {w.get("box") for w in workers(r)}
    return [box for box in boxes if box not in served]


def workers(r) -> list[dict]:
    found = [r.hgetall(key) for key in r.scan_iter("perflab:worker:*", count=1000)]
    return sorted((w for w in found if w), key=lambda w: (w.get("box", ""), w.get("worker", "")))


def machine_of_box(r, box: str) -> str | None:
    """The SSH machine a live worker of `box` drives (`perflab worker --machine`), else None: also
    when no worker of it is alive now, since the controller cannot know which one will serve it."""
    for w in workers(r):
        if w.get("box") == box and w.get("machine"):
            return w["machine"]
    return None


def queue_status(broker: str) -> list[dict]:
    """One row per box: its workers' states and the number of messages waiting in its queue."""
    r = lab.redis_client(broker)
    alive = workers(r)
    boxes = sorted(set(r.smembers(lab.BOXES)) | {w["box"] for w in alive})
    rows = []
    for box in boxes:
        queued = r.llen(lab.queue_name(box))
        mine = [w for w in alive if w["box"] == box] or [{}]
        for w in mine:
            rows.append({"box": box, "queued": queued, "worker": w.get("worker", "-"), "machine": w.get("machine", ""),
                         "state": w.get("state", "no worker"), "job": w.get("job", ""),
                         "submission": w.get("submission", ""), "since": w.get("since", ""),
                         "spooled": int(w.get("spooled", 0) or 0), "last_error": w.get("last_error", "")})
    return rows


def cancel(broker: str, sid: str) -> list[BoxProgress]:
    """Cancel a submission: its queued jobs are skipped when they come up, its running
    job is stopped within a heartbeat (its run kept, marked interrupted)."""
    r = lab.redis_client(broker)
    rows = progress(r, sid)   # refuses an unknown id
    r.sadd(lab.CANCELLED, sid)
    return rows


@dataclass
class TaskResult:
    status: str            # done | failed | build-failed | source-failed | cancelled
    error: str
    runs: list             # the task's runs, read back from the shared store
    boot_failure: BootFailure | None = None   # build-failed: the kernel built, but did not boot


# Workers before results had a "boot_failure" key sent a kernel's console tail in "error", after this.
OLD_CONSOLE_MARK = "\n--- console tail ---\n"


def task_result(res: dict, runs: list) -> TaskResult:
    """A task's result as its worker left it in perflab:result:TASK (lab.result_key), of this version or an older one."""
    error = res.get("error") or ""
    failure = res.get("boot_failure")
    boot = None
    if isinstance(failure, dict):
        boot = BootFailure(str(failure.get("message") or error), str(failure.get("console_tail") or ""))
    elif res.get("status") == "build-failed" and OLD_CONSOLE_MARK in error:
        summary, _mark, tail = error.partition(OLD_CONSOLE_MARK)
        error = summary
        boot = BootFailure(summary, tail)
    return TaskResult(res.get("status", "failed"), error, runs, boot)


def run_on_box(broker: str, box: str, jobs: list[AtomicJob], store, *, say=lambda _m: None,
               poll_s: float = 0.05, upload_patience_s: float = 600.0) -> list[TaskResult]:
    """Queue `jobs` on `box`, wait until its worker has run them all, and read their runs
    back from `store` (the shared store the worker uploads to); one TaskResult per job.

    For the commands that measure through the lab (bisect/robot --box). Ctrl-C or SIGTERM
    while waiting cancels the submission (the running job is stopped, its run kept)."""
    from perflab.execution import interrupt

    lab.check_box(box)
    r = lab.redis_client(broker)
    ids: list[str] = []
    sid, _n = submit(broker, jobs, [box], source="perflab bisect/robot", task_ids=ids)
    results: dict[str, dict] = {}
    look_at_workers, warned = time.monotonic() + NO_WORKER_S, False
    try:
        with interrupt.stop_requests_as_flag():
            while len(results) < len(ids):
                interrupt.check()
                for tid in ids:
                    if tid not in results:
                        raw = r.get(lab.result_key(tid))
                        if raw:
                            results[tid] = json.loads(raw)
                if len(results) < len(ids):
                    # Every 10 s, not every poll: a scan of the heartbeat keys is not free.
                    if not warned and time.monotonic() > look_at_workers:
                        look_at_workers += NO_WORKER_S
                        if _boxes_without_worker(r, [box]):
                            say(no_worker_note(box))
                            warned = True
                    time.sleep(poll_s)
    except interrupt.Interrupted:
        r.sadd(lab.CANCELLED, sid)
        raise
    return [task_result(results[tid], _uploaded(store, results[tid].get("runs") or [], box, r, upload_patience_s, say))
            for tid in ids]


def _uploaded(store, uuids: list[str], box: str, r, patience_s: float, say) -> list:
    """The runs of these uuids in the shared store, waiting while the worker's spool holds them."""
    if not uuids:
        return []
    start = time.monotonic()
    look_at_workers = start + 3 * lab.HEARTBEAT_S + 1   # their heartbeats have been refreshed by then
    said = False
    while True:
        runs = store.find_runs(uuids=uuids)
        if len(runs) == len(uuids):
            return list(runs)
        waited = time.monotonic() - start
        if time.monotonic() > look_at_workers:
            look_at_workers += lab.HEARTBEAT_S
            # Uploaded, yet not here: the box's workers write to another store than this command reads.
            try:
                mine = [w for w in workers(r) if w.get("box") == box]
            except Exception:   # the broker away for a moment: no evidence either way
                mine = []
            if mine and all(int(w.get("spooled") or 0) == 0 and not w.get("last_error", "").startswith("store:")
                            for w in mine):
                raise PerflabError(f"box {box}: its worker uploaded runs {', '.join(u[:8] for u in uuids)} to a "
                                   f"store other than {store.label}: give this command the worker's --db")
        if waited > patience_s:
            raise PerflabError(f"box {box}: runs {', '.join(u[:8] for u in uuids)} did not reach {store.label} "
                               f"in {patience_s:g} s (they wait in the worker's spool; see `perflab queue`)")
        if not said and waited > 5:
            say(f"box {box}: waiting for its worker to upload runs to {store.label}")
            said = True
        time.sleep(0.1)

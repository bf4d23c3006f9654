"""Submitting to the lab, looking at its queues, cancelling (`perflab submit/queue/cancel`)."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass

from perflab.errors import PerflabError
from perflab.lab import app as lab


def submit(broker: str, jobs: list[dict], boxes: list[str], *, source: str = "") -> tuple[str, int]:
    """Queue every atomic job on every box; (submission id, number of tasks)."""
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
    try:
        with app.producer_or_acquire() as producer:
            for box in boxes:
                for job in jobs:
                    app.send_task(lab.TASK, args=[job, sid, box], queue=lab.queue_name(box), retry=False,
                                  producer=producer)
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
            time.sleep(poll_s)


def workers(r) -> list[dict]:
    found = [r.hgetall(key) for key in r.scan_iter("perflab:worker:*", count=1000)]
    return sorted((w for w in found if w), key=lambda w: (w.get("box", ""), w.get("worker", "")))


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
            rows.append({"box": box, "queued": queued, "worker": w.get("worker", "-"),
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

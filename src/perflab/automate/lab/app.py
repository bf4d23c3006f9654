"""The Celery app of the lab and the Redis keys beside it.

Celery carries the jobs; what Celery does not keep (which worker runs what, a
submission's progress, cancellations, attempts) lives in a few Redis keys of
our own, all under the prefix `perflab:`.
"""

from __future__ import annotations

import os

from perflab.core.errors import PerflabError
from perflab.store.db import redact

DEFAULT_BROKER = "redis://127.0.0.1:6379/0"
TASK = "perflab.lab.run_job"
# Longer than the longest job: a message not acknowledged within it goes back to its queue
# (the worker that took it is taken for dead). Kernel builds and fio runs take hours.
DEFAULT_VISIBILITY_TIMEOUT = 6 * 3600
HEARTBEAT_S = 2.0
CONNECT_TIMEOUT_S = 2.0

BOXES = "perflab:boxes"                 # set of box names that were submitted to or served
CANCELLED = "perflab:cancelled"         # set of cancelled submission ids
ATTEMPTS = "perflab:attempts"           # hash task id -> deliveries started
SUBMISSIONS = "perflab:submissions"     # list of submission ids, newest last


def queue_name(box: str) -> str:
    return f"perflab.box.{box}"


def worker_key(box: str, worker: str) -> str:
    return f"perflab:worker:{box}:{worker}"


def submission_key(sid: str) -> str:
    return f"perflab:submission:{sid}"


def result_key(task_id: str) -> str:
    # What became of one task, for a submitter that waits on it (bisect/robot --box): JSON
    # {"status": done|failed|build-failed|source-failed|cancelled, "error", "runs": [uuid, ...]},
    # and for a kernel that built but did not boot "boot_failure": {"message", "console_tail"}
    # (lab.client.task_result also reads the form before it, the tail in "error").
    return f"perflab:result:{task_id}"


RESULT_TTL_S = 7 * 24 * 3600


def done_key(sid: str) -> str:
    return f"perflab:done:{sid}"   # set of task ids that completed (a redelivery of one is skipped)


def broker_url(broker: str | None) -> str:
    """The broker URL in force, checked before anything is written (a bad port or db number is one line)."""
    url = broker or os.environ.get("PERFLAB_BROKER") or DEFAULT_BROKER
    _check_broker_url(url)
    return url


def _check_broker_url(url: str) -> None:
    from urllib.parse import urlsplit

    shape = "expected redis://HOST:PORT/DB (DB a number), rediss://... or unix://PATH"
    try:
        parts = urlsplit(url)
        parts.port     # raises ValueError on a port that is not a number or out of range
    except ValueError as e:
        raise PerflabError(f"broker URL {redact(url)!r}: {e}; {shape}") from None
    if parts.scheme == "unix":
        return
    db = parts.path.strip("/")
    if parts.scheme not in ("redis", "rediss") or not parts.hostname or (db and not db.isdigit()):
        raise PerflabError(f"broker URL {redact(url)!r}: {shape}")


def check_box(box: str) -> str:
    if not box or not all(c.isalnum() or c in "-_." for c in box):
        raise PerflabError(f"box name {box!r}: use letters, digits, '-', '_' and '.' only")
    return box


def redis_client(broker: str):
    """A Redis client on the broker with short timeouts; fails at once with one line if unreachable."""
    import redis

    if not broker.startswith(("redis://", "rediss://", "unix://")):
        raise PerflabError(f"broker URL {redact(broker)!r}: expected redis://[:PASSWORD@]HOST:PORT/DB or rediss://...")
    try:
        client = redis.Redis.from_url(broker, socket_connect_timeout=CONNECT_TIMEOUT_S, socket_timeout=10,
                                      decode_responses=True)
        client.ping()
    except (redis.RedisError, OSError, ValueError) as e:
        raise PerflabError(f"broker {redact(broker)} is unreachable: {e}") from None
    return client


def make_app(broker: str, visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT):
    from celery import Celery

    app = Celery("perflab", broker=broker, set_as_current=False)
    app.conf.update(
        task_acks_late=True,                 # acknowledged once the run is safe in the spool
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,        # a box takes one job at a time, never a batch
        worker_concurrency=1,
        task_serializer="json", accept_content=["json"],
        task_ignore_result=True,             # results live in the store, not in Celery
        broker_transport_options={
            "visibility_timeout": visibility_timeout,
            # kombu looks for messages of dead workers every interval x throttle seconds
            # (100 s by default): a few sweeps per visibility timeout, at most one a minute.
            "unacked_restore_interval": max(1, min(60, int(visibility_timeout / 4))),
            "unacked_restore_throttle": 1,
            "socket_connect_timeout": CONNECT_TIMEOUT_S,
        },
        broker_connection_retry_on_startup=False,
        task_publish_retry=False,
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
        task_default_queue="perflab.box._unrouted",
        broker_heartbeat=0,
    )
    return app

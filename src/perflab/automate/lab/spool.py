"""A worker's local spool: runs are recorded in an SQLite store on the box, then
imported into the shared store and deleted from the spool.

The shared store may be down (a PostgreSQL restart, the network): the runs
wait in the spool and go up at the next upload. An upload interrupted between
the import and the deletion is simply done again: the import skips runs whose
uuid the shared store already holds. A worker killed mid-run leaves a
'running' run in the spool; the reap at the next start marks it interrupted
(its process is gone) and it is uploaded like any other: the attempt is kept.
"""

from __future__ import annotations

import threading
from pathlib import Path

from perflab.exchange import transfer
from perflab.core.errors import PerflabError
from perflab.store import Store, open_store
from perflab.store.engine import locate, make_engine


def check_driver(shared_url: str | None) -> None:
    """Refuse, in one line naming the extra to install, a shared store whose driver is missing.

    At the worker's start, without connecting: the store may well be down now (the runs then
    wait in the spool), but a missing driver would keep every run in the spool for good."""
    if shared_url and "://" in shared_url:
        url, label, _path, _ro = locate(shared_url)
        make_engine(url, label).dispose()


class Spool:
    def __init__(self, directory: Path, box: str, shared_url: str | None):
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"{box}.db"
        self.store = open_store(str(self.path))
        self.shared_url = shared_url
        self._shared: Store | None = None
        self._lock = threading.Lock()  # the job thread and the heartbeat thread both upload

    def recover(self) -> int:
        """Mark the runs of dead workers (this box, this host) interrupted; how many."""
        return self.store.reap_dead_runs()

    def pending(self) -> int:
        return len(self._ended_runs())

    def _ended_runs(self):
        return [r for r in self.store.find_runs() if r.status not in ("running", "importing")]

    def upload(self) -> int:
        """Move every ended run to the shared store; the number moved. Raises PerflabError
        (one line naming the store) when the shared store cannot take them now."""
        with self._lock:
            runs = self._ended_runs()
            if not runs:
                return 0
            # Through the export format's checks: its dates become datetimes, as an import's do.
            data = [transfer._check_run(run, f"spool {self.path}, run {run['uuid']}")
                    for run in transfer.collect(self.store, runs)]
            try:
                if self._shared is None:
                    self._shared = open_store(self.shared_url)
                self._shared.import_runs(data)
            except PerflabError:
                self._drop_shared()
                raise
            except Exception as e:   # a driver error outside SQLAlchemy's wrapping: still one line
                self._drop_shared()
                raise PerflabError(f"database {self.shared_url}: {type(e).__name__}: {e}") from None
            for run in runs:
                self.store.delete_run(run.id)
            return len(runs)

    def _drop_shared(self) -> None:
        # A store that failed may have stale pooled connections: reconnect next time.
        if self._shared is not None:
            self._shared.engine.dispose()
            self._shared = None

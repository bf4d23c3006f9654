"""Writing to the store: runs, their samples, monitor series, failures and status.

Every method commits what it wrote before it returns (short transactions: two
perflab processes share one SQLite file). A run is created 'running' with the
host, pid and start time of its writer, so that a later command can tell a run
whose writer died (reap_dead_runs). Imports go through perflab.store.importing.
"""

from __future__ import annotations

import os
import socket
import uuid as uuidlib
from collections.abc import Iterable

from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from perflab.core.errors import PerflabError
from perflab.core.model import Sample
from perflab.store.exactness import stored_unit
from perflab.store import schema as s
from perflab.store.engine import Database
from perflab.store.rows import (  # noqa: F401 (RESERVE_BYTES, check_run_strings, utcnow: perflab.store.db's names)
    IMPORTING, RESERVE_BYTES, Reserve, box_id_of, check_run_strings, check_sample_strings, copy_rows, disk_full,
    environment_id, process_start_time, utcnow)


class Writes(Reserve, Database):
    """The Store's writing half (perflab.store.db.Store joins it with Queries)."""

    def create_run(
        self,
        *,
        box: str,
        environment: dict,
        benchmark: str,
        name: str,
        params: dict,
        tag: str | None = None,
        commit: str | None = None,
        dirty: bool | None = None,
        comment: str | None = None,
        job: dict | None = None,
    ) -> int:
        self._check_writable("record a run")
        check_run_strings(box=box, benchmark=benchmark, name=name, tag=tag, commit=commit)
        self._keep_reserve()
        try:
            with self.engine.begin() as conn:
                box_id = box_id_of(conn, self.label, box)
                env_id = environment_id(conn, self.label, box_id, environment)
                pid = os.getpid()
                return conn.execute(
                    insert(s.run).values(
                        uuid=str(uuidlib.uuid4()),
                        testbox_id=box_id,
                        environment_id=env_id,
                        benchmark=benchmark,
                        name=name,
                        params=params,
                        job=job,
                        tag=tag,
                        commit=commit,
                        dirty=dirty,
                        started=utcnow(),
                        status="running",
                        comment=comment,
                        host=socket.gethostname(),
                        pid=pid,
                        pid_start=process_start_time(pid),
                    )
                ).inserted_primary_key[0]
        except SQLAlchemyError as e:
            raise self._fail(e) from None

    def add_samples(self, run_id: int, repetition: int, samples: Iterable[Sample], process: int | None = None) -> int:
        """Store and commit samples of one repetition (from its `process`-th process)."""
        rows = [(run_id, x.metric, float(x.value), stored_unit(x.metric, x.unit, x.exact), int(x.direction), repetition,
                 process) for x in samples]
        if rows:
            check_sample_strings(rows)
            try:
                with self.engine.begin() as conn:
                    # The driver's executemany straight away: SQLAlchemy's per-row
                    # processing would be most of the cost of recording.
                    if self.engine.dialect.name == "postgresql":
                        copy_rows(conn, s.sample.name, self._SAMPLE_COLUMNS, rows)
                    else:
                        conn.exec_driver_sql(self._sample_insert_sql, self._sample_params(rows))
            except SQLAlchemyError as e:
                raise self._fail(e) from None
        return len(rows)

    _SAMPLE_COLUMNS = ("run_id", "metric", "value", "unit", "direction", "repetition", "process")

    @property
    def _sample_insert_sql(self) -> str:
        if not hasattr(self, "_sample_sql"):
            compiled = insert(s.sample).values({c: bindparam(c) for c in self._SAMPLE_COLUMNS}).compile(dialect=self.engine.dialect)
            self._sample_sql = compiled.string
            self._sample_positional = compiled.positiontup if compiled.positional else None
        return self._sample_sql

    def _sample_params(self, rows: list[tuple]) -> list:
        order = self._sample_positional
        if order is None:
            return [dict(zip(self._SAMPLE_COLUMNS, r)) for r in rows]
        index = [self._SAMPLE_COLUMNS.index(name) for name in order]
        return [tuple(r[i] for i in index) for r in rows]

    def set_run_monitors(self, run_id: int, record: dict) -> None:
        """Record which monitors ran with a run, their options, what was unsupported and what failed."""
        try:
            with self.engine.begin() as conn:
                conn.execute(update(s.run).where(s.run.c.id == run_id).values(monitors=record or None))
        except SQLAlchemyError as e:
            raise self._fail(e) from None

    def add_monitor_series(self, run_id: int, monitor: str, repetition: int,
                           rows: Iterable[tuple[int | None, float, dict]]) -> int:
        """Store a monitor's time series of one repetition: (process, t, {field: value}) per interval."""
        values = [{"run_id": run_id, "monitor": monitor, "repetition": repetition, "process": p, "t": float(t),
                   "values": {k: v for k, v in vals.items() if v == v and abs(v) != float("inf")}}
                  for p, t, vals in rows]
        if values:
            try:
                with self.engine.begin() as conn:
                    conn.execute(insert(s.monitor_series), values)
            except SQLAlchemyError as e:
                raise self._fail(e) from None
        return len(values)

    def add_robot_report(self, *, robot: str, culprit: str, metric: str, good: str, bad: str, subject: str,
                         text: str, sent_to: str | None = None) -> bool:
        """Remember a reported culprit; False when this robot had reported it already."""
        self._check_writable("record a report")
        try:
            with self.engine.begin() as conn:
                known = conn.execute(select(s.robot_report.c.id).where(
                    (s.robot_report.c.robot == robot) & (s.robot_report.c.culprit == culprit)
                    & (s.robot_report.c.metric == metric))).first()
                if known:
                    return False
                conn.execute(insert(s.robot_report).values(
                    robot=robot, culprit=culprit, metric=metric, good=good, bad=bad, created=utcnow(),
                    subject=subject, text=text, sent_to=sent_to))
                return True
        except SQLAlchemyError as e:
            raise self._fail(e) from None

    def add_failure(self, run_id: int, item: str, message: str) -> None:
        try:
            with self.engine.begin() as conn:
                conn.execute(s.failure.delete().where((s.failure.c.run_id == run_id) & (s.failure.c.item == item)))
                conn.execute(insert(s.failure).values(run_id=run_id, item=item, message=message))
        except SQLAlchemyError as e:
            raise self._fail(e) from None

    def finish_run(self, run_id: int, status: str, error: str | None = None) -> None:
        """Close a run with its status; on a full disk, the reserve makes room for it."""
        def close() -> None:
            with self.engine.begin() as conn:
                conn.execute(
                    update(s.run).where(s.run.c.id == run_id)
                    .values(status=status, finished=utcnow(), error=error)
                )

        try:
            try:
                close()
            except OperationalError as e:
                if not (disk_full(e) and self._release_reserve()):
                    raise
                close()
        except SQLAlchemyError as e:
            raise self._fail(e) from None

    def delete_run(self, run_id: int) -> None:
        """Remove a run that holds no samples (bad input found before any measurement)."""
        try:
            with self.engine.begin() as conn:
                conn.execute(s.failure.delete().where(s.failure.c.run_id == run_id))
                conn.execute(s.sample.delete().where(s.sample.c.run_id == run_id))
                conn.execute(s.monitor_series.delete().where(s.monitor_series.c.run_id == run_id))
                conn.execute(s.run.delete().where(s.run.c.id == run_id))
        except SQLAlchemyError as e:
            raise self._fail(e) from None

    def annotate(self, run_id: int, comment: str) -> None:
        self._check_writable("annotate a run")
        self.get_run(run_id)
        try:
            with self.engine.begin() as conn:
                conn.execute(update(s.run).where(s.run.c.id == run_id).values(comment=comment))
        except SQLAlchemyError as e:
            raise self._fail(e) from None

    def reap_dead_runs(self) -> int:
        """Mark as interrupted the runs of this host whose writer process is gone.

        Housekeeping that every command does on the way in, so it never stops a
        reading command: on a store that cannot be written now (read-only, a full
        disk, a writer holding the lock) it is left to a later command.
        """
        if self.read_only:
            return 0
        self.discard_dead_imports()
        host = socket.gethostname()
        try:
            with self.engine.connect() as conn:
                rows = conn.execute(
                    select(s.run.c.id, s.run.c.pid, s.run.c.pid_start)
                    .where((s.run.c.status == "running") & (s.run.c.host == host))
                ).all()
        except SQLAlchemyError as e:
            raise self._fail(e) from None
        dead = [r.id for r in rows if r.pid is None or process_start_time(r.pid) != r.pid_start]
        if not dead:
            return 0
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    # still running: a run that ended since the select keeps its own status
                    update(s.run).where(s.run.c.id.in_(dead) & (s.run.c.status == "running"))
                    .values(status="interrupted",
                            error="the perflab process recording it ended without closing it "
                                  "(killed, or it could not write); found by a later command")
                )
        except SQLAlchemyError:
            # A locked SQLite file; on PostgreSQL "permission denied" to a role that may only
            # read, or a read-only transaction on a standby: left to a command that may write.
            return 0
        return len(dead)

    # -- importing (perflab.store.importing: batches, all or nothing for readers) --
    def begin_import(self, check=None):
        """An ImportWriter: runs written as 'importing' in short transactions,
        shown at once by its commit(), deleted by its rollback()."""
        from perflab.store.importing import ImportWriter

        # A store opened read-only (its mode, a read-only mount, a full disk) says so, as `run` does,
        # rather than SQLite's "attempt to write a readonly database" from the first insert.
        self._check_writable("import runs")
        return ImportWriter(self, check)

    def import_runs(self, runs: list[dict]) -> tuple[int, int]:
        """Import checked runs (perflab export shape, samples included), all or
        nothing; runs already present (by uuid) are skipped.

        Returns (runs imported, runs skipped).
        """
        writer = self.begin_import()
        try:
            for run in runs:
                writer.add_samples(writer.add_run(run), run["samples"])
            (counts,) = writer.commit() or [None]
        except BaseException:
            writer.rollback()
            raise
        return (counts.runs, counts.skipped) if counts else (0, 0)

    def discard_dead_imports(self) -> int:
        """Delete the 'importing' runs of this host whose importing process is gone
        (killed mid-import); they were never visible. Like reap_dead_runs, it is
        left to a later command when the store cannot be written now."""
        from perflab.store.importing import discard

        host = socket.gethostname()
        try:
            with self.engine.connect() as conn:
                rows = conn.execute(
                    select(s.run.c.id, s.run.c.pid, s.run.c.pid_start)
                    .where((s.run.c.status == IMPORTING) & (s.run.c.host == host))
                ).all()
            dead = [r.id for r in rows if r.pid is None or process_start_time(r.pid) != r.pid_start]
            if dead:
                discard(self, dead)
        except (SQLAlchemyError, PerflabError):
            return 0
        return len(dead)

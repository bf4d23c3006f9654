"""Reading the store: runs, samples, failures, monitor series and robot reports.

What the analysis side selects and compares is read here. A run an import is
still writing (status 'importing') is invisible to every query.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import contextmanager

from sqlalchemy import func, select
from sqlalchemy.exc import SQLAlchemyError

from perflab.store import schema as s
from perflab.store.engine import Database
from perflab.store.reader import MAX_RUN_ID, RunQueries

__all__ = ["MAX_RUN_ID", "Queries"]


class Queries(RunQueries, Database):
    """The Store's reading half (perflab.store.db.Store joins it with Writes): the run queries
    of perflab.store.reader on a cursor of its engine, and the rest in SQLAlchemy Core."""

    @property
    def _mark(self) -> str:
        return "?" if self.engine.dialect.paramstyle == "qmark" else "%s"

    @property
    def _sqlite(self) -> bool:
        return self.engine.dialect.name == "sqlite"

    @property
    def _errors(self) -> tuple[type[BaseException], ...]:
        return (SQLAlchemyError, self.engine.dialect.loaded_dbapi.Error)

    @contextmanager
    def _cursor(self):
        with self.engine.connect() as conn:
            cursor = conn.connection.cursor()
            try:
                yield cursor
            finally:
                cursor.close()

    def metric_sums(self, run_ids: Iterable[int], metrics: Iterable[str]) -> dict[tuple[int, str], tuple[float, int]]:
        """(sum, count) of the samples per (run, metric), computed by the database in one
        query per 5,000 runs; callers pool several runs or take a run's mean from it."""
        ids, names = list(run_ids), list(metrics)
        out: dict[tuple[int, str], tuple[float, int]] = {}
        try:
            with self.engine.connect() as conn:
                for chunk in range(0, len(ids), 5000):
                    part = ids[chunk : chunk + 5000]
                    for rid, metric, total, n in conn.execute(
                        select(s.sample.c.run_id, s.sample.c.metric, func.sum(s.sample.c.value), func.count())
                        .where(s.sample.c.run_id.in_(part) & s.sample.c.metric.in_(names))
                        .group_by(s.sample.c.run_id, s.sample.c.metric)
                    ):
                        out[(rid, metric)] = (float(total), int(n))
        except SQLAlchemyError as e:
            raise self._fail(e) from None
        return out


    def metric_values(self, run_ids: Iterable[int], metrics: Iterable[str]) -> dict[tuple[int, str], list[float]]:
        """Every sample's value per (run, metric), in one query per 5,000 runs: for figures that
        are medians (the LMbench summary), which the database cannot reduce portably.

        Read through the DB-API cursor, not SQLAlchemy's rows: `report lmbench` over 1,000 runs
        reads ~270,000 values, and building a Row for each took 0.18 s of its second."""
        ids, names = list(run_ids), list(metrics)
        out: dict[tuple[int, str], list[float]] = {}
        if not ids or not names:
            return out
        for rows in self._sample_chunks(ids, "run_id, metric, value", names):
            for rid, metric, value in rows:
                values = out.get((rid, metric))
                if values is None:
                    out[(rid, metric)] = [float(value)]
                else:
                    values.append(float(value))
        return out

    def sample_counts(self, run_ids: Iterable[int]) -> dict[int, int]:
        ids = list(run_ids)
        out: dict[int, int] = {}
        try:
            with self.engine.connect() as conn:
                for chunk in range(0, len(ids), 5000):
                    part = ids[chunk : chunk + 5000]
                    out.update(conn.execute(
                        select(s.sample.c.run_id, func.count()).where(s.sample.c.run_id.in_(part))
                        .group_by(s.sample.c.run_id)
                    ).all())
        except SQLAlchemyError as e:
            raise self._fail(e) from None
        return out

    def monitor_series(self, run_ids: Iterable[int], monitor: str | None = None):
        """Rows (run_id, monitor, repetition, process, t, values) in recorded order."""
        q = select(s.monitor_series.c.run_id, s.monitor_series.c.monitor, s.monitor_series.c.repetition,
                   s.monitor_series.c.process, s.monitor_series.c.t, s.monitor_series.c["values"]) \
            .where(s.monitor_series.c.run_id.in_(list(run_ids))).order_by(s.monitor_series.c.id)
        if monitor:
            q = q.where(s.monitor_series.c.monitor == monitor)
        try:
            with self.engine.connect() as conn:
                return conn.execute(q).all()
        except SQLAlchemyError as e:
            raise self._fail(e) from None

    def robot_reports(self, robot: str):
        """The culprits a robot reported: rows (culprit, metric, good, bad, created, subject)."""
        t = s.robot_report
        try:
            with self.engine.connect() as conn:
                return conn.execute(select(t.c.culprit, t.c.metric, t.c.good, t.c.bad, t.c.created, t.c.subject)
                                    .where(t.c.robot == robot).order_by(t.c.id)).all()
        except SQLAlchemyError as e:
            raise self._fail(e) from None

"""Reading the store: runs, samples, failures, monitor series and robot reports.

What the analysis side selects and compares is read here. A run an import is
still writing (status 'importing') is invisible to every query.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial

from sqlalchemy import case, func, select
from sqlalchemy.exc import SQLAlchemyError

from perflab.core.errors import PerflabError
from perflab.store import schema as s
from perflab.store.engine import Database
from perflab.store.exactness import StoredSample

# Ids are 64-bit integers on both backends (SQLite's rowid, PostgreSQL's bigint since
# revision 0005): a larger number names no run, and either database would refuse to
# even compare with it.
MAX_RUN_ID = 2**63 - 1


class Queries(Database):
    """The Store's reading half (perflab.store.db.Store joins it with Writes)."""

    def run_columns(self):
        # The one place the testbox table's name column becomes a run row's `box`
        # (exports and printed text keep the word "testbox").
        return [s.run, s.testbox.c.name.label("box"), s.environment.c.facts.label("environment")]

    def _run_select(self):
        return (
            select(*self.run_columns())
            .join(s.testbox, s.testbox.c.id == s.run.c.testbox_id)
            .join(s.environment, s.environment.c.id == s.run.c.environment_id)
            .where(s.run.c.status != "importing")  # an import not yet complete is invisible
        )

    def get_run(self, run_id: int | str):
        from perflab.core.text import printable

        try:
            rid = int(str(run_id).lstrip("#"))
        except ValueError:
            raise PerflabError(f"run id '{printable(run_id, 40)}' is not a number") from None
        if not 1 <= rid <= MAX_RUN_ID:
            raise PerflabError(f"run id {printable(run_id, 40)} is out of range: run ids are 1 to {MAX_RUN_ID}")
        try:
            with self.engine.connect() as conn:
                row = conn.execute(self._run_select().where(s.run.c.id == rid)).first()
        except SQLAlchemyError as e:
            raise self._fail(e) from None
        except ValueError as e:    # a JSON column that does not decode: the store was edited or damaged
            raise PerflabError(f"run #{rid} in {self.label}: a stored field is not valid JSON ({e}); "
                               "the record is damaged") from None
        if row is None:
            raise PerflabError(f"no run with id {rid} in {self.label}")
        return row

    def find_runs(self, *, benchmark=None, tag=None, box=None, since=None, status=None, limit=None, ids=None,
                  uuids=None):
        q = self._run_select()
        if benchmark:
            q = q.where((s.run.c.benchmark == benchmark) | (s.run.c.name == benchmark))
        if tag:
            q = q.where(s.run.c.tag == tag)
        if box:
            q = q.where(s.testbox.c.name == box)
        if since:
            q = q.where(s.run.c.started >= since)
        if status:
            q = q.where(s.run.c.status == status)
        if ids is not None:
            q = q.where(s.run.c.id.in_([i for i in ids if 1 <= i <= MAX_RUN_ID]))
        if uuids is not None:
            q = q.where(s.run.c.uuid.in_(list(uuids)))
        q = q.order_by(s.run.c.started, s.run.c.id)
        if limit:
            q = q.limit(limit)
        try:
            with self.engine.connect() as conn:
                return conn.execute(q).all()
        except SQLAlchemyError as e:
            raise self._fail(e) from None
        except ValueError as e:
            raise PerflabError(f"{self.label}: a run's stored field is not valid JSON ({e}); "
                               "`perflab show ID` names the run") from None

    def run_names(self, limit: int = 10) -> tuple[list[str], list[str], int]:
        """(benchmark families, run names most recently run first, number of names),
        at most `limit` of each: what a filter that matched nothing could have named."""
        last = func.max(s.run.c.started)
        visible = s.run.c.status != "importing"  # an import not yet complete is invisible
        try:
            with self.engine.connect() as conn:
                families = conn.execute(select(s.run.c.benchmark).where(visible).distinct().order_by(s.run.c.benchmark).limit(limit)).scalars().all()
                names = conn.execute(select(s.run.c.name).where(visible).group_by(s.run.c.name).order_by(last.desc()).limit(limit)).scalars().all()
                count = conn.execute(select(func.count(s.run.c.name.distinct())).where(visible)).scalar_one()
        except SQLAlchemyError as e:
            raise self._fail(e) from None
        return families, names, count

    def samples(self, run_ids: Iterable[int]) -> list[StoredSample]:
        """Every sample of these runs, ordered by run, metric, repetition and the order written;
        each row knows whether it is exact (perflab.store.exactness).

        Read through the DB-API cursor, as metric_values is: a StoredSample made from the
        driver's tuple costs what SQLAlchemy's Row did, so the rows carry their assumption at
        no cost (270,000 samples of 1,000 runs: 0.55 s before and after; SQLAlchemy's Rows
        remade as StoredSamples took 0.25 s more)."""
        ids = sorted({i for i in run_ids if 1 <= i <= MAX_RUN_ID})
        out: list[StoredSample] = []
        if not ids:
            return out
        row = partial(tuple.__new__, StoredSample)   # _make without its Python-level call
        # ids ascending in chunks ordered by run: the chunks follow one another in order
        for rows in self._sample_chunks(ids, "run_id, metric, value, unit, direction, repetition, process",
                                        order="ORDER BY run_id, metric, repetition, id"):
            out.extend(map(row, rows))
        return out

    def _sample_chunks(self, ids: list[int], columns: str, metrics: list[str] = (), order: str = ""):
        """The sample table's `columns` for these runs (and metrics), through the DB-API cursor, one
        list of driver tuples per 5,000 runs: what the read paths that meet ~270,000 rows use
        (building SQLAlchemy Rows for them cost a fifth of a second)."""
        mark = "?" if self.engine.dialect.paramstyle == "qmark" else "%s"
        of_metrics = f" AND metric IN ({', '.join([mark] * len(metrics))})" if metrics else ""
        try:
            with self.engine.connect() as conn:
                cursor = conn.connection.cursor()
                try:
                    for chunk in range(0, len(ids), 5000):
                        part = ids[chunk : chunk + 5000]
                        cursor.execute(f"SELECT {columns} FROM {s.sample.name} "
                                       f"WHERE run_id IN ({', '.join([mark] * len(part))}){of_metrics} {order}",
                                       [*part, *metrics])
                        yield cursor.fetchall()
                finally:
                    cursor.close()
        except (SQLAlchemyError, self.engine.dialect.loaded_dbapi.Error) as e:
            raise self._fail(e) from None

    def failures(self, run_ids: Iterable[int]):
        ids = list(run_ids)
        with self.engine.connect() as conn:
            return conn.execute(
                select(s.failure.c.run_id, s.failure.c.item, s.failure.c.message)
                .where(s.failure.c.run_id.in_(ids)).order_by(s.failure.c.id)
            ).all()

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

    def log_rows(self, *, benchmark=None, tag=None, box=None, since=None, metrics=("time.elapsed_time", "time.user_time", "time.system_time")):
        """One row per run, oldest first, with the mean of each named metric (one query)."""
        means = [
            func.avg(case((s.sample.c.metric == m, s.sample.c.value))).label(f"m{i}")
            for i, m in enumerate(metrics)
        ]
        q = (
            select(s.run.c.id, s.run.c.started, s.run.c.status, s.run.c.tag, s.run.c.commit,
                   s.run.c.dirty, s.run.c.comment, s.run.c.name, s.run.c.benchmark, *means)
            .select_from(s.run.outerjoin(s.sample, (s.sample.c.run_id == s.run.c.id) & s.sample.c.metric.in_(list(metrics))))
            .where(s.run.c.status != "importing")  # an import not yet complete is invisible
            .group_by(s.run.c.id)
            .order_by(s.run.c.started, s.run.c.id)
        )
        if benchmark:
            q = q.where((s.run.c.benchmark == benchmark) | (s.run.c.name == benchmark))
        if tag:
            q = q.where(s.run.c.tag == tag)
        if box:
            q = q.where(s.run.c.testbox_id.in_(select(s.testbox.c.id).where(s.testbox.c.name == box)))
        if since:
            q = q.where(s.run.c.started >= since)
        try:
            with self.engine.connect() as conn:
                return conn.execute(q).all()
        except SQLAlchemyError as e:
            raise self._fail(e) from None

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

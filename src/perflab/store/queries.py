"""Reading the store: runs, samples, failures, monitor series and robot reports.

What the analysis side selects and compares is read here. A run an import is
still writing (status 'importing') is invisible to every query.
"""

from __future__ import annotations

from contextlib import contextmanager

from sqlalchemy import select
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

    def robot_reports(self, robot: str):
        """The culprits a robot reported: rows (culprit, metric, good, bad, created, subject)."""
        t = s.robot_report
        try:
            with self.engine.connect() as conn:
                return conn.execute(select(t.c.culprit, t.c.metric, t.c.good, t.c.bad, t.c.created, t.c.subject)
                                    .where(t.c.robot == robot).order_by(t.c.id)).all()
        except SQLAlchemyError as e:
            raise self._fail(e) from None

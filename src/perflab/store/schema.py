"""The store's schema: one definition for SQLite and PostgreSQL (SQLAlchemy Core).

Changes to this file need a new Alembic revision under migrations/versions/.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from perflab.store.basics import LENGTHS

metadata = MetaData()

# Every surrogate id, and every column naming one, is 64-bit on both backends: a shared lab
# store can outgrow 2^31 rows, and an id valid in one store must be valid in any other.
# SQLite keeps plain INTEGER (its INTEGER PRIMARY KEY is the 64-bit rowid, the fast path);
# PostgreSQL gets bigint (bigserial for a primary key). Queries bind ids with this type too
# (psycopg casts each parameter to its column's type), so a large id is never cast to int4.
Id = BigInteger().with_variant(Integer(), "sqlite")

testbox = Table(
    "testbox",
    metadata,
    Column("id", Id, primary_key=True),
    Column("name", String(LENGTHS["testbox.name"]), nullable=False, unique=True),
)

# Environments are deduplicated by a hash of their facts: a thousand runs on one
# unchanged machine share one row.
environment = Table(
    "environment",
    metadata,
    Column("id", Id, primary_key=True),
    Column("testbox_id", Id, ForeignKey("testbox.id"), nullable=False),
    Column("digest", String(64), nullable=False, unique=True),
    Column("facts", JSON, nullable=False),
)

run = Table(
    "run",
    metadata,
    Column("id", Id, primary_key=True),
    # A globally unique id, so that export/import between stores never merges
    # two different runs or duplicates one.
    Column("uuid", String(36), nullable=False, unique=True),
    Column("testbox_id", Id, ForeignKey("testbox.id"), nullable=False),
    Column("environment_id", Id, ForeignKey("environment.id"), nullable=False),
    Column("benchmark", String(LENGTHS["run.benchmark"]), nullable=False),
    Column("name", String(LENGTHS["run.name"]), nullable=False),
    Column("params", JSON, nullable=False),
    Column("tag", String(LENGTHS["run.tag"])),
    Column("commit", String(LENGTHS["run.commit"])),
    Column("dirty", Boolean),
    Column("started", DateTime, nullable=False),  # UTC, naive
    Column("finished", DateTime),
    # running | finished | partial (some parts failed) | failed | interrupted
    Column("status", String(20), nullable=False),
    Column("comment", Text),
    Column("error", Text),
    # Who is writing this run: a later command recognises a run whose
    # process is gone (kill -9) by these three.
    Column("host", String(255)),
    Column("pid", Integer),
    Column("pid_start", String(40)),
    # The atomic job this run executed (family, params, runs, ...): `perflab rerun` runs it again.
    Column("job", JSON(none_as_null=True)),
    # The monitors that ran: {name: {options, interval, status, unsupported, errors}}.
    Column("monitors", JSON(none_as_null=True)),
)
Index("ix_run_benchmark_started", run.c.benchmark, run.c.started)
Index("ix_run_tag", run.c.tag)
Index("ix_run_status", run.c.status)

sample = Table(
    "sample",
    metadata,
    Column("id", Id, primary_key=True),
    Column("run_id", Id, ForeignKey("run.id", ondelete="CASCADE"), nullable=False),
    Column("metric", String(LENGTHS["sample.metric"]), nullable=False),
    Column("value", Float, nullable=False),
    Column("unit", String(LENGTHS["sample.unit"]), nullable=False),
    Column("direction", Integer, nullable=False),
    Column("repetition", Integer, nullable=False),
    # Which process of the repetition printed it (a suite runs several per repetition).
    Column("process", Integer),
)
Index("ix_sample_run_metric", sample.c.run_id, sample.c.metric)

# A part of a run that failed while the rest went on (a benchmark of a suite
# that did not compile, crashed or timed out).
failure = Table(
    "failure",
    metadata,
    Column("id", Id, primary_key=True),
    Column("run_id", Id, ForeignKey("run.id", ondelete="CASCADE"), nullable=False),
    Column("item", String(255), nullable=False),
    Column("message", Text, nullable=False),
    UniqueConstraint("run_id", "item", name="uq_failure_run_item"),
)

# A monitor's time series: one row per interval of a timed part (for plotting);
# the per-run reductions are ordinary samples (metric "vmstat.cpu.sy" ...).
monitor_series = Table(
    "monitor_series",
    metadata,
    Column("id", Id, primary_key=True),
    Column("run_id", Id, ForeignKey("run.id", ondelete="CASCADE"), nullable=False),
    Column("monitor", String(LENGTHS["monitor_series.monitor"]), nullable=False),
    Column("repetition", Integer, nullable=False),
    Column("process", Integer),
    Column("t", Float, nullable=False),     # seconds since the timed part began
    Column("values", JSON, nullable=False),  # {field: value} of that interval
)
Index("ix_monitor_series_run_monitor", monitor_series.c.run_id, monitor_series.c.monitor)

# What the regression robot reported: one row per (robot, culprit commit, metric), so that
# a culprit is never reported twice, across restarts.
robot_report = Table(
    "robot_report",
    metadata,
    Column("id", Id, primary_key=True),
    Column("robot", String(100), nullable=False),
    Column("culprit", String(64), nullable=False),
    Column("metric", String(255), nullable=False),
    Column("good", String(64), nullable=False),
    Column("bad", String(64), nullable=False),
    Column("created", DateTime, nullable=False),
    Column("subject", Text, nullable=False),
    Column("text", Text, nullable=False),
    Column("sent_to", Text),
    UniqueConstraint("robot", "culprit", "metric", name="uq_robot_report_culprit"),
)

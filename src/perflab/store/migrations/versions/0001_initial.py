"""initial schema: testbox, environment, run, sample, failure

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

SAMPLE_ID = sa.Integer().with_variant(sa.BigInteger(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "testbox",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(255), nullable=False, unique=True),
    )
    op.create_table(
        "environment",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("testbox_id", sa.Integer, sa.ForeignKey("testbox.id"), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False, unique=True),
        sa.Column("facts", sa.JSON, nullable=False),
    )
    op.create_table(
        "run",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("uuid", sa.String(36), nullable=False, unique=True),
        sa.Column("testbox_id", sa.Integer, sa.ForeignKey("testbox.id"), nullable=False),
        sa.Column("environment_id", sa.Integer, sa.ForeignKey("environment.id"), nullable=False),
        sa.Column("benchmark", sa.String(100), nullable=False),
        sa.Column("name", sa.String(500), nullable=False),
        sa.Column("params", sa.JSON, nullable=False),
        sa.Column("tag", sa.String(255)),
        sa.Column("commit", sa.String(64)),
        sa.Column("dirty", sa.Boolean),
        sa.Column("started", sa.DateTime, nullable=False),
        sa.Column("finished", sa.DateTime),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("comment", sa.Text),
        sa.Column("error", sa.Text),
        sa.Column("host", sa.String(255)),
        sa.Column("pid", sa.Integer),
        sa.Column("pid_start", sa.String(40)),
    )
    op.create_index("ix_run_benchmark_started", "run", ["benchmark", "started"])
    op.create_index("ix_run_tag", "run", ["tag"])
    op.create_index("ix_run_status", "run", ["status"])
    op.create_table(
        "sample",
        # 64-bit on PostgreSQL as SQLite's INTEGER PRIMARY KEY is: a shared lab store
        # can outgrow 2^31 samples. (Unchanged on SQLite, so existing files are as they were.)
        sa.Column("id", SAMPLE_ID, primary_key=True),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("run.id", ondelete="CASCADE"), nullable=False),
        sa.Column("metric", sa.String(255), nullable=False),
        sa.Column("value", sa.Float, nullable=False),
        sa.Column("unit", sa.String(32), nullable=False),
        sa.Column("direction", sa.Integer, nullable=False),
        sa.Column("repetition", sa.Integer, nullable=False),
    )
    op.create_index("ix_sample_run_metric", "sample", ["run_id", "metric"])
    op.create_table(
        "failure",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("run.id", ondelete="CASCADE"), nullable=False),
        sa.Column("item", sa.String(255), nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.UniqueConstraint("run_id", "item", name="uq_failure_run_item"),
    )


def downgrade() -> None:
    for name in ("failure", "sample", "run", "environment", "testbox"):
        op.drop_table(name)

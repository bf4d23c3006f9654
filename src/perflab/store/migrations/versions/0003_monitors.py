"""monitors: which ran with each run (run.monitors) and their time series (monitor_series)

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("run") as batch:
        batch.add_column(sa.Column("monitors", sa.JSON, nullable=True))
    op.create_table(
        "monitor_series",
        # 64-bit on PostgreSQL, like sample.id (one row per monitor interval adds up).
        sa.Column("id", sa.Integer().with_variant(sa.BigInteger(), "postgresql"), primary_key=True),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("run.id", ondelete="CASCADE"), nullable=False),
        sa.Column("monitor", sa.String(50), nullable=False),
        sa.Column("repetition", sa.Integer, nullable=False),
        sa.Column("process", sa.Integer),
        sa.Column("t", sa.Float, nullable=False),
        sa.Column("values", sa.JSON, nullable=False),
    )
    op.create_index("ix_monitor_series_run_monitor", "monitor_series", ["run_id", "monitor"])


def downgrade() -> None:
    op.drop_index("ix_monitor_series_run_monitor", table_name="monitor_series")
    op.drop_table("monitor_series")
    with op.batch_alter_table("run") as batch:
        batch.drop_column("monitors")

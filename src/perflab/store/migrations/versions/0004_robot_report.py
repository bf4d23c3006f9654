"""the regression robot's reports (robot_report): its memory of the culprits it reported

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "robot_report",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("robot", sa.String(100), nullable=False),
        sa.Column("culprit", sa.String(64), nullable=False),
        sa.Column("metric", sa.String(255), nullable=False),
        sa.Column("good", sa.String(64), nullable=False),
        sa.Column("bad", sa.String(64), nullable=False),
        sa.Column("created", sa.DateTime, nullable=False),
        sa.Column("subject", sa.Text, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("sent_to", sa.Text),
        sa.UniqueConstraint("robot", "culprit", "metric", name="uq_robot_report_culprit"),
    )


def downgrade() -> None:
    op.drop_table("robot_report")

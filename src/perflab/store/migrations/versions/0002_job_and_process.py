"""the atomic job each run ran (run.job) and the process each sample came from (sample.process)

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # batch mode: SQLite cannot ALTER most things in place; Alembic copies the table when needed.
    with op.batch_alter_table("run") as batch:
        batch.add_column(sa.Column("job", sa.JSON, nullable=True))
    with op.batch_alter_table("sample") as batch:
        batch.add_column(sa.Column("process", sa.Integer, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("sample") as batch:
        batch.drop_column("process")
    with op.batch_alter_table("run") as batch:
        batch.drop_column("job")

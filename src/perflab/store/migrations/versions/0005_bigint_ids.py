"""64-bit ids on PostgreSQL: every surrogate id and every column naming one becomes bigint

Revision ID: 0005
Revises: 0004

SQLite's INTEGER PRIMARY KEY is already the 64-bit rowid and its integer columns hold
64 bits, so nothing changes there (the upgrade is a no-op and SQLite files stay as they
were). On PostgreSQL, 0001-0004 made these `integer` (serial, 32-bit): a shared lab store
can outgrow 2^31 rows, and an id must not be valid in one backend and out of range in
the other. sample.id and monitor_series.id were bigint from the start.
"""

from alembic import op
from sqlalchemy import text

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

# The integer id columns of revision 0004, per table. Listed here (not read from schema.py)
# so that this revision means the same thing whatever later revisions add.
ID_COLUMNS = {
    "testbox": ("id",),
    "environment": ("id", "testbox_id"),
    "run": ("id", "testbox_id", "environment_id"),
    "sample": ("run_id",),
    "failure": ("id", "run_id"),
    "monitor_series": ("run_id",),
    "robot_report": ("id",),
}


def _column_types(conn) -> dict[tuple[str, str], str]:
    found = conn.execute(text(
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = current_schema()")).all()
    return {(t, c): kind for t, c, kind in found}


def _retype(target: str) -> None:
    """Give the id columns (and the sequences behind the primary keys) the type `target`.

    One ALTER TABLE per table, so that PostgreSQL rewrites each table and rebuilds its
    indexes once, whatever the number of its columns that change; columns already of the
    target type are left alone. PostgreSQL rebuilds the foreign keys that point at a
    changed column itself.
    """
    conn = op.get_bind()
    kinds = _column_types(conn)
    for table, columns in ID_COLUMNS.items():
        changing = [c for c in columns if kinds.get((table, c)) not in (None, target)]
        if changing:
            clauses = ", ".join(f'ALTER COLUMN "{c}" TYPE {target}' for c in changing)
            conn.execute(text(f'ALTER TABLE "{table}" {clauses}'))
        if "id" in columns:
            # A serial's sequence has a type of its own (PostgreSQL 10+), and with it a
            # maximum: an integer sequence stops at 2^31 - 1 whatever its column holds.
            # Changing the type moves a maximum that was the old type's to the new type's.
            sequence = conn.execute(text("SELECT pg_get_serial_sequence(:t, 'id')"), {"t": f'"{table}"'}).scalar()
            if sequence is not None:
                conn.execute(text(f"ALTER SEQUENCE {sequence} AS {target}"))


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    _retype("bigint")


def downgrade() -> None:
    # Back to 0004's types; fails (and changes nothing: one transaction) once an id is past 2^31 - 1.
    if op.get_bind().dialect.name != "postgresql":
        return
    _retype("integer")

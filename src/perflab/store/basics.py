"""What both ways of opening a store (perflab.store.engine, and the read-only
perflab.store.reader) need, without importing SQLAlchemy or Alembic: where the default
store is, and the schema revision this perflab writes (read from the migration scripts)."""

from __future__ import annotations

import os
import re
from pathlib import Path


def default_url() -> str:
    """$PERFLAB_DB (a path or a URL), else the XDG data directory."""
    configured = os.environ.get("PERFLAB_DB")
    if configured:
        return configured
    data_home = os.environ.get("XDG_DATA_HOME") or os.path.join(Path.home(), ".local", "share")
    return os.path.join(data_home, "perflab", "perflab.db")


def _head_revision() -> tuple[str, frozenset[str]]:
    """The newest Alembic revision shipped and all of them."""
    revisions, parents = set(), set()
    for script in (Path(__file__).parent / "migrations" / "versions").glob("*.py"):
        body = script.read_text()
        rev = re.search(r'^revision = "([^"]+)"', body, re.M)
        down = re.search(r'^down_revision = "([^"]+)"', body, re.M)
        if rev:
            revisions.add(rev.group(1))
        if down:
            parents.add(down.group(1))
    heads = revisions - parents
    if len(heads) != 1:
        raise RuntimeError(f"store migrations have {len(heads)} heads: {sorted(heads)}")
    return heads.pop(), frozenset(revisions)


HEAD_REVISION, KNOWN_REVISIONS = _head_revision()

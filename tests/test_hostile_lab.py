"""Issue 23's lab items (M7 M8 L9 L10 L13): real redis-server, real workers, real signals."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import assert_one_line_error
from services import free_port

# The default install: perflab without the 'postgres' extra, i.e. no psycopg to import.
WITHOUT_PSYCOPG = ("import sys; sys.modules['psycopg'] = None; sys.argv[0] = 'perflab'; "
                   "from perflab.cli import entry; entry()")


def _env(tmp: Path, **extra) -> dict:
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp / "cache"), XDG_STATE_HOME=str(tmp / "state"), **extra)
    for name in ("PERFLAB_DB", "PERFLAB_DEBUG", "PERFLAB_BROKER"):
        env.pop(name, None)
    return env


def test_worker_on_postgresql_without_the_driver_names_the_extra(tmp_path):     # L13
    # Before the broker is contacted (none listens on this port) and before any spool is made.
    proc = subprocess.run([sys.executable, "-c", WITHOUT_PSYCOPG, "worker", "--box", "k62",
                           "--broker", f"redis://127.0.0.1:{free_port()}/0", "--db", "postgresql://worker@lab/perflab",
                           "--spool", str(tmp_path / "spool")],
                          capture_output=True, text=True, env=_env(tmp_path), cwd=tmp_path, timeout=60)
    assert_one_line_error(proc, "postgresql://worker@lab/perflab", "pip install 'perflab[postgres]'")
    assert not (tmp_path / "spool").exists()

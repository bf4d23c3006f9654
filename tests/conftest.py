"""Shared fixtures: the installed `perflab` CLI run as a subprocess on a temporary store."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

PERFLAB = shutil.which("perflab", path=os.path.dirname(sys.executable)) or shutil.which("perflab")


class CLI:
    def __init__(self, db: Path, tmp: Path, cache: Path | None = None):
        self.db = db
        self.tmp = tmp
        # One compiler cache per test session (per xdist worker): binaries are keyed by
        # source, compiler and flags, so sharing is safe, and the launcher is built once.
        self.env = dict(os.environ, PERFLAB_DB=str(db), XDG_CACHE_HOME=str(cache or tmp / "cache"))
        self.env.pop("PERFLAB_DEBUG", None)

    def __call__(self, *args, check=True, input=None, timeout=120, env=None) -> subprocess.CompletedProcess:
        proc = subprocess.run([PERFLAB, *map(str, args)], capture_output=True, text=True, input=input,
                              timeout=timeout, env=dict(self.env, **(env or {})), cwd=self.tmp)
        if check and proc.returncode != 0:
            raise AssertionError(f"perflab {' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        return proc

    def popen(self, *args, **kw) -> subprocess.Popen:
        return subprocess.Popen([PERFLAB, *map(str, args)], env=self.env, cwd=self.tmp,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)

    def sql(self, query: str, params=()) -> list[tuple]:
        con = sqlite3.connect(self.db)
        try:
            return con.execute(query, params).fetchall()
        finally:
            con.close()


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cbuild-shared")


@pytest.fixture
def cli(tmp_path, shared_cache) -> CLI:
    assert PERFLAB, "the perflab command is not installed in this environment"
    return CLI(tmp_path / "perflab.db", tmp_path, shared_cache)


def assert_one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    """Bad input ends with a single line on stderr naming the fault, and a non-zero status."""
    assert proc.returncode != 0, proc.stdout
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])


# Real services on loopback (tests/services.py): a PostgreSQL cluster per session with a
# fresh database per test (`postgres_url`), and a redis-server per test (`redis_server`).
from services import postgres_cluster, postgres_url, redis_server  # noqa: E402,F401


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path) -> str:
    """The store of one test on each backend: an SQLite file, then a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "perflab.db")
    return request.getfixturevalue("postgres_url")

"""Issue 23's lab items (M7 M8 L9 L10 L13): real redis-server, real workers, real signals."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

from conftest import PERFLAB, assert_one_line_error
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


def _job(tmp: Path, name: str, command: str, runs: int = 1) -> Path:
    path = tmp / name
    path.write_text(json.dumps({"benchmark": "cmd", "runs": runs, "command": command}))   # JSON is YAML
    return path


def _read_until(proc: subprocess.Popen, needle: str, timeout: float) -> str:
    """stderr of `proc` until it holds `needle` (or the time is up, or it ended)."""
    seen, deadline = b"", time.monotonic() + timeout
    fd = proc.stderr.fileno()
    while time.monotonic() < deadline and needle.encode() not in seen:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            seen += chunk
    return seen.decode(errors="replace")


def test_submit_wait_on_a_box_without_worker_says_so(tmp_path, redis_server):     # M7
    job = _job(tmp_path, "quick.yaml", "/bin/true")
    proc = subprocess.Popen([PERFLAB, "submit", job, "--box", "nosuchbox", "--wait", "--broker", redis_server.url],
                            env=_env(tmp_path), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        said = _read_until(proc, "no worker of it is alive", timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert "waiting for box nosuchbox: no worker of it is alive" in said, said
    assert "perflab worker --box nosuchbox" in said

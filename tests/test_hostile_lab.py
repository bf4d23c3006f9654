"""Issue 23's lab items (M7 M8 L9 L10 L13): real redis-server, real workers, real signals."""

from __future__ import annotations

import json
import os
import select
import shlex
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import redis

from conftest import PERFLAB, assert_one_line_error
from services import free_port, until

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
        said = _read_until(proc, "no worker of it is alive", timeout=120)   # said after 10 s (client.NO_WORKER_S)
    finally:
        proc.kill()
        proc.wait()
    assert "waiting for box nosuchbox: no worker of it is alive" in said, said
    assert "perflab worker --box nosuchbox" in said


def _worker(tmp: Path, broker: str, box: str, spool: str, log: str, heartbeat: float = 1.0) -> subprocess.Popen:
    # The heartbeat key lives 3 beats + 1 s: with 1 s beats, 4 s, so that a heartbeat thread held back
    # for a moment on a loaded machine does not make a live worker look gone to a single look.
    out = open(tmp / log, "ab")
    return subprocess.Popen([PERFLAB, "worker", "--box", box, "--broker", broker, "--db", str(tmp / "shared.db"),
                             "--spool", str(tmp / spool), "--heartbeat", str(heartbeat)],
                            env=_env(tmp), cwd=tmp, stdout=out, stderr=subprocess.STDOUT)


def _alive_workers(r, box: str) -> list[dict]:
    return [h for k in r.scan_iter(f"perflab:worker:{box}:*") if (h := r.hgetall(k))]


def _running(argv: list[str]) -> bool:
    want = "\0".join(argv).encode() + b"\0"
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and (proc / "cmdline").read_bytes() == want:
                return True
        except OSError:
            continue
    return False


def test_a_second_worker_of_a_box_refuses_naming_the_first(tmp_path, redis_server):     # M8
    r = redis.Redis.from_url(redis_server.url, decode_responses=True)
    first = _worker(tmp_path, redis_server.url, "X", "spool-1", "first.log")
    try:
        state = until("the first worker's heartbeat", lambda: _alive_workers(r, "X"))[0]
        second = subprocess.run([PERFLAB, "worker", "--box", "X", "--broker", redis_server.url,
                                 "--db", str(tmp_path / "shared.db"), "--spool", str(tmp_path / "spool-2")],
                                env=_env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert_one_line_error(second, "box X already has a worker", state["worker"])
        assert not (tmp_path / "spool-2").exists()    # refused before its spool was made
        assert first.poll() is None and [w["worker"] for w in _alive_workers(r, "X")] == [state["worker"]]
        # Another box is not affected.
        other = _worker(tmp_path, redis_server.url, "Y", "spool-3", "other.log")
        until("box Y's worker", lambda: _alive_workers(r, "Y"))
        other.terminate()
        other.wait(120)
        # kill -9 of the first: a worker started at once on this host takes the box over.
        first.kill()
        first.wait()
        again = _worker(tmp_path, redis_server.url, "X", "spool-1", "again.log")
        try:
            until("the new worker's heartbeat",
                  lambda: any(w["pid"] == str(again.pid) for w in _alive_workers(r, "X")))
            assert r.get("perflab:lock:X") == f"{state['host']}-{again.pid}"
        finally:
            again.terminate()
            again.wait(120)
        # Released at its end (or, for a SIGTERM before Celery took the signal, expired in a few beats:
        # its time to live is 4 s).
        until("box X free again", lambda: r.get("perflab:lock:X") is None, timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()


def test_sigterm_of_a_worker_mid_job_logs_one_line(tmp_path, redis_server):     # L9
    r = redis.Redis.from_url(redis_server.url, decode_responses=True)
    worker = _worker(tmp_path, redis_server.url, "T", "spool", "worker.log")
    try:
        until("the worker's heartbeat", lambda: _alive_workers(r, "T"))
        subprocess.run([PERFLAB, "submit", _job(tmp_path, "slow.yaml", "/bin/sleep 31.5"), "--box", "T",
                        "--broker", redis_server.url], env=_env(tmp_path), cwd=tmp_path, check=True, capture_output=True)
        # The benchmark running: the runner holds SIGTERM by then (before, Celery's warm shutdown
        # would wait for the job to end).
        until("the benchmark running", lambda: _running(["/bin/sleep", "31.5"]))
        worker.terminate()
        assert worker.wait(120) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    log = (tmp_path / "worker.log").read_text()
    assert "reject requeue=True: worker stopped by signal 15 during the job" in log, log
    assert "Traceback" not in log and "celery.exceptions.Reject" not in log, log
    assert r.llen("perflab.box.T") == 1    # the job is back in the box's queue


# The reply to HELLO 3 (RESP3's handshake): a map saying the protocol.
_HELLO_REPLY = b"%1\r\n+proto\r\n:3\r\n"


class _AwayBroker:
    """A listener on the port of the stopped broker that answers every command with an error
    (the connection's handshake aside), for as long as the broker is away.

    It is the test's witness that the worker tried to record its job's end while the broker was
    away: that attempt is a transaction (MULTI, ... HINCRBY ..., EXEC) where a heartbeat is EVAL
    then HSET; once the EXEC of such a transaction is answered with an error, the worker's client
    has an error reply to read, which it does not retry (it retries a refused or dropped
    connection, for seconds): the worker notes a broker error in its state, whenever the broker
    comes back."""

    def __init__(self, port: int):
        self.listener = socket.create_server(("127.0.0.1", port))   # SO_REUSEADDR: the broker's port
        self.listener.settimeout(0.1)
        self.record_refused = threading.Event()
        self.connections: list[socket.socket] = []
        self.closing = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.closing.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        queued: list[bytes] = []
        try:
            conn.settimeout(60)
            stream = conn.makefile("rb")
            while True:
                head = stream.readline()
                if not head.startswith(b"*"):
                    return
                args = [stream.read(int(stream.readline()[1:]) + 2)[:-2] for _ in range(int(head[1:]))]
                name = args[0].upper()
                if name == b"HELLO":
                    conn.sendall(_HELLO_REPLY)
                elif name in (b"CLIENT", b"SELECT", b"AUTH"):
                    conn.sendall(b"+OK\r\n")
                elif name == b"EXEC":
                    conn.sendall(b"-EXECABORT Transaction discarded because of previous errors.\r\n")
                    if b"HINCRBY" in queued:
                        self.record_refused.set()
                    return
                else:
                    conn.sendall(b"-ERR the broker is away\r\n")
                    if name != b"MULTI" and not queued:
                        return   # a command outside a transaction (the heartbeat's EVAL): answered
                    queued.append(name)
        except (OSError, ValueError):
            return
        finally:
            conn.close()

    def close(self) -> None:
        self.closing.set()
        self.thread.join()
        self.listener.close()
        for conn in self.connections:   # connections a client keeps: it reconnects, to the broker
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def test_a_broker_error_leaves_the_state_once_the_broker_is_back(tmp_path, redis_server):     # L10
    r = redis.Redis.from_url(redis_server.url, decode_responses=True)
    worker = _worker(tmp_path, redis_server.url, "R", "spool", "worker.log", heartbeat=0.3)
    log = tmp_path / "worker.log"
    # The job ends when the test says so (once the broker is away), not after a time.
    release = tmp_path / "release"
    argv = ["/bin/sh", "-c", f"while [ ! -e {shlex.quote(str(release))} ]; do sleep 0.05; done"]
    away = None
    try:
        until("the worker's heartbeat", lambda: _alive_workers(r, "R"))
        subprocess.run([PERFLAB, "submit", _job(tmp_path, "held.yaml", shlex.join(argv)), "--box", "R",
                        "--broker", redis_server.url], env=_env(tmp_path), cwd=tmp_path, check=True, capture_output=True)
        until("the benchmark running", lambda: _running(argv))
        redis_server.stop()
        # The job ends while the broker is away: its end cannot be recorded ("connection refused",
        # then the stand-in's error reply, which tells the test that the worker has met the error).
        release.touch()
        until("the benchmark ended", lambda: not _running(argv))
        away = _AwayBroker(redis_server.port)
        until("the worker's record of the job's end, refused", away.record_refused.is_set)
        away.close()
        away = None
        redis_server.start()
        until("the worker's heartbeat, idle, after the broker came back",
              lambda: [w for w in _alive_workers(r, "R") if w["state"] == "idle"])
        until("the worker's log saying the broker is back", lambda: "broker back at" in log.read_text())
        # A few more beats (each one seen: its `seen` field, removed here, written again): the error stays away.
        for beat in range(3):
            key = until("the worker's heartbeat key", lambda: next(iter(r.scan_iter("perflab:worker:R:*")), None))
            r.hdel(key, "seen")
            state = until(f"beat {beat + 1}", lambda: (h := r.hgetall(key)) and "seen" in h and h)
            assert not state["last_error"].startswith("broker:"), state
        shown = subprocess.run([PERFLAB, "queue", "--broker", redis_server.url], env=_env(tmp_path), cwd=tmp_path,
                               capture_output=True, text=True, check=True).stdout
        assert "broker:" not in shown, shown
    finally:
        if away is not None:
            away.close()
        worker.terminate()
        worker.wait(120)
    text = log.read_text()
    assert "broker back at" in text and "after broker: " in text, text    # kept in the log, dated

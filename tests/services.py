"""Real services for the tests: a throwaway PostgreSQL cluster, a redis-server and an sshd.

Each starts on a free loopback port in a temporary directory, in its own
process group, and is stopped (the whole group killed) by the fixture's
finalizer, also when a test fails. Both can be stopped and started again on
the same port and data, for tests of a store or broker that goes away for a
while.

If a server cannot be started, the fixture FAILS with the reason: these
tests are never skipped silently (tools/test.sh installs the packages).

    from tests.services import PostgresCluster, RedisServer, SshServer   # or through conftest's fixtures

`until` is the tests' one way to wait for what a service or a process of theirs is to do.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from perflab.execution.machine_lock import FAR_DIR_ENV as FAR_LOCK_ENV

START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0


class ServiceError(RuntimeError):
    """A service could not be started; the message says why (and shows its log's tail)."""


def until(what: str, condition, timeout: float = 120.0, step: float = 0.05, show=None):
    """The first true value of `condition()`, asked every `step` seconds. `timeout` is a backstop
    for what never comes, not a measure of speed (the wait ends when the condition holds): past
    it, an AssertionError naming `what` and whatever `show()` tells (a log's tail)."""
    deadline = time.monotonic() + timeout
    while True:
        past = time.monotonic() >= deadline    # read before the look: the last one is past the backstop
        got = condition()
        if got or past:
            break
        time.sleep(step)
    if got:
        return got
    raise AssertionError(f"timed out waiting for {what} ({timeout:g} s)" + (f": {show()}" if show else ""))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def _tail(path: Path, lines: int = 8) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _kill_group(proc: subprocess.Popen | None, first: int, timeout: float = STOP_TIMEOUT) -> None:
    """Send `first` to the server (the leader of its own session: PostgreSQL's
    postmaster stops its children itself), then SIGKILL what is left of the group."""
    if proc is None:
        return
    if proc.poll() is None:
        try:
            proc.send_signal(first)
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # stragglers of the group, if any (also after a crash)
    except (ProcessLookupError, PermissionError):
        pass
    if proc.poll() is None:
        proc.wait(5)


def _service_user() -> str | None:
    """The user a server runs as when we are root (initdb refuses root): Debian's
    `postgres` if the package made it, else `nobody`. None when not root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise ServiceError("running as root and neither a 'postgres' nor a 'nobody' user exists to run PostgreSQL")


def postgres_bindir() -> Path:
    """The directory of initdb and postgres: $PERFLAB_PG_BINDIR, PATH, or Debian's /usr/lib/postgresql/N/bin."""
    configured = os.environ.get("PERFLAB_PG_BINDIR")
    if configured:
        return Path(configured)
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[-3]))
    if versions:
        return Path(versions[-1]).parent
    raise ServiceError("PostgreSQL is not installed: no initdb on PATH or under /usr/lib/postgresql/*/bin "
                       "(tools/test.sh installs the Debian package 'postgresql')")


class PostgresCluster:
    """A throwaway cluster: initdb into a temp dir, `postgres` on 127.0.0.1:PORT,
    superuser `perflab`, trust authentication on loopback only, no Unix socket
    outside the temp dir. fsync is off by default: nothing here must survive a
    power cut, and the tests get faster."""

    SUPERUSER = "perflab"

    def __init__(self, *, durable: bool = False, settings: dict[str, str] | None = None):
        self.bindir = postgres_bindir()
        self.user = _service_user()
        self.base = Path(tempfile.mkdtemp(prefix="perflab-pg-"))
        self.data = self.base / "data"
        self.log = self.base / "postgres.log"
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self._names = itertools.count(1)
        self.settings = {"listen_addresses": "127.0.0.1", "unix_socket_directories": str(self.base),
                         "max_connections": "100", "shared_buffers": "32MB"}
        if not durable:
            # fsync off: data survive a crash of the server (written to the OS at commit),
            # not of the machine, which no test needs.
            self.settings.update(fsync="off", full_page_writes="off")
        self.settings.update(settings or {})
        if self.user:
            # The server's user must own its directory (and reach it: mkdtemp makes it 0700).
            entry = pwd.getpwnam(self.user)
            os.chown(self.base, entry.pw_uid, entry.pw_gid)
        try:
            self._as_user([str(self.bindir / "initdb"), "-D", str(self.data), "-U", self.SUPERUSER,
                           "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync"], "initdb")
        except BaseException:
            shutil.rmtree(self.base, ignore_errors=True)
            raise

    def _identity(self) -> dict:
        """Popen's user/group switch (done in the child before exec, with no wrapper
        process such as runuser between us and the server: signals reach it as sent)."""
        if not self.user:
            return {}
        entry = pwd.getpwnam(self.user)
        return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}

    def _as_user(self, argv: list[str], what: str) -> None:
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=self.base, timeout=120, **self._identity())
        if proc.returncode != 0:
            tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-5:])
            raise ServiceError(f"{what} failed (exit {proc.returncode}): {tail}")

    # -- life ----------------------------------------------------------------
    def start(self) -> "PostgresCluster":
        if self.running:
            return self
        argv = [str(self.bindir / "postgres"), "-D", str(self.data), "-p", str(self.port)]
        for key, value in self.settings.items():
            argv += ["-c", f"{key}={value}"]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=self.base,
                                         stdin=subprocess.DEVNULL, start_new_session=True, **self._identity())
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServiceError(f"postgres exited {self.proc.returncode} at start: {_tail(self.log)}")
            if self._accepts():
                return self
            time.sleep(0.05)
        self.stop()
        raise ServiceError(f"postgres did not accept connections on 127.0.0.1:{self.port} "
                           f"within {START_TIMEOUT:.0f} s: {_tail(self.log)}")

    def _accepts(self) -> bool:
        import psycopg

        try:
            with psycopg.connect(self.dsn("postgres"), connect_timeout=2):
                return True
        except psycopg.OperationalError:
            return False

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: `fast` (SIGINT: ends sessions, clean shutdown) or
        `immediate` (SIGQUIT: as a crash, recovery at the next start)."""
        _kill_group(self.proc, signal.SIGQUIT if mode == "immediate" else signal.SIGINT)
        self.proc = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def destroy(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> "PostgresCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.destroy()

    # -- databases -----------------------------------------------------------
    def dsn(self, database: str) -> str:
        """A libpq connection string (for psycopg directly)."""
        return f"host=127.0.0.1 port={self.port} user={self.SUPERUSER} dbname={database}"

    def url(self, database: str) -> str:
        """The database URL perflab takes (`--db`, PERFLAB_DB)."""
        return f"postgresql://{self.SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str | None = None) -> str:
        """A new empty database (from template0: cheap), returning its name."""
        import psycopg

        name = name or f"t{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
        return name

    def drop_database(self, name: str) -> None:
        import psycopg

        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def sql(self, database: str, query: str, params=()) -> list[tuple]:
        """Rows of one query (or [] for a statement), in its own transaction."""
        import psycopg

        with psycopg.connect(self.dsn(database), autocommit=True) as conn:
            cur = conn.execute(query, params)
            return cur.fetchall() if cur.description else []


class _ProcessServer:
    """A server that is one process group (`proc`) with its files in `base`: stopped by SIGTERM to
    the group (sshd's sessions are in sessions of their own and end with their connections),
    removed with its files. Subclasses start it (`start` returns self)."""

    proc: subprocess.Popen | None
    base: Path

    def stop(self) -> None:
        _kill_group(self.proc, signal.SIGTERM)
        self.proc = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.destroy()


class RedisServer(_ProcessServer):
    """redis-server on 127.0.0.1:PORT in a temp dir, no persistence, in the foreground."""

    def __init__(self):
        binary = shutil.which("redis-server")
        if not binary:
            raise ServiceError("redis-server is not installed (tools/test.sh installs the Debian package 'redis-server')")
        self.binary = binary
        self.base = Path(tempfile.mkdtemp(prefix="perflab-redis-"))
        self.log = self.base / "redis.log"
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> "RedisServer":
        if self.running:
            return self
        argv = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--daemonize", "no", "--dir", str(self.base)]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=self.base,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServiceError(f"redis-server exited {self.proc.returncode} at start: {_tail(self.log)}")
            if self.ping():
                return self
            time.sleep(0.02)
        self.stop()
        raise ServiceError(f"redis-server did not answer on 127.0.0.1:{self.port} within {START_TIMEOUT:.0f} s: {_tail(self.log)}")

    def ping(self) -> bool:
        """Whether the server answers PING (spoken in RESP, no client library needed)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"*1\r\n$4\r\nPING\r\n")
                return sock.recv(64).startswith(b"+PONG")
        except OSError:
            return False



class SshServer(_ProcessServer):
    """OpenSSH's sshd on 127.0.0.1:PORT in a temp dir: a generated host key, a generated client
    key (the only one it accepts), no password, no PAM; and an ssh config (`config`, for `ssh -F`
    or $PERFLAB_SSH_CONFIG) whose Host `HOST` reaches it as the current user. With `hostname`,
    as root (unshare --uts), it runs in a UTS namespace of its own under that name, so that what a
    session there reports (uname -n) is visibly the far side's; `hostname` is None otherwise."""

    HOST = "perflab-test-box"

    def __init__(self, hostname: str | None = None):
        # A namespace needs CAP_SYS_ADMIN (a container's root may lack it): tried, not assumed.
        self.hostname = hostname if hostname and os.geteuid() == 0 and shutil.which("unshare") and subprocess.run(
            ["unshare", "--uts", "true"], capture_output=True).returncode == 0 else None
        binary = shutil.which("sshd") or ("/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else None)
        if not binary or not shutil.which("ssh-keygen"):
            raise ServiceError("sshd is not installed (tools/test.sh installs the Debian package 'openssh-server')")
        self.binary = binary
        self.base = Path(tempfile.mkdtemp(prefix="perflab-sshd-"))
        self.port = free_port()
        self.log = self.base / "sshd.log"
        self.config = self.base / "ssh_config"
        self.user = pwd.getpwuid(os.getuid()).pw_name
        self.proc: subprocess.Popen | None = None
        for key in ("host_key", "client_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.base / key)], check=True,
                           capture_output=True, timeout=60)
        # One key file per user (sshd reads it as that user: the directories are searchable by all).
        (self.base / "keys").mkdir(mode=0o755)
        self.base.chmod(0o711)
        self._authorize(self.user)
        self.users: list[str] = []          # users add_user made on this machine, removed by destroy
        # Its machine lock's directory (SetEnv below), open to every user as /tmp's would be.
        (self.base / "machine-lock").mkdir()
        (self.base / "machine-lock").chmod(0o1777)
        (self.base / "sshd_config").write_text(
            f"ListenAddress 127.0.0.1\nPort {self.port}\nHostKey {self.base / 'host_key'}\n"
            f"AuthorizedKeysFile {self.base / 'keys'}/%u\nStrictModes no\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nUsePAM no\nPermitRootLogin prohibit-password\nPidFile none\n"
            "MaxSessions 50\nMaxStartups 50\n"
            # Curve25519 alone: OpenSSH's default key exchange (sntrup761x25519, post-quantum) costs
            # each new connection ~50 ms more of its client's CPU (61 ms against 9-11 here), and the
            # tests make hundreds (every job's machine lock is a connection of its own). Which key
            # exchange a loopback sshd agrees on is nothing perflab does; a client offers both.
            "KexAlgorithms curve25519-sha256,curve25519-sha256@libssh.org\n")
        # Its sessions' environment (sshd's SetEnv, written at start: sshd takes one SetEnv line).
        # Its own machine lock (execution/machine_lock.py): the test machines share this kernel,
        # and one /tmp/perflab-machine-lock would make them one machine to each other.
        # SHLVL=1: bash, the login shell sshd runs each session's command with, reads the user's
        # ~/.bashrc when started by sshd at level 1 only, and starts at SHLVL + 1. Here root's
        # runs `pyenv init` (some twenty processes, ~0.1 s of CPU): every ssh call perflab makes
        # paid it, 162 times in the robot's test. A far machine's shell start-up is its owner's,
        # nothing perflab does; the sessions' PATH is sshd's default (or `env`'s). A chatty ~/.bashrc
        # is tested with an sshd without it (test_ssh_target.py).
        self.env = {FAR_LOCK_ENV: str(self.base / "machine-lock"), "SHLVL": "1"}
        self.config.write_text(
            f"Host {self.HOST}\n  HostName 127.0.0.1\n  Port {self.port}\n  User {self.user}\n"
            f"  IdentityFile {self.base / 'client_key'}\n  IdentitiesOnly yes\n  StrictHostKeyChecking no\n"
            "  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n")

    @property
    def on(self) -> str:
        """The `--on` value that reaches it (with `config` as the ssh config)."""
        return f"ssh://{self.HOST}"

    def _authorize(self, user: str) -> None:
        keys = self.base / "keys" / user
        shutil.copy(self.base / "client_key.pub", keys)
        keys.chmod(0o644)

    def add_host(self, alias: str, *lines: str) -> str:
        """Another Host of `config` reaching this sshd, with more of ssh_config's `lines` (User,
        ProxyJump...): its `--on` value."""
        with open(self.config, "a") as f:
            f.write(f"Host {alias}\n  HostName 127.0.0.1\n  Port {self.port}\n"
                    f"  IdentityFile {self.base / 'client_key'}\n  IdentitiesOnly yes\n  StrictHostKeyChecking no\n"
                    "  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n" + "".join(f"  {line}\n" for line in lines))
        return f"ssh://{alias}"

    def add_user(self) -> tuple[str, str]:
        """A user who is not root, let in with the client key: (its name, the `--on` value reaching
        it). As root, made here (useradd; its home under /tmp) and removed by destroy; otherwise the
        tests' own user, who is not root already."""
        if os.geteuid() != 0:
            return self.user, self.on
        name = f"perflab-u{self.port}"
        if shutil.which("useradd") is None:
            raise ServiceError("useradd is not installed (Debian package passwd): no user who is not root")
        # Password '*': no password, and not locked ('!'), which sshd without PAM refuses.
        subprocess.run(["useradd", "--create-home", "--home-dir", f"/tmp/{name}", "--shell", "/bin/sh",
                        "--password", "*", name],
                       check=True, capture_output=True, timeout=60)
        self.users.append(name)
        self._authorize(name)
        return name, self.add_host(f"{self.HOST}-{name}", f"User {name}")

    def destroy(self) -> None:
        super().destroy()
        for name in self.users:
            # Its sessions end with sshd's connections: userdel refuses while one still runs.
            for _ in range(50):
                if subprocess.run(["userdel", "--remove", name], capture_output=True, timeout=60).returncode in (0, 6):
                    break
                time.sleep(0.2)
        self.users.clear()

    def start(self) -> "SshServer":
        if self.running:
            return self
        if os.geteuid() == 0:
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)    # its privilege-separation directory
        config = self.base / "sshd_config"
        lines = [line for line in config.read_text().splitlines() if not line.startswith("SetEnv ")]
        config.write_text("\n".join(lines + ["SetEnv " + " ".join(f"{k}={v}" for k, v in self.env.items())]) + "\n")
        with open(self.log, "ab") as log:
            argv = [self.binary, "-D", "-e", "-f", str(self.base / "sshd_config")]
            if self.hostname:
                argv = ["unshare", "--uts", "sh", "-c", f'hostname "$0" && exec "$@"', self.hostname, *argv]
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServiceError(f"sshd exited {self.proc.returncode} at start: {_tail(self.log)}")
            if _port_open(self.port):
                return self
            time.sleep(0.02)
        self.stop()
        raise ServiceError(f"sshd did not listen on 127.0.0.1:{self.port} within {START_TIMEOUT:.0f} s: {_tail(self.log)}")

    def ssh(self, command: str, timeout: float = 60) -> subprocess.CompletedProcess:
        """A command run on it, as the tests check what is left there."""
        return subprocess.run(["ssh", "-F", str(self.config), self.HOST, command], capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)



# -- pytest fixtures (conftest.py imports these) ------------------------------------

@pytest.fixture(scope="session")
def postgres_cluster():
    """One PostgreSQL cluster per test session (per xdist worker)."""
    try:
        cluster = PostgresCluster()
    except (ServiceError, OSError, subprocess.SubprocessError) as e:
        pytest.fail(f"cannot create a PostgreSQL cluster: {e}", pytrace=False)
    try:
        cluster.start()
    except (ServiceError, OSError) as e:
        cluster.destroy()
        pytest.fail(f"cannot start PostgreSQL: {e}", pytrace=False)
    yield cluster
    cluster.destroy()


@pytest.fixture
def postgres_url(postgres_cluster):
    """The URL of a fresh, empty database on the session's cluster (dropped afterwards)."""
    if not postgres_cluster.running:  # a test that stopped it and failed before starting it again
        postgres_cluster.start()
    name = postgres_cluster.create_database()
    yield postgres_cluster.url(name)
    if postgres_cluster.running:
        postgres_cluster.drop_database(name)


def sshd_named(hostname: str):
    """For a fixture to `yield from`: an sshd on 127.0.0.1 that answers as `hostname` (a UTS
    namespace of its own where it can), destroyed afterwards; never a silent skip."""
    try:
        server = SshServer(hostname=hostname)
        server.start()
    except (ServiceError, OSError, subprocess.SubprocessError) as e:
        pytest.fail(f"cannot start sshd: {e}", pytrace=False)
    yield server
    server.destroy()


@pytest.fixture
def redis_server():
    """A redis-server of this test alone (a broker test may stop and restart it)."""
    try:
        server = RedisServer()
        server.start()
    except (ServiceError, OSError) as e:
        pytest.fail(f"cannot start redis-server: {e}", pytrace=False)
    yield server
    server.destroy()


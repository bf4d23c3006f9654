"""Where `on` reaches, and the one shared SSH connection to it (perflab.execution.targets.ssh).

`machine_of` reads `on` (ssh://[user@]host[:port], or a machine of perflab's configuration);
`connection` gives the ControlMaster every ssh call of this perflab process to that machine
shares; `reconnect` makes a new one after the machine rebooted (execution/targets/kexec.py).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from perflab.core.errors import TargetDown, UsageProblem
from perflab.core.process import die_with_parent, kill_group
from perflab.execution import scratch

SCHEME = "ssh://"
SSH_CONFIG_ENV = "PERFLAB_SSH_CONFIG"     # `ssh -F FILE` for every machine (the tests' sshd)
CONNECT_TIMEOUT = 10.0
# Printed before a short command's output: what comes before it is the far shell's start-up
# (bash reads ~/.bashrc for sshd's commands too, and one may print), not the command's.
OUTPUT_MARK = "@perflab-output@"
CONTROL_PREFIX = "perflab-ssh-"           # this machine's directory of a connection's control socket
HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*|\[[0-9A-Fa-f:.]+\]")
USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")


class SshDown(TargetDown):
    """The machine could not be reached, or stopped answering: one line, and ssh's last words."""


@dataclass(frozen=True)
class Machine:
    """Where `on` reaches: the destination ssh is given, and the settings it is reached with."""

    on: str                                   # as written: ssh://... or a configured name
    destination: str                          # [user@]host, or a Host of the ssh config
    port: int | None = None
    ssh_config: str | None = None
    ssh_options: tuple[str, ...] = ()
    tmpdir: str | None = None
    connect_timeout: float = CONNECT_TIMEOUT
    settings: tuple = ()                      # the configured [machine.NAME] keys, as (key, value) pairs

    def ssh(self, control: str, *more: str) -> list[str]:
        """The ssh command line to reach it through the control socket `control`, then `more`."""
        config = self.ssh_config or os.environ.get(SSH_CONFIG_ENV)
        return ["ssh", *(["-F", os.path.expanduser(config)] if config else []),
                "-o", "BatchMode=yes", "-o", f"ConnectTimeout={self.connect_timeout:g}",
                "-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=4",
                "-o", f"ControlPath={control}", *(["-p", str(self.port)] if self.port else []),
                *self.ssh_options, *more, "--", self.destination]


def _destination(text: str, where: str) -> tuple[str, int | None]:
    """ssh://[user@]host[:port] or [user@]host -> ([user@]host, port); UsageProblem naming `where`."""
    rest = text[len(SCHEME):] if text.startswith(SCHEME) else text
    user, _, hostport = rest.rpartition("@")
    host, port = hostport, None
    if hostport.startswith("["):                       # [::1]:22
        host, _, tail = hostport.partition("]")
        host += "]"
        if tail:
            if not tail.startswith(":"):
                host = ""
            port = tail[1:]
    elif ":" in hostport:
        host, _, port = hostport.partition(":")
    bad = ((user and not USER.fullmatch(user)) or not HOST.fullmatch(host or "")
           or (port is not None and not (port.isdigit() and 0 < int(port) < 65536)))
    if bad or rest.endswith("/"):
        raise UsageProblem(f"{where} = {text!r}: expected ssh://[user@]host[:port] (host: letters, digits, '.', '-'; "
                           "port: 1-65535)")
    return (f"{user}@{host.strip('[]')}" if user else host.strip("[]")), (int(port) if port else None)


def machine_of(on, where: str = "--on") -> Machine:
    """A job's `on` value -> the machine it names: ssh://[user@]host[:port], or a machine of perflab's
    configuration ([machine.NAME]); UsageProblem in one line naming `where` and the value."""
    from perflab.core import config

    if not isinstance(on, str) or not on.strip() or "\n" in on or on != on.strip():
        raise UsageProblem(f"{where} = {on!r}: expected ssh://[user@]host[:port] or the name of a machine "
                           "of perflab's configuration")
    if on.startswith(SCHEME):
        destination, port = _destination(on, where)
        return Machine(on, destination, port)
    settings = config.machine(on)
    if settings is None:
        names = config.machines()
        known = f"; configured: {', '.join(names)}" if names else f"; {config.path()} names none"
        raise UsageProblem(f"{where} = {on!r}: not ssh://[user@]host[:port] and no machine of that name "
                           f"([machine.{on}]){known}")
    destination, port = _destination(settings["ssh"], f"{config.path()}: [machine.{on}] ssh")
    return Machine(on, destination, port, settings.get("ssh_config"), tuple(settings.get("ssh_options", ())),
                   settings.get("tmpdir"), float(settings.get("connect_timeout", CONNECT_TIMEOUT)),
                   tuple(sorted((k, v) for k, v in settings.items() if not isinstance(v, list))))


# -- the shared connection -------------------------------------------------------------

def _last_words(path: Path, lines: int = 3) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    kept = [line.strip() for line in text.replace("\r", "").splitlines() if line.strip()]
    return " ".join(kept[-lines:])


class Connection:
    """One ControlMaster to a machine for this perflab process: every ssh call of its runs shares it."""

    def __init__(self, machine: Machine):
        self.machine = machine
        scratch.remove_orphans(CONTROL_PREFIX)   # control directories of a killed perflab
        self.dir = Path(tempfile.mkdtemp(prefix=f"{CONTROL_PREFIX}{os.getpid()}-"))
        self.control = str(self.dir / "control")
        self.err = self.dir / "master.err"
        with open(self.err, "wb") as err:
            self.master = subprocess.Popen(
                machine.ssh(self.control, "-M", "-N", "-o", "ControlMaster=yes", "-o", "ControlPersist=no"),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
                preexec_fn=die_with_parent)   # ssh dies with perflab, even after kill -9
        deadline = time.monotonic() + machine.connect_timeout + 20
        while not os.path.exists(self.control):
            if self.master.poll() is not None or time.monotonic() > deadline:
                said = _last_words(self.err) or f"ssh exited with {self.master.poll()}"
                self.close()
                raise SshDown(f"target down: cannot reach {machine.on} over SSH: {said}")
            time.sleep(0.02)

    def command(self, *remote: str) -> list[str]:
        """ssh through the shared connection, running `remote` (one shell command line) there."""
        return [*self.machine.ssh(self.control, "-o", "ControlMaster=no", "-T"), *remote]

    def run(self, script: str, timeout: float = 60.0) -> str:
        """The output of a short command on the machine; SshDown when it fails."""
        try:
            done = subprocess.run(self.command(f"printf '\\n%s\\n' {OUTPUT_MARK}; {script}"), capture_output=True,
                                  text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise SshDown(f"target down: {self.machine.on} did not answer within {timeout:g} s") from None
        if done.returncode != 0:
            said = " ".join(done.stderr.split()[-40:]) or f"exit status {done.returncode}"
            raise SshDown(f"target down: {self.machine.on}: {script!r} failed: {said}")
        at = done.stdout.find(f"\n{OUTPUT_MARK}\n")
        return done.stdout[at + len(OUTPUT_MARK) + 2:] if at >= 0 else done.stdout

    def close(self) -> None:
        if self.master.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.master.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.master.wait(5)
        kill_group(self.master)
        shutil.rmtree(self.dir, ignore_errors=True)


_CONNECTIONS: dict[Machine, Connection | SshDown] = {}
_LOCK = threading.Lock()


def connection(machine: Machine) -> Connection:
    """The shared connection to `machine`, made on first use; SshDown (remembered: tried once per
    command) when it cannot be made."""
    with _LOCK:
        found = _CONNECTIONS.get(machine)
        if isinstance(found, Connection) and found.master.poll() is not None:      # the master died
            found.close()
            found = None
        if found is None:
            try:
                found = Connection(machine)
            except SshDown as e:
                found = e
            _CONNECTIONS[machine] = found
    if isinstance(found, SshDown):
        raise found
    return found


def reconnect(machine: Machine) -> Connection:
    """A new connection to `machine`, the old one (and a remembered failure) dropped: after a reboot."""
    with _LOCK:
        found = _CONNECTIONS.pop(machine, None)
    if isinstance(found, Connection):
        found.close()
    return connection(machine)


def close_connections() -> None:
    """Every shared connection closed (at exit; tests)."""
    with _LOCK:
        for c in _CONNECTIONS.values():
            if isinstance(c, Connection):
                c.close()
        _CONNECTIONS.clear()


atexit.register(close_connections)
_CPUS: dict[Machine, int | None] = {}


def machine_cpus(machine: Machine) -> int | None:
    """The machine's online CPUs (asked once per command); None when it cannot be reached (its run
    then fails as target down where it would run)."""
    if machine not in _CPUS:
        try:
            text = connection(machine).run("getconf _NPROCESSORS_ONLN").strip()
            _CPUS[machine] = int(text) if text.isdigit() and int(text) > 0 else None
        except SshDown:
            _CPUS[machine] = None
    return _CPUS[machine]

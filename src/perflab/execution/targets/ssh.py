"""A machine reached over SSH, on its running kernel: `--on ssh://[user@]host[:port]`, a job's `on:`.

The OpenSSH client does the reaching (the user's ~/.ssh/config, agent, ProxyJump work as for
`ssh`), through one ControlMaster per machine for the command (killed with perflab). On it:
`getconf _NPROCESSORS_ONLN` once (what `nr_task: 50%` is a share of); per place, one session
whose `/bin/sh` makes a run directory (`mktemp -d`), reads perflab's static programs into it
from stdin (`head -c`: agent, launcher, the families' programs) and runs `agent --remote DIR
IDLE` (execution/vm/c/agent.c), which speaks the guest's frames over ssh's stdin/stdout: the
loop's executor is the guest's (Guest.execute), paths moved into the run directory.

Nothing is left there: the shell removes the run directory when the agent ends (trap EXIT);
the agent ends, after stopping the running launcher, on OFF, at the end of its stdin (perflab
or its ssh gone, also after kill -9), on a failed write, or after IDLE s without a byte
(perflab ticks meanwhile). The run records the machine's facts (read through the agent), this
machine's beside them as host_*; the parameter `on` keeps its figures apart. docs/lab.md,
"Test boxes over SSH".
"""

from __future__ import annotations

import contextlib
import os
import select
import shlex
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar

from perflab.core import cbuild, environment
from perflab.core.errors import PerflabError, TargetDown, UsageProblem
from perflab.core.params import job_cpus, job_machine
from perflab.core.process import ProcessResult, ProcessSpec, die_with_parent
from perflab.execution import executor
from perflab.execution.filesystem import filesystem_of
from perflab.execution.targets import registered as _registered
from perflab.execution.targets import (HOST_PROGRAMS, HOST_TOOLS, INSTRUCTION_COUNTS, WORK_DISK, WRITABLE_HOST_TREE,
                                      Executor, Opening, PerfThere, Place, RunIn, Target, TargetOption, Toolchain)
from perflab.execution.vm import initramfs
# The guest's driver, shared as it is: its frames, its executor (Guest.execute), its environment.
from perflab.execution.vm.channel import Channel, _Dead, _Late
from perflab.execution.vm.machine import DEFAULT_ENV, Guest, VmSpec
# Where `on` reaches and the shared connection, re-exported: tests and callers name them here.
from perflab.execution.targets.ssh_machine import (  # noqa: F401
    CONNECT_TIMEOUT, SCHEME, SSH_CONFIG_ENV, Connection, Machine, SshDown, _CPUS, _last_words, close_connections, connection,
    machine_cpus, machine_of, reconnect)

ON_KEY = "on"
# The agent ends after this long without a byte from perflab; perflab ticks four times as often.
IDLE_SECONDS = 60
RUN_PREFIX = "perflab-run."               # the run directory on the machine: mktemp -d .../perflab-run.XXXXXX

ON_OPTION = TargetOption(
    "--on", "on", "ssh://[USER@]HOST[:PORT]|MACHINE",
    "Run the job on a machine reached over SSH, on its running kernel: ssh://[user@]host[:port], or a "
    "machine named in perflab's configuration ([machine.NAME]; docs/lab.md, \"Test boxes over SSH\"). With --kernel "
    "debian:RELEASE|RECIPE.yaml|IMAGE|PKG.deb on a machine configured with kexec = true: that kernel, installed "
    "there (a recipe built as a Debian package) and kexec'ed.")
KEEP_KERNEL_KEY = "keep_kernel"
KEEP_KERNEL_OPTION = TargetOption(
    "--keep-kernel", KEEP_KERNEL_KEY, "",
    "With --on MACHINE --kernel K: leave the kernel installed on the machine afterwards (it goes back to its "
    "default kernel all the same).", is_flag=True)


# -- the target ------------------------------------------------------------------------

@dataclass(frozen=True)
class Ssh(Target):
    """A machine reached over SSH, on the kernel it runs, or on `kernel` switched to by kexec
    (execution/targets/kexec.py). `on` as the job wrote it."""

    kind = "ssh"
    job_keys: ClassVar[tuple[str, ...]] = (ON_KEY, KEEP_KERNEL_KEY)
    options: ClassVar[tuple[TargetOption, ...]] = (ON_OPTION, KEEP_KERNEL_OPTION)
    lacks = {WRITABLE_HOST_TREE: "this machine's directories are not on the SSH machine",
             WORK_DISK: "a file system of its own on an SSH machine is not made yet (run without fs:)",
             INSTRUCTION_COUNTS: "an SSH machine's CPU runs it natively (boot a kernel under vm mode icount)"}
    # HOST_TOOLS (perf-stat, perf-profile) it offers: the machine's own perf, found on its PATH
    # before the job runs (check) and run there beside the processes (perf_there: ssh_perf.py).
    on: str = ""
    toolchain: Toolchain = field(default_factory=Toolchain)
    kernel: str | dict | None = None          # debian:RELEASE, a recipe's keys or an image: the kernel under test there
    keep_kernel: bool = False
    # The kernel as the runs' parameter when its file is not the name (a kernel bisection's: the
    # image's path in each commit's build output; the commit says whose): not a job key.
    kernel_name: str = ""

    @classmethod
    def from_keys(cls, doc: dict, toolchain: Toolchain) -> Ssh | None:
        """The target of a job's keys when they say `on:` (None otherwise)."""
        if not doc.get(ON_KEY):
            return None
        kernel = doc.get("kernel")
        kernel = kernel if (isinstance(kernel, str) and kernel) or (isinstance(kernel, dict) and "tree" in kernel) \
            else None
        return cls(on=doc[ON_KEY], toolchain=toolchain, kernel=kernel, keep_kernel=doc.get(KEEP_KERNEL_KEY) is True)

    @classmethod
    def check_key(cls, key: str, value, where: str) -> None:
        """The value, and the machine asked for its CPUs: a job is being made to run there, and what
        `nr_task: 50%` means is a share of them (a stored job read for a listing asks nothing)."""
        if key == KEEP_KERNEL_KEY:
            if not isinstance(value, bool):
                raise UsageProblem(f"{where} = {value!r}: expected true or false")
            return
        machine_cpus(machine_of(value, where))

    @classmethod
    def option_keys(cls, values: dict) -> dict:
        """`--on` (and `--keep-kernel`) as job keys; with `--on`, `--kernel` is the kernel under test
        there (kexec), taken here so that no guest is asked to boot it."""
        keys = super().option_keys(values)
        kernel = next((values.get(o.param) for t in _registered() for o in t.options
                       if o.key == "kernel" and t is not cls), None)
        if keys.get(ON_KEY) and kernel is not None:
            keys["kernel"] = cls.check_kernel(kernel, "--kernel")
        elif keys.get(KEEP_KERNEL_KEY) and not keys.get(ON_KEY):
            raise UsageProblem("--keep-kernel: only with --on MACHINE --kernel K")
        return keys

    @classmethod
    def check_kernel(cls, value, where: str) -> str | dict:
        """A kernel for an SSH machine (debian:RELEASE, a recipe, an image file) as it is stored; UsageProblem."""
        from perflab.execution.targets import kexec

        return kexec.check_kernel(value, where)

    def keys(self) -> dict:
        kernel = {"kernel": self.kernel} if self.kernel else {}
        keep = {KEEP_KERNEL_KEY: True} if self.keep_kernel else {}
        return {**kernel, ON_KEY: self.on, **keep, **self.toolchain.keys()}

    @property
    def machine(self) -> Machine:
        try:
            return machine_of(self.on, f"key {ON_KEY!r}")
        except UsageProblem as e:
            raise PerflabError(str(e)) from None

    def describe(self) -> str:
        return f"the SSH machine {self.on}" + (f" on kernel {self._kernel_label()}" if self.kernel else "")

    def _kernel_label(self) -> str:
        from perflab.execution.targets import kexec

        return kexec.label(self.kernel) if self.kernel else ""

    def cpus(self) -> int | None:
        """The machine's CPUs once asked (check_key, where a job to run is made); None before."""
        return _CPUS.get(self.machine)

    def check(self, needs: frozenset[str], what: str, params: dict | None = None) -> None:
        super().check(needs, what)
        machine = self.machine             # the value, and a named machine's settings
        if self.kernel:
            from perflab.execution.targets import kexec

            if not kexec.control_of(dict(machine.settings)).kexec:
                raise PerflabError(f"{self.on} is not declared kexec-capable: a kernel under test is booted only on a "
                                   "machine of perflab's configuration with kexec = true ([machine.NAME]; docs/lab.md)")
            kexec.check_package_tools(self.kernel)
        if shutil.which("ssh") is None:
            raise PerflabError("ssh not found: an SSH machine is reached with the OpenSSH client "
                               "(Debian package openssh-client)")
        # With a kernel under test, perf is asked for on that kernel, once the machine runs it (open).
        if HOST_TOOLS in needs and not self.kernel:
            from perflab.execution.targets import ssh_perf

            try:
                ssh_perf.perf_of(machine, connection(machine))
            except SshDown:
                pass              # unreachable: the run fails as target down where it would run
            except PerflabError as e:
                raise PerflabError(f"{what}: {e}") from None

    def perf_there(self) -> PerfThere:
        """The machine's own perf, in the run directory (the agent's working directory); PerflabError
        when it has none (check said so before the job ran) or cannot be reached."""
        from perflab.execution.targets import ssh_perf

        if self.kernel:
            # Asked when the place opened, on the kernel under test (_perf_on_kernel); not asked: it never ran.
            there = ssh_perf.found(self.machine, self._kernel_label())
            if there is None:
                raise PerflabError(f"{self.on} did not run the kernel under test: its perf was not asked for there")
            return there
        return ssh_perf.perf_of(self.machine, connection(self.machine))

    def _perf_on_kernel(self, machine: Machine, release: str) -> None:
        """The machine's perf asked for on the kernel under test, which it now runs (Debian's perf
        is a wrapper of the running kernel's version): PerflabError in one line naming the kernel;
        leaving `open`, the machine goes back to its default kernel and what was installed goes."""
        from perflab.execution.targets import ssh_perf

        try:
            ssh_perf.perf_of(machine, connection(machine), self._kernel_label())
        except SshDown:
            pass                  # unreachable: the run fails as target down where it runs
        except PerflabError as e:
            raise PerflabError(f"perf on the kernel under test {release} ({self.kernel_name or self._kernel_label()}) "
                               f"of {self.on}: {e}") from None

    @contextlib.contextmanager
    def preparing(self, needs: frozenset[str], what: str) -> Iterator[None]:
        """Programs built static (the machine has its own C library, or none we know); the CPUs a
        session sees (will-it-scale's binding, `nr_task: 50%`) are the machine's, and so are its
        programs (cmd's command looked up on its PATH) and settings (THP: not this machine's)."""
        with self.toolchain.building(), cbuild.static_programs(), job_cpus(self.cpus()), job_machine(self.on):
            yield None

    def share_key(self, needs: frozenset[str], params: dict):
        """The jobs that run one after another on the machine (on one kernel) share one session and
        run directory, and one switch to the kernel."""
        return ("ssh", self.on, self._kernel_label() or None, self.keep_kernel)

    @contextlib.contextmanager
    def open(self, openings: list[Opening], execute: Executor) -> Iterator[Place]:
        machine = self.machine
        with contextlib.ExitStack() as stack:
            switched = {}
            if self.kernel:
                from perflab.execution.targets import kexec

                from perflab.core.steps import say
                from perflab.execution.machine_lock import keeping

                # Each reconnection after a reboot first takes the machine's lock again (it went with the boot).
                switched = stack.enter_context(kexec.under_test(machine, kexec.control_of(dict(machine.settings)),
                                                                self.kernel, self.keep_kernel, connection,
                                                                keeping(reconnect), say=say))
                if any(HOST_TOOLS in o.needs for o in openings):
                    self._perf_on_kernel(machine, switched["kexec_release"])
            conn = connection(machine)
            with _session(conn, openings) as (far, shipped, workdirs):
                facts = {**_facts(far, machine), **switched}
                yield _FarPlace(far, facts, openings, shipped, workdirs)

    def params(self, params: dict) -> dict:
        # Where it ran, and on which kernel, is part of what was measured.
        return {**params, ON_KEY: self.on, **self._kernel_param()}

    def _kernel_param(self) -> dict:
        """The kernel as a parameter: debian:RELEASE or the image; a recipe by its build's name, else
        its key (as a recipe's kernel in QEMU: the parameter kernel_build)."""
        if not self.kernel:
            return {}
        if self.kernel_name:
            return {"kernel": self.kernel_name}
        if isinstance(self.kernel, dict):
            from perflab.execution.vm import recipe

            r = recipe.recipe_of(self.kernel)
            return {"kernel_build": r.name or recipe.identity(r)[2]}
        return {"kernel": self.kernel}

    def unopened_facts(self) -> dict:
        return {"ssh_machine": self.on, "testbox": self.on, "host_kernel": os.uname().release,
                **({"kexec_kernel": self._kernel_label()} if self.kernel else {})}


# -- a session on the machine ----------------------------------------------------------

def _programs(openings: list[Opening]) -> tuple[list[str], list[str]]:
    """The static programs the openings' processes start (host files), and their working directories."""
    programs: dict[str, None] = {}
    workdirs: dict[str, None] = {}
    for o in openings:
        for round_no in range(o.rounds):
            for spec in o.session.processes(round_no):
                if spec.cwd:
                    workdirs[spec.cwd] = None
                if HOST_PROGRAMS in o.needs:
                    continue      # the machine's own programs (cmd's command)
                for i, word in enumerate(spec.argv):
                    if not (os.path.isabs(word) and os.path.isfile(word)) or word in programs:
                        continue
                    if initramfs.is_static(word):
                        programs[word] = None
                    elif i == 0:
                        raise PerflabError(f"{word} is not a static program: it cannot be shipped to an SSH machine")
    return list(programs), list(workdirs)


def _bootstrap(machine: Machine, files: list[tuple[str, int]], workdirs: int) -> str:
    """The remote command: a run directory, the files read into it from stdin, the agent run there."""
    top = shlex.quote(machine.tmpdir) if machine.tmpdir else '"${TMPDIR:-/tmp}"'
    lines = ["umask 077",
             f"d=$(mktemp -d {top}/{RUN_PREFIX}XXXXXX) || exit 97",
             # The run directory goes whatever ends the agent (perflab gone, a signal, OFF).
             "trap 'rm -rf \"$d\"' EXIT", "trap 'exit 129' HUP", "trap 'exit 130' INT", "trap 'exit 143' TERM",
             # A word to stderr once perflab's ssh is gone must not kill the shell before its trap runs.
             "trap '' PIPE",
             "cd \"$d\" || exit 97"]
    dirs = sorted({os.path.dirname(name) for name, _ in files if os.path.dirname(name)}
                  | {f"w/{i}" for i in range(workdirs)})
    if dirs:
        lines.append("mkdir -p " + " ".join(shlex.quote(d) for d in dirs) + " || exit 97")
    # GNU head -c reads exactly that many bytes from a pipe: the next file starts where it stops.
    lines += [f"head -c {size} > {shlex.quote(name)} && [ $(wc -c < {shlex.quote(name)}) -eq {size} ] || exit 98"
              for name, size in files]
    lines.append("chmod 700 " + " ".join(shlex.quote(name) for name, _ in files) + " || exit 98")
    lines.append(f'./agent --remote "$d" {IDLE_SECONDS}')
    script = "\n".join(lines)
    return "exec /bin/sh -c " + shlex.quote(script)


def _write_all(fd: int, data: bytes, deadline: float, what: str) -> None:
    view = memoryview(data)
    while view:
        left = deadline - time.monotonic()
        if left <= 0:
            raise SshDown(f"target down: {what}: no progress within the time allowed")
        _, ready, _ = select.select([], [fd], [], min(left, 1.0))
        if ready:
            view = view[os.write(fd, view[:1 << 16]):]


@contextlib.contextmanager
def _session(conn: Connection, openings: list[Opening]):
    """The agent running in a fresh run directory on the machine: (its Guest-like handle, host
    program -> its path relative to the run directory, host working directories)."""
    machine = conn.machine
    programs, workdirs = _programs(openings)
    agent = initramfs.build_static("agent", initramfs.AGENT_DIR)
    launch = initramfs.build_static("launch", executor.LAUNCHER_DIR)
    shipped = {host: f"bin/{i}/{os.path.basename(host)}" for i, host in enumerate(programs)}
    files = [("agent", str(agent)), ("launch", str(launch)), *((name, host) for host, name in shipped.items())]
    contents = [Path(host).read_bytes() for _, host in files]
    script = _bootstrap(machine, [(name, len(data)) for (name, _), data in zip(files, contents)], len(workdirs))
    err_path = conn.dir / f"session-{time.monotonic_ns()}.err"
    err = open(err_path, "wb")
    process = subprocess.Popen(conn.command(script), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                               start_new_session=True, preexec_fn=die_with_parent, bufsize=0)
    err.close()
    channel = _SharedChannel(process.stdin.fileno(), process.stdout.fileno())
    far = None
    ticker = None
    try:
        started = time.monotonic()
        try:
            _write_all(process.stdin.fileno(), b"".join(contents), started + 120 + machine.connect_timeout,
                       f"shipping perflab's programs to {machine.on}")
            kind, hello = channel.receive(time.monotonic() + 60 + machine.connect_timeout)
        except (BrokenPipeError, _Dead):
            process.wait()
            said = _last_words(err_path) or f"ssh exited with {process.returncode}"
            raise SshDown(f"target down: {machine.on}: the run directory and agent did not start: {said}") from None
        except _Late:
            raise SshDown(f"target down: {machine.on}: perflab's agent did not say HELLO within "
                          f"{60 + machine.connect_timeout:g} s") from None
        said = dict(line.split("=", 1) for line in hello.decode(errors="replace").splitlines() if "=" in line)
        if kind != "HELLO" or said.get("launcher") != "1" or not said.get("rundir"):
            raise SshDown(f"target down: {machine.on}: perflab's agent did not start as it should "
                          f"({kind} {hello[:80]!r})")
        here = os.uname().machine
        if said.get("machine") != here:
            raise SshDown(f"target down: {machine.on} is {said.get('machine')!r}: perflab's programs are built "
                          f"static for {here} here")
        far = _Far(VmSpec(kernel=""), process, channel, conn.dir, {}, machine=machine, err_path=err_path,
                   said=said, started=started)
        ticker = _Ticker(channel)
        yield far, shipped, workdirs
    finally:
        if ticker is not None:
            ticker.stop()
        if far is not None:
            far.shutdown()            # OFF, BYE; the shell then removes the run directory
        with contextlib.suppress(ProcessLookupError):
            if process.poll() is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(10)
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        for stream in (process.stdin, process.stdout):
            with contextlib.suppress(OSError):
                stream.close()
        with contextlib.suppress(OSError):
            err_path.unlink()


class _SharedChannel(Channel):
    """The guest's Channel with a lock on its writes: the ticker writes while a request waits."""

    def __init__(self, write_fd: int, read_fd: int):
        super().__init__(write_fd, read_fd)
        self.lock = threading.Lock()

    def send(self, kind: str, payload: bytes = b"") -> None:
        with self.lock:
            super().send(kind, payload)


class _Ticker:
    """TICK frames every IDLE/4 s: the agent's watchdog ends it when perflab is silent for IDLE s."""

    def __init__(self, channel):
        self.channel = channel
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="perflab-ssh-tick", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.wait(IDLE_SECONDS / 4):
            try:
                self.channel.send("TICK")
            except _Dead:
                return

    def stop(self) -> None:
        self.done.set()
        self.thread.join(5)


class _Far(Guest):
    """The guest's executor over ssh's channel: Guest.execute's requests, RESULT frames and
    readings are the same (its deadlines as under TCG: the machine's clock is real time); only
    its failures name the machine and ssh."""

    def __init__(self, spec, process, channel, workdir, facts, *, machine: Machine, err_path: Path,
                 said: dict, started: float):
        super().__init__(spec, process, channel, workdir, facts)
        self.machine, self.err_path, self.said, self.started = machine, err_path, said, started
        self.helper_err = f"{said['rundir']}/helper.err"    # where `agent --remote` puts its helpers' stderr

    def console_tail(self, lines: int = 25) -> str:
        return _last_words(self.err_path, lines)

    def _failure(self, what: str) -> TargetDown:
        what = (what.replace("the guest died", f"perflab's agent on {self.machine.on} ended")
                .replace("the guest agent", "perflab's agent").replace("the guest", self.machine.on)
                .replace("QEMU exited", "ssh exited"))
        said = _last_words(self.err_path)
        return SshDown(f"target down: {what}" + (f" (ssh: {said})" if said else ""))

    def shutdown(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(_Dead, _Late, TargetDown):
                self.channel.send("OFF")
                self.channel.receive(time.monotonic() + 10)
            with contextlib.suppress(OSError):
                self.process.stdin.close()      # end of the agent's stdin: the shell's trap runs


def _facts(far, machine: Machine) -> dict:
    """The machine's facts, read through its agent: the run's environment names it, not this machine."""
    texts = {path: far.read(path).decode(errors="replace").strip() for path in environment.MACHINE_FILES}
    far.mounts = far.read("/proc/self/mounts").decode(errors="replace")     # where the run directory is

    def read(path: str) -> str:
        return texts.get(path) or environment.NA

    said = far.said
    load = read("/proc/loadavg").split()[:3]
    name = said.get("hostname") or machine.destination
    return {
        "testbox": machine.on if not machine.on.startswith(SCHEME) else name,
        "hostname": name,
        "kernel_release": said.get("release", environment.NA),
        "kernel_version": said.get("version", environment.NA),
        "arch": said.get("machine", environment.NA),
        **environment.machine_facts(read),
        "loadavg_start": " ".join(load) if len(load) == 3 else environment.NA,
        # perflab's programs ran static: the machine's C library and hwcaps took no part.
        "libc": f"static, linked on {socket.gethostname()}",
        "glibc_hwcaps": "n/a (static programs)",
        "ssh_machine": machine.on,
        "ssh_destination": machine.destination + (f":{machine.port}" if machine.port else ""),
        "ssh_session_seconds": f"{time.monotonic() - far.started:.2f}",
        "controller": socket.gethostname(),
    }


class _FarPlace(Place):
    """A session on the machine shared by the jobs it was opened for: each job's processes start
    through the agent, their programs and directories moved into the run directory."""

    def __init__(self, far, facts: dict, openings: list[Opening], shipped: dict[str, str], workdirs: list[str]):
        super().__init__(self._unadmitted, facts)
        self.far, self.openings = far, openings
        rundir = far.said["rundir"]
        self.moved = {host: f"{rundir}/{name}" for host, name in shipped.items()}
        self.dirs = {host: f"{rundir}/w/{i}" for i, host in enumerate(workdirs)}
        self.env = {**DEFAULT_ENV, "HOME": far.said.get("home") or rundir}

    def _unadmitted(self, spec, **kwargs):
        raise RuntimeError("an SSH machine's processes start through the executor admit() gives")

    def admit(self, index: int) -> RunIn:
        facts = {**self.facts, "ssh_place_job": str(index + 1), "ssh_place_jobs": str(len(self.openings))}
        if "workdir" in self.openings[index].session.facts:
            # Its work directory is in the run directory there: that file system, not this machine's.
            fstype, mount, options = filesystem_of(self.far.said["rundir"], self.far.mounts)
            facts.update(workdir=f"{self.far.said['rundir']}/w", workdir_fs=fstype, workdir_mount=mount,
                         workdir_mount_options=options, workdir_backing="the run directory on the SSH machine")
        return RunIn(self._run, facts)

    def _path(self, word: str) -> str:
        if word in self.moved:
            return self.moved[word]
        for host, far in self.dirs.items():
            if word == host or word.startswith(host + "/"):
                return far + word[len(host):]
        return word

    def _run(self, spec: ProcessSpec, **kwargs) -> ProcessResult:
        if spec.cwd and self._path(spec.cwd) == spec.cwd:
            # A directory none of the sessions named before the place opened: made in the run directory.
            self.dirs[spec.cwd] = f"{self.far.said['rundir']}/w/{len(self.dirs)}"
            made = self.far.execute(ProcessSpec(["mkdir", "-p", self.dirs[spec.cwd]], item="mkdir", timeout=60,
                                                env=self.env))
            if not made.ok:
                raise SshDown(f"target down: cannot make a work directory on {self.far.machine.on}")
        spec = replace(spec, argv=[self._path(w) for w in spec.argv],
                       cwd=self._path(spec.cwd) if spec.cwd else None,
                       env=self.env if spec.env is None else spec.env)
        return self.far.execute(spec, **kwargs)


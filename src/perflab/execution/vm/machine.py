"""Boot a kernel in QEMU once and run benchmark processes inside it, one request at a time.

`boot(VmSpec(kernel=...))` is a context manager: it writes the initramfs
(execution/vm/initramfs.py), starts QEMU in its own process group with a parent-death
signal, waits for the guest agent's HELLO and yields a `Guest`, whose
`execute(ProcessSpec) -> ProcessResult` has the host executor's signature and meaning:
the agent starts perflab's launcher inside the guest with the same options, and the
launcher's result fields come back as they are. On the way out the guest is powered
off, and QEMU's process group is killed whatever happened.

Channels: the kernel console is the first UART, written by QEMU to a file (its tail is
what a fault shows); the agent speaks on the second UART, which QEMU connects to its
stdin/stdout pipes. Frames both ways: "@PL TYPE LENGTH FNV1A32\\n", LENGTH bytes, "\\n"
(execution/vm/channel.py, which bounds what the guest may send).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from perflab.core.errors import PerflabError
from perflab.core.process import ProcessResult, ProcessSpec, die_with_parent, kill_group
from perflab.core.steps import step
from perflab.execution import executor, interrupt, scratch
from perflab.execution.vm import counting, entry as entries, initramfs, kernel as kernels, remembering
from perflab.execution.vm.hello import boot_phase_facts, settle_facts  # noqa: F401 (boot_phase_facts re-exported)
from perflab.execution.vm.channel import Channel, VmError, _Dead, _Late, parse_readings
from perflab.execution.vm.qemu_args import qemu_args_refusal  # noqa: F401 (re-exported)

QEMU = "qemu-system-x86_64"
MODES = ("tcg", "icount", "kvm")
GUEST_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
DEFAULT_ENV = {"PATH": GUEST_PATH, "HOME": "/root", "TERM": "dumb", "LANG": "C"}
CONSOLE_TAIL_LINES = 25
SHUTDOWN_SECONDS = 10.0
# Host seconds allowed per guest second of a request's timeout: under TCG the guest's clock
# is the host's; under icount a guest second is 10^9 instructions, several host seconds.
SLOWDOWN = {"tcg": 1.0, "kvm": 1.0, "icount": 30.0}
REQUEST_MARGIN = 60.0
HELPER_ERR = "/run/perflab/helper.err"     # where the agent puts its helpers' stderr (agent.c)


@dataclass
class VmSpec:
    """The machine a job's processes run in."""

    kernel: Path | str
    mode: str = "tcg"                    # tcg | icount (TCG, 1 ns per instruction) | kvm
    cpus: int = 1
    memory_mib: int = 512
    qemu_args: Sequence[str] = ()        # appended to QEMU's command line as they are
    append: str = ""                     # appended to the kernel command line
    boot_timeout: float = 60.0           # seconds until the agent must have said HELLO
    share_root: bool = False             # the host's / read-only over virtio-9p (tag hostroot)
    drives: Sequence[str] = ()           # raw disk images, as virtio disks vda, vdb ...
    count_instructions: bool = False     # load perflab's instruction-counting plugin (vm/c/insns.c)

    def check(self) -> None:
        """One-line errors for a spec that cannot boot, before anything starts."""
        if self.mode not in MODES:
            raise PerflabError(f"vm mode {self.mode!r}: expected one of {', '.join(MODES)}")
        if self.cpus < 1 or self.memory_mib < 64:
            raise PerflabError(f"vm: cpus must be >= 1 and memory >= 64 MiB (got {self.cpus}, {self.memory_mib})")
        why = qemu_args_refusal(self.qemu_args)
        if why:
            raise PerflabError(f"vm.qemu_args: {why}")
        why = counting.refusal(self.mode, self.cpus) if self.count_instructions else None
        if why:
            raise PerflabError(why)
        path = Path(self.kernel)
        if not path.is_file():
            raise PerflabError(f"kernel {path}: no such file")


def qemu_binary() -> str:
    path = shutil.which(QEMU)
    if path is None:
        raise PerflabError(f"{QEMU} not found (Debian package qemu-system-x86)")
    return path


def asking_version(binary: str) -> subprocess.Popen | None:
    """`QEMU --version`, started (None when this binary's answer is remembered): boot() asks while
    the guest boots (20-60 ms it no longer waits)."""
    if remembering.output(binary, ("--version",)) is not None:
        return None
    return subprocess.Popen([binary, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            stdin=subprocess.DEVNULL)


def qemu_version(binary: str, asked: subprocess.Popen | None = None) -> str:
    out = remembering.output(binary, ("--version",))
    if out is None:
        out, _ = (asked or asking_version(binary)).communicate()
        remembering.keep_output(binary, ("--version",), out)
    first = out.strip().splitlines()
    match = re.search(r"version (\S+)", first[0]) if first else None
    return match.group(1) if match else (first[0] if first else "unknown")


# Perflab's kernel command line. `cryptomgr.notests` skips the crypto self-tests Debian's kernels
# run at boot (0.2-0.3 s of TCG; the algorithms are the same code either way). `no_timer_check`
# skips the IO-APIC timer's trial of 4 ticks, which the kernel skips itself in a KVM, Hyper-V or
# VMware guest (40 ms of instruction-time to /init; the timer is routed the same: docs/vm.md).
# Everything on it is recorded with the run (kernel_cmdline), since it is part of what was measured.
KERNEL_CMDLINE = "console=ttyS0 panic=-1 quiet rdinit=/init cryptomgr.notests no_timer_check"


def qemu_command(binary: str, spec: VmSpec, initrd: Path, console: Path, image: Path | str | None = None,
                 counts: Path | None = None) -> list[str]:
    """QEMU's command line; `image`: what -kernel is given (the PVH vmlinux of entry.entry_of),
    spec.kernel when None; `counts`: where the instruction-counting plugin writes."""
    accel = {
        "tcg": ["-accel", "tcg", "-cpu", "max"],
        # shift=0: one instruction is one nanosecond of guest time; sleep=off: an idle guest's
        # clock jumps to the next timer instead of waiting on the host's clock.
        "icount": ["-accel", "tcg", "-cpu", "max", "-icount", "shift=0,sleep=off"],
        "kvm": ["-accel", "kvm", "-cpu", "host"],
    }[spec.mode]
    cmdline = KERNEL_CMDLINE + (f" {spec.append}" if spec.append else "")
    return [
        binary, "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
        *accel, "-smp", str(spec.cpus), "-m", f"{spec.memory_mib}M", *ram_args(spec, binary),
        "-kernel", str(image or spec.kernel), "-initrd", str(initrd), "-append", cmdline,
        "-chardev", f"file,id=console,path={console}", "-serial", "chardev:console",
        "-chardev", "stdio,id=agent,signal=off", "-serial", "chardev:agent",
        *device_args(spec),
        *(["-plugin", f"file={counting.plugin()},out={counts},limit={counting.WINDOW_FILE_LIMIT}"]
          if spec.count_instructions and counts else []),
        *spec.qemu_args,
    ]


# Under icount the guest's RAM is a memfd, not QEMU's anonymous memory with transparent huge pages,
# whose first touches cost a host handing free memory back to its hypervisor 0.45-2.6 s of system
# time per will-it-scale guest, base pages 0.36-0.85 s (docs/vm.md, "The guest's RAM under icount");
# instruction-time is the same. Not under tcg and kvm: there the host's pages are under wall time.
RAM_BACKEND_ID = "perflab-ram"
RAM_FACT = "a memfd (shared memory: the host's base pages where its shmem_enabled is never)"


def ram_backing(spec: VmSpec, binary: str) -> str | None:
    """The fact vm_ram_backing under icount (None under tcg and kvm): a memfd, or QEMU's own memory
    on a QEMU before 5.0 (no -machine memory-backend=), its version asked once and remembered."""
    if spec.mode != "icount":
        return None
    version = qemu_version(binary) if os.path.isabs(binary) else ""   # not qemu_append's bare name
    numbers = re.match(r"(\d+)\.(\d+)", version)
    if numbers and (int(numbers.group(1)), int(numbers.group(2))) >= (5, 0):
        return RAM_FACT
    return f"QEMU's anonymous memory (QEMU {version or '?'} has no -machine memory-backend; 5.0 and later give a memfd)"


def ram_args(spec: VmSpec, binary: str) -> list[str]:
    """QEMU's arguments for the guest's RAM when it is not QEMU's own anonymous memory."""
    if ram_backing(spec, binary) != RAM_FACT:
        return []
    return ["-object", f"memory-backend-memfd,id={RAM_BACKEND_ID},size={spec.memory_mib}M",
            "-machine", f"memory-backend={RAM_BACKEND_ID}"]


def device_args(spec: VmSpec) -> list[str]:
    """QEMU's arguments for the host's root over 9p and the virtio disks."""
    out = []
    if spec.share_root:
        # readonly: nothing in the guest can write the host's files; multidevs=remap keeps inode
        # numbers of the host's several file systems distinct in the guest.
        out += ["-fsdev", "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap",
                "-device", "virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot"]
    for drive in spec.drives:
        # The image lives in /dev/shm (tmpfs), which has no O_DIRECT: cache=none cannot open it;
        # writeback through the host's page cache of a RAM file is RAM either way.
        out += ["-drive", f"file={drive},if=virtio,format=raw,cache=writeback"]
    return out


def _tail(path: Path, lines: int = CONSOLE_TAIL_LINES) -> str:
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - 16384))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    kept = [line.rstrip() for line in text.replace("\r", "").splitlines() if line.strip()]
    return "\n".join(kept[-lines:])


@dataclass
class Guest:
    """A booted guest: run processes with `execute`; `facts` describe it for the environment."""

    spec: VmSpec
    process: subprocess.Popen
    channel: Channel
    workdir: Path
    facts: dict[str, str] = field(default_factory=dict)
    _kallsyms: tuple[str, str] | None = field(default=None, repr=False)
    _counts_seq: int = field(default=0, repr=False)      # the last window the plugin ended (counting.Windows)
    helper_err: str = field(default=HELPER_ERR, repr=False)   # its helpers' stderr (an SSH agent's: its run directory)

    @property
    def console(self) -> Path:
        return self.workdir / "console.log"

    def console_tail(self, lines: int = CONSOLE_TAIL_LINES) -> str:
        return _tail(self.console, lines)

    def _failure(self, what: str) -> VmError:
        qemu_err = _tail(self.workdir / "qemu.err", 3)
        return VmError(what + (f" (QEMU: {_qemu_said(qemu_err)})" if qemu_err else ""), self.console_tail())

    def execute(self, spec: ProcessSpec, *, wrapper: Sequence[str] = (), hooks: executor.Hooks | None = None,
                grace: float = executor.DEFAULT_GRACE, root: str = "") -> ProcessResult:
        """Run one process in the guest to its end and measure it, as executor.execute does on the host.

        spec.env None gives the guest's default environment (the host's means nothing there).
        `root`: a directory of the guest to chroot into first (the host's root over 9p), or ""
        for the initramfs.
        Raises PerflabError when the program cannot be started, VmError when the guest fails.
        """
        display = spec.item or " ".join(spec.argv)
        args = [*executor.launcher_options(spec, grace, spec.cwd), "--", *wrapper, *spec.argv]
        env = [f"{k}={v}" for k, v in (DEFAULT_ENV if spec.env is None else spec.env).items()]
        hooks = hooks or executor.Hooks()
        readings = [r for r in hooks.inside if isinstance(r, executor.Readings)]
        counts_asked = [c for c in hooks.inside if isinstance(c, executor.InstructionCounts)]
        if counts_asked and not self.spec.count_instructions:
            raise PerflabError("this guest was booted without perflab's instruction-counting plugin")
        helpers = [h for h in hooks.inside if isinstance(h, executor.Helper)]
        paths = list(dict.fromkeys(p for r in readings for p in r.paths))
        interval = min((r.interval for r in readings), default=0.0)
        strings = [str(len(args)), *args, str(len(env)), *env, "1" if spec.capture_stdout else "0", root,
                   str(max(1, round(interval * 1000)) if paths else 0), str(len(paths)), *paths, str(len(helpers))]
        for h in helpers:
            strings += [h.root, str(len(h.argv)), *h.argv, h.ctl, h.ack, h.out, str(len(h.post)), *h.post]
        payload = b"".join(os.fsencode(s) + b"\0" for s in strings)
        deadline = None
        if spec.timeout:
            deadline = (spec.timeout + grace) * SLOWDOWN[self.spec.mode] + REQUEST_MARGIN
        stop_sent = False

        def watch_interrupt() -> None:
            # A SIGINT/SIGTERM noted by execution.interrupt: the agent stops the launcher,
            # which reports interrupted=1 as on the host.
            nonlocal stop_sent
            if not stop_sent and interrupt.requested() is not None:
                stop_sent = True
                self.channel.send("STOP")

        for start in hooks.start:
            start()
        try:
            self.channel.send("RUN", payload)
            kind, body = self.channel.receive(None if deadline is None else time.monotonic() + deadline,
                                              watch_interrupt)
        except _Dead:
            self.process.wait()
            raise self._failure(f"the guest died while running {display!r} "
                                f"(QEMU exited with {self.process.returncode})") from None
        except _Late:
            raise self._failure(f"the guest did not answer for {display!r} within {deadline:.0f} s") from None
        finally:
            for stop in hooks.stop:
                stop()
        if kind != "RESULT":
            raise self._failure(f"unexpected {kind} frame from the guest agent")
        head, _, rest = body.partition(b"\n")
        try:
            # A job runs as root in the guest and may write the agent's port itself: its frames are input.
            n_res, n_out, n_err, n_read = lengths = [int(w) for w in head.split()]
            if min(lengths) < 0:
                raise ValueError("a negative length")
            left_out: set[str] = set()
            taken = parse_readings(rest[n_res + n_out + n_err:n_res + n_out + n_err + n_read], left_out) \
                if readings or helpers else []
        except ValueError:
            raise self._failure(f"garbled RESULT frame from the guest agent for {display!r}") from None
        text = rest[:n_res].decode(errors="replace")
        out = rest[n_res:n_res + n_out][:executor.STDOUT_LIMIT_BYTES]
        err = rest[n_res + n_out:n_res + n_out + n_err][-executor.STDERR_TAIL_BYTES:]
        if readings or helpers:
            for r in readings:
                r.taken += [(t, mine) for t, texts in taken if (mine := {p: texts[p] for p in r.paths if p in texts})]
                r.left_out |= left_out & set(r.paths)
            for h in helpers:
                said = next((texts for _, texts in taken if h.out in texts), {})
                h.output, h.stderr = said.get(h.out, ""), said.get(self.helper_err, "")
                h.left_out = h.out in left_out
        if self.spec.count_instructions:
            # After every request, asked or not: the file is emptied for the next one.
            windows = counting.take_windows(self.workdir / counting.COUNTS_FILE, self._counts_seq)
            self._counts_seq = windows.seq
            if counts_asked and windows.last is None:
                raise self._failure("the instruction-counting plugin wrote no window for the process "
                                    "(did the guest's agent run its markers?)")
            symbols, source = self.kallsyms()
            for c in counts_asked:
                c.windows, c.symbols, c.symbols_from, c.note = windows.last, symbols, source, windows.note()
        if stop_sent and "exit=" not in text and "execerror=" not in text:
            return ProcessResult(0.0, 0.0, 0.0, 0, 0, 0, 128 + signal.SIGTERM, signal.SIGTERM, False, True, "", "")
        fields = executor.parse_result(text, display)   # the launcher's own words, read the host's way
        return ProcessResult(
            wall=float(fields["wall"]), user=float(fields["utime"]), sys=float(fields["stime"]),
            maxrss_kib=int(fields["maxrss"]), voluntary_switches=int(fields["nvcsw"]),
            involuntary_switches=int(fields["nivcsw"]), exit_status=int(fields["exit"]),
            signal=int(fields["signal"]), timed_out=fields["timedout"] == "1",
            interrupted=fields["interrupted"] == "1",
            stdout=out.decode(errors="replace") if spec.capture_stdout else "",
            stderr_tail=err.decode(errors="replace"),
        )

    def _ask(self, kind: str, payload: bytes, answer: str, what: str) -> bytes:
        """One request the agent answers itself, without starting a process."""
        try:
            self.channel.send(kind, payload)
            got, body = self.channel.receive(time.monotonic() + REQUEST_MARGIN * SLOWDOWN[self.spec.mode])
        except _Dead:
            self.process.wait()
            raise self._failure(f"the guest died while {what}") from None
        except _Late:
            raise self._failure(f"the guest did not answer while {what}") from None
        if got != answer:
            raise self._failure(f"unexpected {got} frame from the guest agent")
        return body

    def read(self, path: str) -> bytes:
        """A file of the guest (empty when it cannot be read), through the agent."""
        return self._ask("READ", os.fsencode(path), "FILE", f"reading {path}")

    def text_symbols(self) -> bytes:
        """The lines of the guest's /proc/kallsyms that name code (t, T, w, W: the agent's SYMS)."""
        return self._ask("SYMS", b"", "FILE", "reading its kernel's symbols")

    def make_directory(self, path: str, root: str = "") -> None:
        """`mkdir -p path` in the guest, seen from `root` as execute's processes see it; the agent
        does it itself (a process started for it cost 0.07-0.09 s under icount). PerflabError
        naming the reason when it cannot."""
        why = self._ask("MKDIR", os.fsencode(root) + b"\0" + os.fsencode(path) + b"\0", "MADE",
                        f"making {path}")
        if why:
            raise PerflabError(f"cannot make {path} in the guest: {why.decode(errors='replace')}")

    def state(self) -> str:
        """What a job could have changed for the next ones in a shared boot: the guest's mount
        table (/proc/self/mountinfo), a line "@@files", then the files of the initramfs's root
        (its own file system) modified since the first call, one a line (agent.c, guest_state)."""
        return self._ask("STATE", b"", "FILE", "reading its mounts and files").decode(errors="replace")

    def kallsyms(self) -> tuple[str, str]:
        """The guest kernel's symbols and where they came from, read at boot before any request
        (counting.symbols): never from a guest a job may have changed."""
        if self._kallsyms is None:
            raise PerflabError("the guest's kernel symbols are read at boot, for a guest that counts instructions")
        return self._kallsyms

    def shutdown(self) -> None:
        """End the guest: OFF, and once the agent said BYE (nothing of the guest is wanted any
        more: its results are in, its disks are thrown away), QEMU is killed rather than waited
        for through the guest kernel's power-off (30-60 ms under TCG). A guest that does not
        answer gets SHUTDOWN_SECONDS to power off by itself, then is killed too."""
        if self.process.poll() is None:
            said_bye = False
            with contextlib.suppress(_Dead, _Late, VmError):
                self.channel.send("OFF")
                said_bye = self.channel.receive(time.monotonic() + SHUTDOWN_SECONDS)[0] == "BYE"
            if not said_bye:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(SHUTDOWN_SECONDS)
        _kill(self.process)


_kill = kill_group      # QEMU's whole process group, whatever state it is in


WORKDIR_PREFIX = "perflab-vm-"


def _qemu_said(tail: str) -> str:
    """QEMU's last lines on stderr as one line: a message of its often spans two or three
    ("... can be simulated, ...: and exabytes, respectively."; issue 31, L1)."""
    return " ".join(line.strip() for line in tail.splitlines() if line.strip())


def _boot_failure(spec: VmSpec, process: subprocess.Popen, workdir: Path, timed_out: bool) -> VmError:
    console = _tail(workdir / "console.log")
    qemu_err = _tail(workdir / "qemu.err", 3)
    name = Path(spec.kernel).name
    if timed_out and spec.mode == "kvm":
        why = (f"mode kvm: the guest did not reach perflab's init in {spec.boot_timeout:g} s; KVM cannot boot "
               "guests on this machine (nested virtualisation?): use mode tcg or icount")
    elif timed_out:
        why = f"kernel {name} did not reach perflab's init in {spec.boot_timeout:g} s (mode {spec.mode}): hung?"
    else:
        panic = re.search(r"Kernel panic - not syncing: .*", console)
        if panic:
            why = f"kernel {name} panicked before perflab's init ran: {panic.group(0).strip()}"
        elif qemu_err and spec.mode == "kvm":
            why = (f"mode kvm: QEMU could not run the guest with KVM ({_qemu_said(qemu_err)}): "
                   "use mode tcg or icount")
        elif qemu_err:
            why = f"QEMU could not boot kernel {name} (mode {spec.mode}): {_qemu_said(qemu_err)}"
        else:
            why = f"kernel {name} stopped before perflab's init ran (QEMU exited with {process.returncode})"
    return VmError(why, console)


@dataclass
class _Started:
    """A QEMU started for a boot: its process, boot directory, start time and what it boots
    (`key`: its command line with the boot directory left out)."""

    process: subprocess.Popen
    workdir: Path
    started: float
    key: tuple[str, ...]


# Boots started ahead (start_ahead) that no boot() has taken yet.
_AHEAD: list[_Started] = []
_WORKDIR_MARK = "@workdir@"


def _boot_files(spec: VmSpec, files, setup, data) -> tuple[str, Path, entries.Entry]:
    spec.check()
    return qemu_binary(), initrd_of(files, setup, data), entries.entry_of(Path(spec.kernel))


def _command(binary: str, spec: VmSpec, initrd: Path, entry: entries.Entry, workdir: Path) -> list[str]:
    return qemu_command(binary, spec, initrd, workdir / "console.log", entry.image, workdir / counting.COUNTS_FILE)


def _launch(spec: VmSpec, binary: str, initrd: Path, entry: entries.Entry) -> _Started:
    """QEMU started on `spec` in a boot directory of its own, in its own process group (killed
    with its parent)."""
    return _launch_command(tuple(_command(binary, spec, initrd, entry, Path(_WORKDIR_MARK))))


def _launch_command(key: tuple[str, ...]) -> _Started:
    """QEMU started on the command line `key` (its boot directory marked _WORKDIR_MARK)."""
    scratch.remove_orphans(WORKDIR_PREFIX)   # boot directories of a killed perflab (issue 31, L2)
    workdir = Path(tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-"))
    try:
        with open(workdir / "qemu.err", "wb") as err:
            started = time.monotonic()
            process = subprocess.Popen([w.replace(_WORKDIR_MARK, str(workdir)) for w in key], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, stderr=err, start_new_session=True,
                                       preexec_fn=die_with_parent, bufsize=0)
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    return _Started(process, workdir, started, key)


def _ahead(started: _Started) -> None:
    import atexit

    atexit.unregister(drop_ahead)      # once, however many are started in one process
    atexit.register(drop_ahead)
    _AHEAD.append(started)


def start_ahead(spec: VmSpec, files: Mapping[str, Path | str] | None = None, setup: Sequence[str] = (),
                data: Mapping[str, bytes] | None = None, remember: str | None = None) -> None:
    """Start now the QEMU that `boot(spec, files, setup, data)` would start later, so that the
    guest boots while this process still imports and checks (a second core does it). boot()
    takes it when its command line is the same word for word (initramfs and kernel entry
    included); one no boot() takes is killed by `drop_ahead` (the command's end, and at exit;
    its parent-death signal besides). A spec that cannot boot raises as boot() would.
    `remember`: what decided this boot (start_remembered), kept with its command line."""
    binary, initrd, entry = _boot_files(spec, files, setup, data)
    started = _launch(spec, binary, initrd, entry)
    _ahead(started)
    if remember is not None:
        remembering.keep(remember, started.key)


def start_remembered(remember: str) -> bool:
    """Start the QEMU that start_ahead started last for the same `remember`, without making its
    initramfs or kernel entry again (vm/remembering.py): True when started. Only a guess: boot()
    takes it when its own command line is the same word for word, and kills it otherwise."""
    key = remembering.command(remember)
    # A file of the user's cache: a command line whose program is not the QEMU this command
    # would run is not started at all (boot()'s check would only kill it after it ran).
    if key is None or key[0] != shutil.which(QEMU):
        return False
    _ahead(_launch_command(key))
    return True


def drop_ahead() -> None:
    """Kill every boot started ahead that no boot() took, and remove its directory."""
    while _AHEAD:
        started = _AHEAD.pop()
        _kill(started.process)
        shutil.rmtree(started.workdir, ignore_errors=True)


def running_ahead() -> int:
    """How many QEMUs started ahead are waiting for a boot() to take them."""
    return sum(1 for s in _AHEAD if s.process.poll() is None)


def _taken_ahead(key: tuple[str, ...]) -> _Started | None:
    """The boot started ahead whose command line is `key`; every other is killed (it would only
    take the CPU from the boot that is wanted)."""
    taken = next((s for s in _AHEAD if s.key == key), None)
    if taken is not None:
        _AHEAD.remove(taken)
    drop_ahead()
    return taken


def initrd_of(files: Mapping[str, Path | str] | None, setup: Sequence[str] = (),
              data: Mapping[str, bytes] | None = None) -> Path:
    """The (cached) initramfs of a boot with these files, setup lines and data: built before
    guests that boot at once share it (targets.qemu_guests), or by boot() itself."""
    if setup:
        data = {**(data or {}), initramfs.SETUP: "".join(f"{line}\n" for line in setup).encode()}
    return initramfs.build(files, data=data)


@contextlib.contextmanager
def boot(spec: VmSpec, files: Mapping[str, Path | str] | None = None, setup: Sequence[str] = (),
         data: Mapping[str, bytes] | None = None) -> Iterator[Guest]:
    """Boot `spec.kernel` with an initramfs holding `files` (guest path -> host static program)
    and `data` (guest path -> content).

    `setup`: lines the agent carries out before HELLO (modules to load, file systems to
    mount: see agent.c); one that fails makes the boot fail with a VmError naming it. The
    same boot started ahead (start_ahead) is taken instead of starting QEMU again.
    """
    binary, initrd, entry = _boot_files(spec, files, setup, data)
    launched = _taken_ahead(tuple(_command(binary, spec, initrd, entry, Path(_WORKDIR_MARK))))
    process = version = None
    workdir = launched.workdir if launched else None
    try:
        launched = launched or _launch(spec, binary, initrd, entry)
        process, workdir, started = launched.process, launched.workdir, launched.started
        console = workdir / "console.log"
        channel = Channel(process.stdin.fileno(), process.stdout.fileno())
        version = asking_version(binary)
        try:
            with step(f"booting {Path(spec.kernel).name} ({spec.mode})"):
                kind, hello = channel.receive(started + spec.boot_timeout)
        except _Dead:
            process.wait()
            raise _boot_failure(spec, process, workdir, timed_out=False) from None
        except _Late:
            raise _boot_failure(spec, process, workdir, timed_out=True) from None
        if kind != "HELLO":
            raise VmError(f"the guest agent said {kind} instead of HELLO", _tail(console))
        guest_facts = dict(line.split("=", 1) for line in hello.decode(errors="replace").splitlines() if "=" in line)
        if guest_facts.get("launcher") != "1":
            raise VmError("perflab's launcher is missing from the guest's initramfs", _tail(console))
        if guest_facts.get("setup_error"):
            raise VmError(f"the guest of kernel {Path(spec.kernel).name} could not prepare its devices: "
                          f"{guest_facts['setup_error']}", _tail(console))
        facts = {
            "vm_mode": spec.mode, "vm_cpus": guest_facts.get("cpus", str(spec.cpus)),
            "vm_memory_mib": str(spec.memory_mib), "vm_cpu_model": guest_facts.get("cpu_model", ""),
            "qemu_version": qemu_version(binary, version),
            "guest_kernel_release": guest_facts.get("release", ""),
            "guest_kernel_version": guest_facts.get("version", ""),
            "guest_machine": guest_facts.get("machine", ""), "kernel_path": str(Path(spec.kernel).resolve()),
            "kernel_config_hash": kernels.config_hash(Path(spec.kernel)) or "",
            "host_kernel": os.uname().release,
            "vm_boot_seconds": f"{time.monotonic() - started:.2f}", "kernel_entry": entry.how,
        }
        if spec.mode == "icount":
            facts["time_base"] = "instruction-time (QEMU icount shift=0: 1 ns per guest instruction)"
            facts["vm_ram_backing"] = ram_backing(spec, binary)
        if guest_facts.get("settle"):
            facts.update(settle_facts(guest_facts))
        facts.update(boot_phase_facts(guest_facts))
        guest = Guest(spec, process, channel, workdir, facts)
        try:
            if spec.count_instructions:
                guest._kallsyms = counting.symbols(guest)      # before any job could change the guest
            yield guest
        finally:
            guest.shutdown()
    finally:
        if process is not None:
            _kill(process)
        if version is not None and version.returncode is None:
            version.kill()
            version.communicate()
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)

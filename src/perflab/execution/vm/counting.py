"""perflab's instruction-counting QEMU plugin (vm/c/insns.c): where it can count, building it,
and reading back the windows it wrote (docs/vm.md, "Where, inside the guest")."""

from __future__ import annotations

import contextlib
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from perflab.core import cbuild, paths
from perflab.core.errors import PerflabError
from perflab.execution.vm import initramfs, kernel as kernels

COUNTS_FILE = "insns.txt"        # the plugin's windows, in the boot's directory


def refusal(mode: str, cpus: int) -> str | None:
    """Why the instruction-counting plugin cannot count exactly in this machine, or None."""
    if mode == "kvm":
        return "counting a guest's instructions needs QEMU's TCG (vm mode icount or tcg): KVM runs the guest's code natively"
    if mode == "tcg" and cpus > 1:
        # Multi-threaded TCG: vCPUs add to the same counters at once (QEMU's inline ops are not atomic).
        return (f"counting a guest's instructions with {cpus} vCPUs needs vm mode icount (one thread runs "
                "them in turn); under tcg they run at once and the counts would race")
    return None


def plugin() -> Path:
    """perflab's instruction-counting QEMU plugin (vm/c/insns.c), a shared object built by cbuild."""
    try:
        return cbuild.build("insns", initramfs.AGENT_DIR, cc="cc", flags=cbuild.SHARED_FLAGS)
    except cbuild.BuildError as e:
        raise PerflabError(f"cannot build perflab's instruction-counting QEMU plugin: {e.detail}") from None


# The most the plugin keeps in its file unread: a window that would be written to a fuller file
# empties it first ("capped SEQ"), so a guest that floods the markers holds the host's TMPDIR
# to this plus one window (issue 45, G8). One process's window is written whole whatever its
# size; the host reads and empties the file after every request, so only a process that marks
# windows of its own (a marker flood) ever reaches it.
WINDOW_FILE_LIMIT = 4 << 20
LINE_LIMIT = 256      # the plugin's lines are "VADDR INSNS", "window SEQ CH N": far shorter


@dataclass
class Windows:
    """What the plugin wrote during one request: the last window (channel -> {block address:
    instructions}; None when it wrote none), how many windows it ended (one per request unless
    a guest program runs the markers itself), whether it emptied its full file, and the sequence
    number of the last window (where the next request's count starts)."""

    last: dict[int, dict[int, int]] | None
    reported: int
    capped: bool
    seq: int

    def note(self) -> str:
        """One line on a request whose process marked windows of its own, else ""."""
        if self.reported <= 1 and not self.capped:
            return ""
        kept = (f"; the windows past {WINDOW_FILE_LIMIT >> 20} MiB were dropped unread (capped)"
                if self.capped else "")
        return (f"the guest reported {self.reported:,} instruction-counting windows for one process (a program "
                f"ran perflab's markers itself): counted the last only, not the whole process{kept}")


def parse_counts(text: str) -> dict[int, dict[int, int]]:
    """The plugin's windows (vm/c/insns.c) -> channel -> {block address: instructions}, summed."""
    out: dict[int, dict[int, int]] = {}
    state: dict = {}
    for line in text.splitlines():
        _line(line.encode(), out, state)
    return out


def _line(raw: bytes, window: dict[int, dict[int, int]], state: dict) -> str:
    """Add one line of the plugin's to `window` (state: the channel being read, the last sequence
    number read); what the line was: "window", "end", "capped" or ""."""
    words = raw.split()
    try:
        if len(words) == 4 and words[0] == b"window":
            state["channel"] = window.setdefault(int(words[2]), {})
            return "window"
        if len(words) == 2 and words[0] in (b"end", b"capped"):
            state["seq"], state["channel"] = int(words[1]), None
            return words[0].decode()
        counts = state.get("channel")
        if counts is not None and len(words) == 2:
            address = int(words[0], 16)
            counts[address] = counts.get(address, 0) + int(words[1])
    except ValueError:
        state["channel"] = None   # a line cut where the host emptied the file under a late writer
    return ""


def take_windows(path: Path, seq: int) -> Windows:
    """The windows the plugin wrote since the last request (which ended window `seq`), read
    line by line (memory: one window), and the file emptied for the next request. The plugin
    writes a window whole, within the marker, before the agent can answer."""
    last, capped, first = None, False, seq
    window: dict[int, dict[int, int]] = {}
    state: dict = {}
    with contextlib.suppress(FileNotFoundError), open(path, "r+b") as f:
        while raw := f.readline(LINE_LIMIT):
            kind = _line(raw, window, state)
            if kind == "end":
                last, window, seq = window, {}, state["seq"]
            elif kind == "capped":
                capped, window = True, {}
        os.ftruncate(f.fileno(), 0)
    return Windows(last, seq - first, capped, seq)


KEPT_SYMBOL_FILES = 16


def symbols(guest) -> tuple[str, str]:
    """A booted guest's kernel symbols and where they came from: its /proc/kallsyms; for a kernel
    built without CONFIG_KALLSYMS, the System.map of its build, when it booted at its link address.

    Called once per boot, right after the agent's HELLO and before any request runs (boot()):
    a job runs as root in the guest and can mount anything over /proc/kallsyms or
    /proc/modules, so nothing read from the guest after a job could have run names a count
    or goes into the cache (issue 45, G4).

    Only its text symbols (the agent's SYMS): the rest never names a count, and through the
    agent's UART each byte costs ~1 us of QEMU's CPU (Debian 6.1's whole file, 3.9 MB, took
    4.1 s under icount; its text symbols are 2.0 MB). Still slow, so a guest entered through
    the PVH note (no KASLR: the same addresses on every boot) keeps a copy on the host, keyed
    by the kernel's content and the guest's /proc/modules at boot (which names each module's
    address: the same modules at the same places).
    """
    pvh = guest.facts.get("kernel_entry", "").startswith("PVH")
    cached = None
    if pvh:
        modules = guest.read("/proc/modules")
        # "at boot": copies kept before the read moved to boot time (taken after a job, which may
        # have forged them) have other keys and are never read again.
        key = hashlib.sha256(b"kallsyms at boot\0" + Path(guest.spec.kernel).read_bytes() + b"\0" + modules)
        cached = paths.cache_home() / "kallsyms" / f"kallsyms-{key.hexdigest()[:24]}"
        with contextlib.suppress(OSError):
            return cached.read_text(), ("the guest's /proc/kallsyms at boot (kept from an earlier boot of the "
                                        "same kernel and modules)")
    text = guest.text_symbols().decode(errors="replace")
    if any(line[:16].strip("0") for line in text.splitlines()[:64]):
        if cached is not None:
            _keep(cached, text)
        return text, "the guest's /proc/kallsyms at boot"
    found = kernels.system_map(Path(guest.spec.kernel))
    if found is not None and pvh:
        return found.read_text(errors="replace"), str(found)
    return text, ("nothing: the guest kernel has no /proc/kallsyms (CONFIG_KALLSYMS) and no System.map "
                  "lies beside its image")


def _keep(path: Path, text: str) -> None:
    """Write the copy whole (a temporary file renamed) and keep the newest few."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        paths.write_whole(path, text)
        kept = sorted(path.parent.glob("kallsyms-*"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in kept[KEPT_SYMBOL_FILES:]:
            old.unlink(missing_ok=True)

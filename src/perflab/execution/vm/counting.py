"""perflab's instruction-counting QEMU plugin (vm/c/insns.c): where it can count, building it,
and reading back the windows it wrote (docs/vm.md, "Where, inside the guest")."""

from __future__ import annotations

import contextlib
import hashlib
import os
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


def parse_counts(text: str) -> dict[int, dict[int, int]]:
    """The plugin's windows (vm/c/insns.c) -> channel -> {block address: instructions}, summed."""
    out: dict[int, dict[int, int]] = {}
    counts: dict[int, int] | None = None
    for line in text.splitlines():
        words = line.split()
        if not words:
            continue
        if words[0] == "window":
            counts = out.setdefault(int(words[2]), {})
        elif words[0] == "end":
            counts = None
        elif counts is not None and len(words) == 2:
            address = int(words[0], 16)
            counts[address] = counts.get(address, 0) + int(words[1])
    return out


def last_window(path: Path, offset: int) -> tuple[dict[int, dict[int, int]] | None, int]:
    """The window of the process just run: the last one the plugin wrote after `offset` (every
    request runs the markers, the guest's own mkdir and cp too); and the offset read to. The
    plugin writes a window whole, within the marker, before the agent can answer."""
    with contextlib.suppress(FileNotFoundError), open(path, "rb") as f:
        f.seek(offset)
        data = f.read()
        offset += len(data)
        lines = data.decode(errors="replace").splitlines()
        ends = [i for i, line in enumerate(lines) if line.startswith("end ")]
        if ends:
            return parse_counts("\n".join(lines[ends[-2] + 1 if len(ends) > 1 else 0:ends[-1]])), offset
    return None, offset


KEPT_SYMBOL_FILES = 16


def symbols(guest) -> tuple[str, str]:
    """A booted guest's kernel symbols and where they came from: its /proc/kallsyms; for a kernel
    built without CONFIG_KALLSYMS, the System.map of its build, when it booted at its link address.

    Read through the agent's UART, kallsyms is slow (3.9 MB of Debian 6.1's took 5.8 s under
    icount), so a guest entered through the PVH note (no KASLR: the same addresses on every
    boot) keeps a copy on the host, keyed by the kernel's content and the guest's
    /proc/modules (which names each module's address: the same modules at the same places).
    """
    pvh = guest.facts.get("kernel_entry", "").startswith("PVH")
    cached = None
    if pvh:
        modules = guest.read("/proc/modules")
        key = hashlib.sha256(Path(guest.spec.kernel).read_bytes() + b"\0" + modules).hexdigest()[:24]
        cached = paths.cache_home() / "kallsyms" / f"kallsyms-{key}"
        with contextlib.suppress(OSError):
            return cached.read_text(), "the guest's /proc/kallsyms (kept from an earlier boot of the same kernel and modules)"
    text = guest.read("/proc/kallsyms").decode(errors="replace")
    if any(line[:16].strip("0") for line in text.splitlines()[:64]):
        if cached is not None:
            _keep(cached, text)
        return text, "the guest's /proc/kallsyms"
    found = kernels.system_map(Path(guest.spec.kernel))
    if found is not None and pvh:
        return found.read_text(errors="replace"), str(found)
    return text, ("nothing: the guest kernel has no /proc/kallsyms (CONFIG_KALLSYMS) and no System.map "
                  "lies beside its image")


def _keep(path: Path, text: str) -> None:
    """Write the copy whole (a temporary file renamed) and keep the newest few."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(text)
        os.replace(tmp, path)
        kept = sorted(path.parent.glob("kallsyms-*"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in kept[KEPT_SYMBOL_FILES:]:
            old.unlink(missing_ok=True)

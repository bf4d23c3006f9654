"""perflab's instruction-counting QEMU plugin (vm/c/insns.c): where it can count, building it,
and reading back the windows it wrote (docs/vm.md, "Where, inside the guest")."""

from __future__ import annotations

import contextlib
from pathlib import Path

from perflab.core import cbuild
from perflab.core.errors import PerflabError
from perflab.execution.vm import initramfs

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

"""The agent's protocol, the host's end: frames both ways over the guest's second UART.

Every message is one frame: "@PL TYPE LENGTH FNV1A32\\n", LENGTH bytes, "\\n" (agent.c has
the guest's end). What the guest sends is input, not trusted: a job runs as root there and
can write the agent's port itself, so a frame's header and length are bounded here before
anything is kept (issue 45, G9; docs/vm.md, "Protocol").
"""

from __future__ import annotations

import os
import re
import select
import time
from collections.abc import Callable

from perflab.core.errors import TargetDown


class VmError(TargetDown):
    """The guest could not be booted or stopped answering; `console_tail` holds the kernel's last words."""


def fnv1a(data: bytes) -> int:
    h = 2166136261
    for b in data:
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


def frame(kind: str, payload: bytes) -> bytes:
    return b"@PL %s %d %08x\n" % (kind.encode(), len(payload), fnv1a(payload)) + payload + b"\n"


class _Dead(Exception):
    """QEMU closed the agent's channel (it exited)."""


class _Late(Exception):
    """No frame before the deadline."""


# The longest frame taken from the guest, refused from its header on (issue 45, G9). The agent's
# largest, a RESULT, holds at most 64 KiB + 64 MiB of stdout + 128 MiB of readings (agent.c).
FRAME_LIMIT = 256 << 20
HEADER_LIMIT = 96     # "@PL TYPE LENGTH FNV1A32\n": a header not ended by then is garbled
# A frame this much short of whole that trickles in (the last read took under TRICKLE bytes)
# is read in pieces: QEMU's UART hands the pipe a byte per write, ~1 MB/s, so a reader woken
# for each piece took 7 bytes a read (Debian 6.1's kallsyms, 3.9 MB: 571,272 reads, 2.9 s of
# the host's CPU); waiting BULK_WAIT first: 14,863 reads, 0.3 s. A faster stream (an SSH
# machine's agent) fills more than TRICKLE a read and is read as it comes.
BULK, BULK_WAIT, TRICKLE = 64 << 10, 0.002, 4096


class Channel:
    """The host's end of the agent's UART: frames out to QEMU's stdin, in from its stdout."""

    def __init__(self, write_fd: int, read_fd: int):
        self.write_fd, self.read_fd = write_fd, read_fd
        self.buffer = bytearray()
        self.need = 0       # the bytes the buffer's frame needs, once its header was read
        self.last_read = 0

    def send(self, kind: str, payload: bytes = b"") -> None:
        data = frame(kind, payload)
        try:
            while data:
                data = data[os.write(self.write_fd, data):]
        except (BrokenPipeError, OSError):
            raise _Dead() from None

    def _whole_frame(self) -> tuple[str, bytes] | None:
        """The frame at the start of the buffer when it is all there; None while it is not.
        What the guest sent that cannot be a frame raises VmError at once, nothing buffered."""
        if len(self.buffer) < self.need:
            return None          # its header was read: the frame is not all there yet
        start = self.buffer.find(b"@PL ")
        if start < 0:
            del self.buffer[:-3]         # nothing but frames is written here; keep a cut-off "@PL"
            return None
        del self.buffer[:start]
        end = self.buffer.find(b"\n", 0, HEADER_LIMIT)
        if end < 0:
            if len(self.buffer) >= HEADER_LIMIT:
                raise VmError(f"garbled frame header from the guest agent: {bytes(self.buffer[:48])!r}...")
            return None
        words = bytes(self.buffer[:end]).split()
        if len(words) != 4 or not words[2].isdigit() or not re.fullmatch(rb"[0-9a-fA-F]{1,8}", words[3]):
            raise VmError(f"garbled frame header from the guest agent: {bytes(self.buffer[:end])[:80]!r}")
        length = int(words[2])
        if length > FRAME_LIMIT:
            raise VmError(f"guest sent a frame of {length} bytes, over the {FRAME_LIMIT} limit")
        if len(self.buffer) < end + 1 + length + 1:
            self.need = end + 1 + length + 1
            return None
        self.need = 0
        payload = bytes(self.buffer[end + 1:end + 1 + length])
        del self.buffer[:end + 2 + length]
        if fnv1a(payload) != int(words[3], 16):
            raise VmError(f"frame {words[1].decode(errors='replace')} from the guest agent failed its checksum")
        return words[1].decode(errors="replace"), payload

    def receive(self, deadline: float | None, poll: Callable[[], None] | None = None) -> tuple[str, bytes]:
        """The next whole frame; _Late at the deadline, _Dead when QEMU is gone. `poll` runs every 0.2 s.

        Past the deadline, what is ready is read once more (a frame that came while the host was
        slow is taken), and a frame whose header came is read to its end (FRAME_LIMIT bounds it);
        anything else is late, also a stream that never stops (a job writing the agent's port)."""
        read_late = False
        while True:
            whole = self._whole_frame()
            if whole is not None:
                return whole
            if read_late and not self.need:
                raise _Late()
            wait = 0.2 if deadline is None else max(0.0, min(0.2, deadline - time.monotonic()))
            ready, _, _ = select.select([self.read_fd], [], [], wait)
            if ready:
                read_late = deadline is not None and time.monotonic() >= deadline
                if self.need - len(self.buffer) > BULK and self.last_read < TRICKLE:
                    time.sleep(BULK_WAIT)
                chunk = os.read(self.read_fd, 1 << 20)
                if not chunk:
                    raise _Dead()
                self.last_read = len(chunk)
                self.buffer += chunk
            elif deadline is not None and time.monotonic() >= deadline:
                raise _Late()
            elif poll:
                poll()


def parse_readings(data: bytes, left_out: set[str] | None = None) -> list[tuple[float, dict[str, str]]]:
    """The agent's readings of a RUN -> [(guest seconds, {path: text})], one entry per instant.
    A reading the agent left out for its limit on a RUN's readings (agent.c READINGS_LIMIT; its
    text length -1) is no entry: its path goes into `left_out`."""
    out: list[tuple[float, dict[str, str]]] = []
    at = 0
    while at < len(data):
        end = data.index(b"\n", at)
        t_ns, n_path, n_text = map(int, data[at:end].split())
        if n_path < 0 or n_text < -1:
            raise ValueError(f"a reading of negative length at byte {at}")
        path = data[end + 1:end + 1 + n_path].decode(errors="replace")
        if n_text == -1:
            at = end + 1 + n_path
            if left_out is not None:
                left_out.add(path)
            continue
        text = data[end + 1 + n_path:end + 1 + n_path + n_text].decode(errors="replace")
        at = end + 1 + n_path + n_text
        t = t_ns / 1e9
        if not out or out[-1][0] != t:
            out.append((t, {}))
        out[-1][1][path] = text
    return out

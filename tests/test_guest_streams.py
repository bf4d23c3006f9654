"""What a hostile guest sends the host is bounded (issue 45, G9): the frame reader of the agent's
port, fed through a real pipe by a writer that floods it, refuses what cannot be a frame
without keeping it."""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
import termios
import threading
import time

import pytest

from perflab.execution.vm.channel import BULK, BULK_WAIT, FRAME_LIMIT, Channel, VmError, _Dead, _Late, frame


def _flooded(head: bytes, flood: int, tail: bytes = b""):
    """A channel whose port delivers `head`, then `flood` bytes of 'x', then `tail`, then EOF."""
    read_fd, write_fd = os.pipe()

    def write():
        with open(write_fd, "wb", buffering=0) as w:
            try:
                w.write(head)
                chunk = b"x" * (1 << 20)
                for _ in range(flood // len(chunk)):
                    w.write(chunk)
                w.write(tail)
            except BrokenPipeError:
                pass        # the reader gave up, as it should

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    return Channel(os.open(os.devnull, os.O_WRONLY), read_fd), writer, read_fd


def test_a_frame_header_with_a_huge_length_fails_at_once_without_buffering():
    channel, writer, read_fd = _flooded(b"@PL RESULT 900000000000 0badf00d\n", 64 << 20)
    try:
        with pytest.raises(VmError) as caught:
            channel.receive(time.monotonic() + 600)
    finally:
        os.close(read_fd)
        writer.join()
    assert str(caught.value) == f"guest sent a frame of 900000000000 bytes, over the {FRAME_LIMIT} limit"
    assert len(channel.buffer) < 2 << 20        # at most the chunk that held the header


def test_a_header_that_never_ends_or_junk_without_frames_is_not_kept():
    channel, writer, read_fd = _flooded(b"@PL RESULT 12", 32 << 20)
    try:
        with pytest.raises(VmError, match="garbled frame header"):
            channel.receive(time.monotonic() + 600)
    finally:
        os.close(read_fd)
        writer.join()
    # Junk and no frame at all: read to the end (QEMU gone), holding a few bytes at most.
    channel, writer, read_fd = _flooded(b"junk", 32 << 20)
    with pytest.raises(_Dead):
        channel.receive(time.monotonic() + 600)
    writer.join()
    os.close(read_fd)
    assert len(channel.buffer) <= 3


def test_frames_still_come_through_whole_after_junk_and_in_pieces():
    payload = os.urandom(300_000)
    channel, writer, read_fd = _flooded(b"noise@P" + frame("FILE", payload)[:100], 0,
                                        frame("FILE", payload)[100:] + frame("BYE", b""))
    try:
        assert channel.receive(time.monotonic() + 600) == ("FILE", payload)
        assert channel.receive(time.monotonic() + 600) == ("BYE", b"")
    finally:
        writer.join()
        os.close(read_fd)


def test_a_long_frame_trickling_in_is_read_in_pieces_not_as_it_comes(monkeypatch):
    """QEMU's UART hands the agent's pipe a byte per write: a reader that read whatever was there
    took Debian 6.1's kallsyms (3.9 MB) in 571,272 reads, 2.9 s of the host's CPU. While a frame
    is more than BULK short of whole and trickles in (the last read took under TRICKLE bytes),
    each read now comes BULK_WAIT after the last (14,863 reads)."""
    payload = os.urandom(4 * BULK)
    data = frame("FILE", payload) + frame("BYE", b"")
    read_fd, write_fd = os.pipe()

    def write():      # a trickle: 512 bytes at a time, each once the pipe is empty (so every read is small)
        with open(write_fd, "wb", buffering=0) as w, contextlib.suppress(OSError):
            for at in range(0, len(data), 512):
                w.write(data[at:at + 512])
                while struct.unpack("i", fcntl.ioctl(read_fd, termios.FIONREAD, b"\0" * 4))[0]:
                    time.sleep(0.00005)

    channel = Channel(os.open(os.devnull, os.O_WRONLY), read_fd)
    reads, real, first = [], os.read, len(frame("FILE", payload))

    def read(fd, n):      # (when, how far the first frame was from whole, bytes read)
        at, short = time.monotonic(), first - sum(got for _, _, got in reads)
        chunk = real(fd, n)
        reads.append((at, short, len(chunk)))
        return chunk

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    monkeypatch.setattr(os, "read", read)
    try:
        assert channel.receive(time.monotonic() + 600) == ("FILE", payload)
        assert channel.receive(time.monotonic() + 600) == ("BYE", b"")
    finally:
        monkeypatch.undo()
        os.close(read_fd)
        writer.join()
    assert max(n for _, _, n in reads) <= 512
    far = [i for i in range(1, len(reads)) if reads[i][1] > BULK]
    assert len(far) > 100 and all(reads[i][0] - reads[i - 1][0] >= BULK_WAIT for i in far), reads[:20]


def test_junk_without_end_cannot_hold_a_request_past_its_deadline():
    """A job runs as root in the guest and can write the agent's port without end (a daemon it
    left). The deadline was looked at only when nothing was ready to read, so a stream of what
    cannot be a frame kept the host waiting for ever: no timeout, no STOP. /dev/zero is such a
    stream. A frame whose header came keeps being read (it ends within FRAME_LIMIT)."""
    zero = os.open("/dev/zero", os.O_RDONLY)
    channel = Channel(os.open(os.devnull, os.O_WRONLY), zero)
    said = []

    def receive():
        try:
            channel.receive(time.monotonic() + 0.2)
        except _Late:
            said.append("late")
        except OSError:
            said.append("still reading when the test gave up")

    reader = threading.Thread(target=receive, daemon=True)
    reader.start()
    try:
        reader.join(120)       # it ends in a fraction of a second; only a hang waits this long
    finally:
        os.close(zero)         # a reader still going fails its next read and ends
        reader.join()
    assert said == ["late"]


def test_a_frame_already_waiting_at_the_deadline_is_still_taken():
    """A host slower than the deadline (load) must not turn a frame that did come into a timeout:
    what is ready to read at the deadline is read once before the channel says late."""
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"junk" + frame("RESULT", b"done"))
    channel = Channel(os.open(os.devnull, os.O_WRONLY), read_fd)
    try:
        assert channel.receive(time.monotonic() - 1) == ("RESULT", b"done")
        with pytest.raises(_Late):
            channel.receive(time.monotonic() - 1)
    finally:
        os.close(read_fd)
        os.close(write_fd)


def test_readings_with_a_negative_length_are_garbled_not_a_loop():
    """A RESULT's readings come from the guest too: a negative length used to send the reader
    back to the same line for ever; now it is a ValueError, which execute() turns into a
    one-line VmError ("garbled RESULT frame from the guest agent")."""
    from perflab.execution.vm.machine import parse_readings

    with pytest.raises(ValueError, match="negative length"):
        parse_readings(b"1 -5 3\nabc")
    with pytest.raises(ValueError):
        parse_readings(b"1 2\nab")
    assert parse_readings(b"1000000000 2 3\nabxyz") == [(1.0, {"ab": "xyz"})]

"""H1 (issue 23): every `-o` writes through to what the user named (core/output.py).

A symlink is followed (the link stays a link), a FIFO or a character device is opened
and written (it stays what it was), a regular file is replaced whole, keeping its mode;
a block device or socket is refused in one line.
"""

from __future__ import annotations

import json
import os
import select
import socket
import stat
import threading
import uuid

import pytest

from conftest import CLI, PERFLAB, assert_one_line_error


def _doc() -> dict:
    runs = []
    for i, tag in enumerate(("base", "head")):
        runs.append({"uuid": str(uuid.uuid4()), "testbox": "box1", "benchmark": "bench", "name": "bench",
                     "params": {}, "tag": tag, "commit": f"{i + 1:02x}" * 20, "dirty": False,
                     "started": f"2026-11-0{i + 1}T10:00:00", "finished": f"2026-11-0{i + 1}T10:00:01",
                     "status": "finished", "comment": None, "error": None,
                     "environment": {"testbox": "box1", "kernel_release": "6.8.0"}, "failures": [],
                     "samples": [["bench.time_us", 10.0 + i + 0.01 * k, "us", -1, k] for k in range(4)]})
    return {"format": "perflab-export", "version": 1, "runs": runs}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    assert PERFLAB
    tmp = tmp_path_factory.mktemp("hostile-out")
    cli = CLI(tmp / "perflab.db", tmp, tmp / "cache")
    (tmp / "doc.json").write_text(json.dumps(_doc()))
    cli("import", tmp / "doc.json")
    return cli


# (argv before the path, file extension, a byte string the written content starts with)
COMMANDS = {
    "report-html": (["report", "html", "base", "head", "-o"], ".html", b"<!DOCTYPE html"),
    "export": (["export", "-o"], ".json", b"{"),
    "log-plot": (["log", "bench", "--plot"], ".svg", b"<?xml"),
    "compare-plot": (["compare", "base", "head", "--plot"], ".png", b"\x89PNG"),
}
# One command per way of writing (core/output.py): output.write (export; report html the same way)
# and output.staged (the plots). The symlink test, which tells write-through from a rename over the
# path, runs every command; the other kinds of file each way of writing once.
BY_WAY = ["export", "log-plot"]


class FifoReader(threading.Thread):
    """Drains a FIFO without ever blocking the test: opened non-blocking before the writer comes."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self.data = bytearray()

    def run(self):
        import time
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if not ready:
                continue
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                continue
            if chunk:
                self.data += chunk
            elif self.data:
                break            # the writer closed after writing
            else:
                time.sleep(0.05)  # no writer yet: a FIFO reads as empty until one opens it
        os.close(self.fd)


@pytest.mark.parametrize("name", COMMANDS)
def test_a_symlink_is_written_through(store, tmp_path, name):
    argv, ext, head = COMMANDS[name]
    real = tmp_path / f"real{ext}"
    real.write_bytes(b"old")
    link = tmp_path / f"link{ext}"
    link.symlink_to(real)
    store(*argv, link)
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_bytes().startswith(head)


@pytest.mark.parametrize("name", BY_WAY)
def test_a_fifo_is_written_and_stays_a_fifo(store, tmp_path, name):
    argv, ext, head = COMMANDS[name]
    fifo = tmp_path / f"pipe{ext}"
    os.mkfifo(fifo)
    reader = FifoReader(fifo)
    reader.start()
    store(*argv, fifo)
    reader.join(60)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert bytes(reader.data).startswith(head)


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod of a character device needs root")
@pytest.mark.parametrize("name", BY_WAY)
def test_a_character_device_is_written_and_stays_a_device(store, tmp_path, name):
    argv, ext, _ = COMMANDS[name]
    dev = tmp_path / f"null{ext}"
    os.mknod(dev, stat.S_IFCHR | 0o666, os.makedev(1, 3))    # a private /dev/null
    store(*argv, dev)
    assert stat.S_ISCHR(os.lstat(dev).st_mode)
    full = tmp_path / f"full{ext}"
    os.mknod(full, stat.S_IFCHR | 0o666, os.makedev(1, 7))   # a private /dev/full: writes fail
    assert_one_line_error(store(*argv, full, check=False), str(full), "No space left on device")
    assert stat.S_ISCHR(os.lstat(full).st_mode)


@pytest.mark.parametrize("name", BY_WAY)
def test_a_regular_file_is_replaced_whole_and_keeps_its_mode(store, tmp_path, name):
    argv, ext, head = COMMANDS[name]
    out = tmp_path / f"out{ext}"
    out.write_bytes(b"old")
    os.chmod(out, 0o600)
    store(*argv, out)
    assert out.read_bytes().startswith(head)
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == [out.name]    # no temporary file left beside it


def test_a_socket_is_refused_in_one_line(store, tmp_path):
    path = tmp_path / "s.json"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    try:
        assert_one_line_error(store("export", "-o", path, check=False), str(path), "socket")
        assert stat.S_ISSOCK(os.lstat(path).st_mode)
    finally:
        sock.close()


def test_jobs_split_writes_through_a_symlink_in_its_directory(store, tmp_path):
    out = tmp_path / "atomic"
    out.mkdir()
    first = store("jobs", "split", "hackbench.yaml", "-o", out).stdout.split()[0]
    name = os.path.basename(first)
    real = tmp_path / "kept.yaml"
    real.write_text("old")
    os.unlink(first)
    os.symlink(real, first)
    store("jobs", "split", "hackbench.yaml", "-o", out)
    assert os.path.islink(first) and "hackbench" in real.read_text(), name

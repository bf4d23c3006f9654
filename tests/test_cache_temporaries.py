"""A perflab killed (kill -9) between writing a cache file's temporary and renaming it into place
leaves that temporary behind; the next writer of the cache removes it, and spares the temporary
a live perflab is writing meanwhile (core/paths.py: the temporary's name carries its writer)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import CLI, PERFLAB
from services import until

# A C compiler that, asked for an output (-o), writes part of it, says so, and goes on only once
# the test lets it: a perflab compiling through it sits between its write and its rename.
STALLING_CC = """#!/bin/sh
out=""; prev=""
for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done
if [ -n "$out" ]; then
    printf 'half an ELF' > "$out"
    echo "$out" >> "{gates}/started"
    while [ ! -e "{gates}/go" ]; do sleep 0.05; done
fi
exec {cc} "$@"
"""


def _temporaries(cache: Path) -> list[Path]:
    return sorted(p for p in cache.rglob("*") if p.name.endswith(".tmp"))


def _started(gates: Path) -> list[str]:
    return (gates / "started").read_text().split() if (gates / "started").exists() else []


def test_a_killed_compile_s_temporary_is_swept_by_the_next_command_and_a_live_one_spared(tmp_path):
    cli = CLI(tmp_path / "perflab.db", tmp_path)          # a cache of this test's own
    cache = Path(cli.env["XDG_CACHE_HOME"]) / "perflab"
    gates = tmp_path / "gates"
    gates.mkdir()
    # Named cc, first on PATH: perflab builds its launcher with the machine's `cc`.
    (tmp_path / "bin").mkdir()
    stalling = tmp_path / "bin" / "cc"
    stalling.write_text(STALLING_CC.format(gates=gates, cc=shutil.which("cc")))
    stalling.chmod(0o755)

    def stalled_run(name: str) -> subprocess.Popen:
        # Its own session: the kill -9 takes perflab and the compiler it waits on together.
        return subprocess.Popen([PERFLAB, "run", "cmd", "--runs", "1", "--", "true"], cwd=tmp_path,
                                env=dict(cli.env, PATH=f"{stalling.parent}:{os.environ['PATH']}",
                                         PERFLAB_DB=str(tmp_path / f"{name}.db")),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)

    killed = stalled_run("killed")
    until("the first compile's temporary", lambda: _started(gates))
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    dead = [Path(p) for p in _started(gates)]
    assert dead and all(p.exists() for p in dead)           # what a kill -9 leaves

    live = stalled_run("live")
    try:
        until("the live compile's temporary", lambda: len(_started(gates)) > len(dead))
        spared = [Path(p) for p in _started(gates)[len(dead):]]
        cli("run", "cmd", "--runs", "1", "--", "true", timeout=300)     # the next command, another compiler
        assert not any(p.exists() for p in dead), _temporaries(cache)
        assert all(p.exists() for p in spared)                # its writer is alive: not touched
        (gates / "go").touch()
        _, err = live.communicate(timeout=300)
        assert live.returncode == 0, err
    finally:
        (gates / "go").touch()
        if live.poll() is None:
            os.killpg(live.pid, signal.SIGKILL)
            live.wait()
    assert _temporaries(cache) == []


# A process that writes a temporary of the VM cache the way perflab does and stops before the
# rename, until killed (or let go).
WRITER = """
import sys, time
from pathlib import Path
from perflab.core import paths
from perflab.execution.vm import initramfs
tmp = paths.temporary(initramfs.cache_dir() / sys.argv[1])
tmp.write_bytes(b"half an archive")
print(tmp, flush=True)
time.sleep(3600)
"""


def _writer(name: str, env: dict) -> tuple[subprocess.Popen, Path]:
    proc = subprocess.Popen([sys.executable, "-c", WRITER, name], env=env, stdout=subprocess.PIPE, text=True)
    return proc, Path(proc.stdout.readline().strip())


def test_the_vm_cache_s_next_write_removes_a_dead_writer_s_temporary_only(tmp_path, monkeypatch):
    from perflab.core import paths
    from perflab.execution.vm import initramfs, remembering

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    initramfs.cache_dir().mkdir(parents=True)
    env = dict(os.environ)
    dead, dead_tmp = _writer("initramfs-0123.cpio", env)
    live, live_tmp = _writer("initramfs-4567.cpio", env)
    try:
        dead.kill()
        dead.wait()
        # An older perflab's temporary (mkstemp's name, its writer unknown): removed once far older
        # than any write takes, kept while it may still be written.
        old, fresh = initramfs.cache_dir() / ".tmp-abc123", initramfs.cache_dir() / ".tmp-def456"
        old.write_text("x")
        fresh.write_text("y")
        os.utime(old, (time.time() - 2 * paths.STALE_SECONDS,) * 2)
        assert dead_tmp.exists() and live_tmp.exists()
        archive = initramfs.build(data={"hello": b"world\n"}, with_busybox=False)
        assert archive.read_bytes() and archive.parent == initramfs.cache_dir()
        assert not dead_tmp.exists() and not old.exists()
        assert live_tmp.exists() and fresh.exists()
        remembering.keep("a boot", ["qemu", "-kernel", "k", "-initrd", str(archive)])   # sweeps again: same
        assert live_tmp.exists()
    finally:
        live.kill()
        live.wait()
    paths.sweep(initramfs.cache_dir())                         # its writer gone now too
    assert not live_tmp.exists()
    assert sorted(p.name for p in initramfs.cache_dir().iterdir() if p.name.startswith(".")) == [".tmp-def456"]


DOWNLOADER = """
import sys, time
from perflab.core import paths
from perflab.execution.vm import kernel
with paths.temporary_directory(kernel.cache_dir() / sys.argv[1]) as scratch:
    (scratch / "linux-image.deb").write_bytes(b"part of a package")
    print(scratch, flush=True)
    time.sleep(3600)
"""


def test_a_killed_kernel_download_s_directory_goes_with_the_next_download(tmp_path):
    """The kernels' cache downloads a package into a directory beside its entry: one killed mid-way
    is removed by the next download's start (the sweep of its temporary_directory), a live one not."""
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    (tmp_path / "cache" / "perflab" / "kernels").mkdir(parents=True)

    def downloading(package: str) -> tuple[subprocess.Popen, Path]:
        proc = subprocess.Popen([sys.executable, "-c", DOWNLOADER, package], env=env, stdout=subprocess.PIPE,
                                text=True)
        return proc, Path(proc.stdout.readline().strip())

    killed, dead = downloading("linux-image-6.1.0-50-amd64-unsigned")
    live, spared = downloading("linux-image-6.1.0-47-amd64-unsigned")
    try:
        killed.kill()
        killed.wait()
        assert (dead / "linux-image.deb").exists()                   # what a kill -9 leaves
        next_one, mine = downloading("linux-image-6.1.0-55-amd64-unsigned")
        next_one.kill()
        next_one.wait()
        assert not dead.exists() and (spared / "linux-image.deb").exists() and mine.exists()
    finally:
        live.kill()
        live.wait()


def _another_host(script: str, *args: str) -> list[str] | None:
    """Python `script` run as on another machine sharing this cache (a home over NFS): a hostname
    and pids of its own (user, UTS and pid namespaces); None where this kernel gives none."""
    unshare = shutil.which("unshare")
    namespaces = [unshare, "--user", "--map-root-user", "--uts", "--pid", "--fork", "--mount-proc"]
    if unshare is None or subprocess.run([*namespaces, "true"], capture_output=True).returncode != 0:
        return None
    return [*namespaces, sys.executable, "-c", "import socket; socket.sethostname('far-host')\n" + script, *args]


def test_a_live_writer_on_another_host_keeps_its_temporary(tmp_path, monkeypatch):
    """Another machine's pid says nothing here: its live writer's temporary (pid 1 in its own pid
    namespace, which this machine's init has with another start) is left to the age rule."""
    from perflab.core import paths
    from perflab.execution.vm import initramfs

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    initramfs.cache_dir().mkdir(parents=True)
    argv = _another_host(WRITER, "initramfs-89ab.cpio")
    if argv is None:
        pytest.skip("no user/UTS/pid namespaces here to stand for another host")
    far = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        far_tmp = Path(far.stdout.readline().strip())
        assert far_tmp.exists() and far.poll() is None
        initramfs.build(data={"hello": b"world\n"}, with_busybox=False)    # this host's next write
        assert far_tmp.exists()
        os.utime(far_tmp, (time.time() - 2 * paths.STALE_SECONDS,) * 2)  # a day old: its writer is gone
        paths.sweep(initramfs.cache_dir())
        assert not far_tmp.exists()
    finally:
        os.killpg(far.pid, signal.SIGKILL)
        far.wait()


def _next_temporary(target: Path) -> Path:
    """The name paths.temporary gives `target`'s next write in this process (one serial on)."""
    from perflab.core import paths

    return target.with_name(f".{target.name}.{paths._writer()}.{next(paths._serial) + 1}.tmp")


def test_a_symlink_or_directory_planted_at_a_temporary_s_name_is_not_written_through(tmp_path, monkeypatch):
    """The temporary's name is foreseeable (as a reused pid-and-start's after a reboot is the same):
    what already holds it is never written through, nor renamed into the cache."""
    from perflab.core import paths

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    cache = paths.cache_home() / "vm"
    cache.mkdir(parents=True)
    victim = tmp_path / "not-the-cache's"
    victim.write_text("precious\n")
    target = cache / "ahead-0123.json"
    planted = _next_temporary(target)
    planted.symlink_to(victim)
    paths.write_whole(target, '{"remember": "a boot"}')
    assert victim.read_text() == "precious\n"
    assert not target.is_symlink() and target.read_text() == '{"remember": "a boot"}'
    assert planted.is_symlink()                      # not ours: left to the sweep's rules

    taken = _next_temporary(target)
    taken.mkdir()
    paths.write_whole(target, b"whole")
    assert target.read_bytes() == b"whole" and taken.is_dir()
    elsewhere = tmp_path / "a directory elsewhere"
    elsewhere.mkdir()
    _next_temporary(cache / "fetch").symlink_to(elsewhere)            # a download's directory too
    with paths.temporary_directory(cache / "fetch") as scratch:
        assert scratch.is_dir() and not scratch.is_symlink() and scratch.parent == cache
    assert list(elsewhere.iterdir()) == []


def test_an_older_perflab_s_killed_download_directories_go_once_a_day_old(tmp_path, monkeypatch):
    """Before the writer-named temporaries, a kernel download went into tempfile's directories,
    `.PACKAGE.XXXXXXXX` beside the kernel and `.fetch.XXXXXXXX` beside its .deb: a killed one's
    (a package's worth of megabytes) goes with the next download once a day old, a fresh one stays."""
    from perflab.core import paths
    from perflab.execution.vm import kernel

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    package = "linux-image-6.1.0-50-amd64-unsigned"
    deb_dir = kernel.cache_dir() / package / "deb"
    deb_dir.mkdir(parents=True)
    (kernel.cache_dir() / package / "boot").mkdir()                      # the kernel itself
    old_unpack, old_fetch = kernel.cache_dir() / f".{package}.k3x_9q2a", deb_dir / ".fetch.p0_ab7zq"
    fresh = kernel.cache_dir() / f".{package}.m4n8w2c1"
    for d in (old_unpack, old_fetch, fresh):
        d.mkdir()
        (d / "linux-image.deb").write_bytes(b"part of a package")
    for d in (old_unpack, old_fetch):
        os.utime(d, (time.time() - 2 * paths.STALE_SECONDS,) * 2)
    with paths.temporary_directory(kernel.cache_dir() / package):       # the next download's start
        pass
    with paths.temporary_directory(deb_dir / "fetch"):
        pass
    assert not old_unpack.exists() and not old_fetch.exists()
    assert fresh.exists() and (kernel.cache_dir() / package / "boot").is_dir()

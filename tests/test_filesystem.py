"""fs: a fresh filesystem for the run, made on a RAM-backed loop device, always undone.

These tests make real filesystems: they need root and loop devices, and say so when
skipped. Each test keeps its state records in its own directory
(PERFLAB_FS_STATE_DIR), so other tests' perflab commands never clean its mounts.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import assert_one_line_error
from perflab.core.errors import PerflabError, UsageProblem
from perflab.execution import filesystem
from perflab.execution.workdir import WorkdirParams, filesystem_of, workdir


def _why_not(fstype: str) -> str | None:
    if os.geteuid() != 0:
        return f"fs tests need root (running as uid {os.geteuid()})"
    return filesystem.missing(fstype)


def need(fstype: str) -> None:
    why = _why_not(fstype)
    if why is not None:
        pytest.skip(f"cannot make {fstype} here: {why}")


@pytest.fixture
def state(tmp_path, monkeypatch):
    directory = tmp_path / "fs-state"
    monkeypatch.setenv("PERFLAB_FS_STATE_DIR", str(directory))
    return directory


def mounted_points() -> dict:
    with open("/proc/self/mounts") as f:
        return {line.split()[1]: line.split()[0] for line in f}


def attached_loops() -> str:
    return subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout


def assert_undone(facts: dict, path: str, state_dir) -> None:
    mount = facts["workdir_mount"]
    assert mount not in mounted_points()
    assert not os.path.exists(mount) and not os.path.exists(path)
    backing = facts["workdir_backing"]
    if backing.startswith("loop device"):
        loop, file = backing.split()[2], backing.split()[4]
        assert file.startswith("/dev/shm/perflab-fs-") and not os.path.exists(file)
        assert file not in attached_loops()
    assert not [n for n in os.listdir(state_dir) if n.endswith(".json")] if os.path.isdir(state_dir) else True


@pytest.mark.parametrize("fstype, size", [("ext4", "16M"), ("xfs", "300M"), ("btrfs", "128M"), ("tmpfs", "16M")])
def test_a_filesystem_is_made_used_and_removed(fstype, size, state):
    need(fstype)
    params = WorkdirParams(fs=fstype, fs_size=size)
    with workdir(params, "t") as wd:
        assert filesystem_of(wd.path)[0] == fstype
        with open(os.path.join(wd.path, "data"), "wb") as f:
            f.write(b"x" * 65536)
        facts = wd.facts
        assert facts["workdir_fs"] == fstype and facts["fs_size"] == size
        assert facts["workdir_mount"] in mounted_points() and wd.path.startswith(facts["workdir_mount"] + "/")
        assert facts["workdir_mount_options"].startswith("rw")
        if fstype == "tmpfs":
            assert facts["workdir_backing"].startswith("tmpfs of 16M (ram)")
        else:
            backing = facts["workdir_backing"].split()
            assert backing[:2] == ["loop", "device"] and backing[2].startswith("/dev/loop") and backing[-1] == "(ram)"
            assert backing[4] in attached_loops()
            assert fstype in facts["mkfs_version"] or "mke2fs" in facts["mkfs_version"]
        records = [json.loads((state / n).read_text()) for n in os.listdir(state) if n.endswith(".json")]
        assert len(records) == 1 and records[0]["pid"] == os.getpid() and records[0]["mount"] == facts["workdir_mount"]
    assert_undone(facts, wd.path, state)


def test_undone_when_the_run_fails_inside(state):
    need("ext4")
    with pytest.raises(RuntimeError):
        with workdir(WorkdirParams(fs="ext4", fs_size="8M"), "t") as wd:
            facts, path = wd.facts, wd.path
            raise RuntimeError("the benchmark crashed")
    assert_undone(facts, path, state)


def test_undone_while_the_benchmark_is_still_being_killed(state):
    """A process still holding the mount when the run ends: the unmount waits for it to die."""
    need("ext4")
    with workdir(WorkdirParams(fs="ext4", fs_size="8M"), "t") as wd:
        facts, path = wd.facts, wd.path
        holder = subprocess.Popen(["sleep", "30"], cwd=wd.path)
        killer = threading.Timer(0.4, holder.kill)
        killer.start()
        began = time.monotonic()
    waited = time.monotonic() - began
    holder.wait()
    assert 0.3 < waited < filesystem.UNMOUNT_PATIENCE   # it waited for the kill, then unmounted for real
    assert_undone(facts, path, state)


def test_mkfs_failure_undoes_what_was_made(state):
    # mkfs.ext4 -O nosuchfeature fails: the loop device and backing file made before it are removed again.
    need("ext4")
    original = filesystem.MKFS["ext4"]
    filesystem.MKFS["ext4"] = (original[0] + ["-O", "nosuchfeature"], original[1])
    try:
        with pytest.raises(PerflabError) as e:
            with workdir(WorkdirParams(fs="ext4", fs_size="8M"), "t"):
                pass
    finally:
        filesystem.MKFS["ext4"] = original
    message = str(e.value)
    assert "mkfs.ext4" in message and "nosuchfeature" in message and "\n" not in message
    backing = message.split(" on ", 1)[1].split(")")[0]
    assert backing.startswith("/dev/shm/perflab-fs-") and not os.path.exists(backing)
    assert backing not in attached_loops()
    assert not [n for n in os.listdir(state) if n.endswith(".json")]


def test_sizes_and_bad_values_are_refused_before_anything_is_made(state):
    need("tmpfs")
    mem = filesystem._mem_available()
    too_big = f"{mem // (1 << 20) + 1024}M"
    with pytest.raises(UsageProblem) as e:
        with workdir(WorkdirParams(fs="tmpfs", fs_size=too_big), "t"):
            pass
    assert "fs_size" in str(e.value) and "MemAvailable" in str(e.value)
    assert not os.path.exists(state)          # nothing was made, not even a record
    with pytest.raises(ValueError, match="at least 300M"):
        WorkdirParams(fs="xfs", fs_size="64M")
    with pytest.raises(ValueError, match="not a size"):
        WorkdirParams(fs="ext4", fs_size="lots")
    with pytest.raises(UsageProblem, match="give one of them"):
        with workdir(WorkdirParams(fs="tmpfs", dir="/tmp"), "t"):
            pass
    assert filesystem.parse_size("1.5G") == 3 << 29 and filesystem.parse_size("4k") == 4096


def test_without_root_a_one_line_error_says_what_is_missing(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to drop to another user")
    code = ("from perflab.execution.filesystem import check\n"
            "try:\n    check('ext4', '64M')\nexcept Exception as e:\n    print(type(e).__name__, e)\n")
    proc = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", code],
                          capture_output=True, text=True, cwd="/", env=dict(os.environ, HOME="/nonexistent"))
    if "Permission denied" in proc.stderr or "No module" in proc.stderr:
        pytest.skip(f"the test environment is not readable by another user: {proc.stderr.strip()[-120:]}")
    line = proc.stdout.strip()
    assert line.startswith("UsageProblem parameter fs = ext4:") and "needs root" in line and "dir: PATH" in line
    assert "\n" not in line


def test_bad_fs_values_on_the_cli(cli):
    proc = cli("run", "fio", "--fs", "zfs", "--size", "4M", check=False)
    assert_one_line_error(proc, "fs", "zfs", "ext4", "xfs", "btrfs", "tmpfs")
    proc = cli("run", "fio", "--fs", "xfs", "--fs-size", "100M", "--size", "4M", check=False)
    assert_one_line_error(proc, "fs_size", "100M", "300M")
    assert not cli.db.exists() or cli.sql("SELECT count(*) FROM run") == [(0,)]


def test_a_stale_mount_of_a_dead_owner_is_removed_before_the_next_mount(state):
    need("tmpfs")
    # A process that mounts and dies by SIGKILL inside: it leaves its mount and record behind.
    code = ("import os, signal\nfrom perflab.execution.filesystem import mounted\n"
            "with mounted('tmpfs', '8M', 'dead') as wd:\n"
            "    print(wd.facts['workdir_mount'], flush=True)\n    os.kill(os.getpid(), signal.SIGKILL)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ)
    assert proc.returncode == -signal.SIGKILL
    mount = proc.stdout.strip()
    assert mount in mounted_points()
    said = []
    assert filesystem.cleanup_stale(echo=said.append) == said
    assert said == [f"perflab: removed a stale test filesystem left by a killed run: {mount} (tmpfs)"]
    assert mount not in mounted_points() and not os.path.exists(mount)
    assert filesystem.cleanup_stale(echo=said.append) == []   # once


def test_sigkill_mid_run_then_the_next_command_cleans_up_and_says_so(cli, state):
    need("ext4")
    cli.env["PERFLAB_FS_STATE_DIR"] = str(state)
    proc = cli.popen("run", "fio", "--fs", "ext4", "--fs-size", "32M", "--size", "4M", "--runtime", "60",
                     "--runs", "1")
    try:
        deadline = time.monotonic() + 30
        record = None
        while time.monotonic() < deadline:
            names = [n for n in os.listdir(state) if n.endswith(".json")] if state.exists() else []
            if names:
                record = json.loads((state / names[0]).read_text())
                if record.get("loop") and record["mount"] in mounted_points() and subprocess.run(
                        ["pgrep", "-f", "--", f"--directory={record['mount']}"], capture_output=True).returncode == 0:
                    break
            time.sleep(0.05)
        else:
            raise AssertionError(f"fio did not start on the mount: {proc.stderr and proc.stderr.read()}")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    # perflab is gone: its filesystem is left mounted on its loop device.
    assert record["mount"] in mounted_points() and record["backing"] in attached_loops()
    out = cli("runs")
    line = f"perflab: removed a stale test filesystem left by a killed run: {record['mount']} ({record['loop']})"
    assert line in out.stderr.splitlines()
    assert record["mount"] not in mounted_points() and not os.path.exists(record["mount"])
    assert record["backing"] not in attached_loops() and not os.path.exists(record["backing"])
    assert not [n for n in os.listdir(state) if n.endswith(".json")]
    assert "removed a stale" not in cli("runs").stderr   # said once


def test_sigterm_mid_run_undoes_the_filesystem_before_perflab_exits(cli, state):
    need("tmpfs")
    cli.env["PERFLAB_FS_STATE_DIR"] = str(state)
    proc = cli.popen("run", "fio", "--fs", "tmpfs", "--fs-size", "16M", "--size", "4M", "--runtime", "60",
                     "--runs", "1")
    deadline = time.monotonic() + 30
    record = None
    while time.monotonic() < deadline and record is None:
        names = [n for n in os.listdir(state) if n.endswith(".json")] if state.exists() else []
        if names:
            candidate = json.loads((state / names[0]).read_text())
            if subprocess.run(["pgrep", "-f", "--", f"--directory={candidate['mount']}"],
                              capture_output=True).returncode == 0:
                record = candidate
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert record is not None, err
    assert proc.returncode == 143 and "Traceback" not in err
    assert record["mount"] not in mounted_points() and not os.path.exists(record["mount"])
    assert not [n for n in os.listdir(state) if n.endswith(".json")]
    assert cli.sql("SELECT status FROM run") == [("interrupted",)]

"""Issue 23 M10: a kill -9 of perflab leaves temporary data only until the next command.

Real fio and perf, a real SIGKILL; TMPDIR points into the test's directory so that
what is left (or not) there is this test's alone."""

from __future__ import annotations

import fnmatch
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import PERFLAB
from services import until


def _found(root: Path, pattern: str) -> list[Path]:
    # os.walk, not rglob: the runs under test remove their directories while we look, and
    # rglob raises FileNotFoundError for a directory gone between listing and entering it.
    found = []
    for top, dirs, files in os.walk(root):
        found += [Path(top, name) for name in dirs + files if fnmatch.fnmatch(name, pattern)]
    return sorted(found)


def _tmp_env(cli, tmp: Path) -> dict:
    tmp.mkdir(exist_ok=True)
    return dict(cli.env, TMPDIR=str(tmp))


def _killed_while(cli, env: dict, args: list[str], ready) -> None:
    """Start `perflab ARGS`, wait until `ready()`, kill -9 it and wait until its children are gone too."""
    proc = subprocess.Popen([PERFLAB, *map(str, args)], env=env, cwd=cli.tmp, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        until(" ".join(map(str, args)) + " under way", ready)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    # Its benchmark dies with it (the launcher's parent-death signal); wait for the group to end.
    until("the killed run's processes to end", lambda: not _group_alive(proc.pid), timeout=30)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def _fio_data(root: Path) -> list[Path]:
    return [p for p in _found(root, "perflab-fio-*") if _has_files(p)]


def _has_files(path: Path) -> bool:
    try:
        return any(path.iterdir())
    except (FileNotFoundError, NotADirectoryError):   # removed while we looked, or a file
        return False


@pytest.mark.skipif(not shutil.which("fio"), reason="fio is not installed")
def test_fio_data_left_by_kill_9_is_removed_by_the_next_command(cli, tmp_path):
    tmp = tmp_path / "tmp"
    env = _tmp_env(cli, tmp)
    cli("runs", env=env)   # the store exists, so the killed run is recorded as running
    _killed_while(cli, env, ["run", "fio", "--size", "16M", "--runtime", "60"], lambda: _fio_data(tmp))
    dead = _found(tmp, "perflab-fio-*")
    assert dead                               # left behind by the kill
    # The next command (another run) reaps the dead run's directory; a command while that run
    # is alive does not touch its files.
    other = subprocess.Popen([PERFLAB, "run", "fio", "--size", "8M", "--runtime", "60"], env=env, cwd=cli.tmp,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        until("the second run's data", lambda: [p for p in _fio_data(tmp) if f"-{other.pid}-" in str(p)])
        assert not any(p.exists() for p in dead)
        cli("runs", env=env)
        left = _fio_data(tmp)
        assert len(left) == 1 and f"-{other.pid}-" in str(left[0]), left
    finally:
        other.send_signal(signal.SIGTERM)
        other.wait(60)
    assert list(tmp.iterdir()) == []           # the live run cleaned up after itself


@pytest.mark.skipif(not shutil.which("fio"), reason="fio is not installed")
def test_a_run_in_a_given_dir_is_reaped_there_too(cli, tmp_path):
    tmp, work = tmp_path / "tmp", tmp_path / "work"
    work.mkdir()
    env = _tmp_env(cli, tmp)
    cli("runs", env=env)
    _killed_while(cli, env, ["run", "fio", "--dir", work, "--size", "16M", "--runtime", "60"],
                  lambda: _fio_data(work))
    assert _found(work, "perflab-fio-*")
    cli("runs", env=env)
    assert list(work.iterdir()) == [] and list(tmp.iterdir()) == []


@pytest.mark.skipif(not shutil.which("perf") or os.geteuid() != 0, reason="needs perf, as root (system-wide)")
def test_perf_files_left_by_kill_9_are_removed_by_the_next_command(cli, tmp_path):
    tmp = tmp_path / "tmp"
    env = _tmp_env(cli, tmp)
    cli("runs", env=env)
    _killed_while(cli, env, ["run", "cmd", "--runs", "1", "--monitor", "perf-profile", "--", "/bin/sleep", "60"],
                  lambda: any(p.name.endswith(".data") for p in _found(tmp, "perf-*")))
    assert _found(tmp, "perflab-perf-*")
    cli("runs", env=env)
    assert list(tmp.iterdir()) == []

"""Hostile input, round three (issue 31): the small ones — each a one-line answer that says
what is wrong, and nothing raw reaching a terminal."""

from __future__ import annotations

import os
import subprocess

import pytest

from conftest import PERFLAB, assert_one_line_error


def test_noise_on_a_missing_job_file_says_the_file_is_missing(cli, tmp_path):
    """L5: `perflab noise /nonexistent.yaml` said "command not found"."""
    assert_one_line_error(cli("noise", tmp_path / "nope.yaml", check=False), "job file", "nope.yaml", "no such file")


def test_a_csv_export_writes_no_terminal_control_character(cli):
    """L7: ESC and BEL of a comment reached the CSV raw (JSON and compare's CSV escape them)."""
    cli("run", "cmd", "--runs", "1", "--comment", "a\x1b[31mred\x07", "--", "true")
    csv = cli("export", "--format", "csv").stdout
    assert "\x1b" not in csv and "\x07" not in csv
    assert "a\\x1b[31mred\\x07" in csv
    # JSON keeps the comment exactly: it is the format that moves runs.
    assert '"comment": "a\\u001b[31mred\\u0007"' in cli("export").stdout


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_export_to_a_full_device_says_so_in_one_line(cli):
    """L8: "perflab: error:: No space left on device"."""
    cli("run", "cmd", "--runs", "1", "--", "true")
    with open("/dev/full", "w") as full:
        proc = subprocess.run([PERFLAB, "export"], stdout=full, stderr=subprocess.PIPE, text=True, env=cli.env,
                              cwd=cli.tmp)
    assert_one_line_error(proc, "perflab: error: No space left on device")
    assert "::" not in proc.stderr


def test_robot_bounds_a_build_that_never_ends(cli, tmp_path):
    """M6: `robot --build 'sleep 1000' --once` waited forever; --build-timeout kills the build, and the
    commit is untested, as after a failed build."""
    repo = tmp_path / "sut"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git[:3], "init", "-q", "-b", "main"], check=True)
    for i in range(2):
        (repo / "f").write_text(f"{i}\n")
        subprocess.run([*git, "add", "f"], check=True)
        subprocess.run([*git, "commit", "-qm", f"c{i}"], check=True)
    job = tmp_path / "job.yaml"
    job.write_text("benchmark: cmd\ncommand: 'true'\nruns: 1\n")
    proc = cli("robot", "--repo", repo, "--job", job, "--build", "sleep 1000", "--build-timeout", "1", "--once",
               "--runs", "1", check=False, timeout=300)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "no commit could be tested" in proc.stderr, (proc.stdout, proc.stderr)


def test_a_truncated_cached_initramfs_is_built_again(tmp_path, monkeypatch):
    """L3: a truncated initramfs in the cache was reused, and its boot blamed on the kernel."""
    from perflab.execution.vm import initramfs

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    first = initramfs.build(data={"/etc/marker": b"hello\n" * 1000}, with_busybox=False)
    whole = first.read_bytes()
    first.write_bytes(whole[: len(whole) // 2])
    again = initramfs.build(data={"/etc/marker": b"hello\n" * 1000}, with_busybox=False)
    assert again == first and again.read_bytes() == whole
    assert (b"hello\n" * 1000) in [e.data for e in initramfs.read_cpio(again.read_bytes())]


def test_the_boot_directory_of_a_killed_perflab_is_removed_by_the_next_boot(tmp_path, monkeypatch):
    """L2: one $TMPDIR/perflab-vm-* directory (console log, qemu.err) leaked per kill -9."""
    import tempfile

    from perflab.execution import scratch
    from perflab.execution.vm import machine

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = tmp_path / f"perflab-vm-{gone.pid}-x1"
    stale.mkdir()
    (stale / "console.log").write_text("...")
    alive = tmp_path / f"perflab-vm-{os.getpid()}-x2"
    alive.mkdir()
    other = tmp_path / "perflab-vm-fio-x3"     # a guest mount point's name (execution.vm.disk)
    other.mkdir()
    scratch.remove_orphans(machine.WORKDIR_PREFIX)     # what a boot does first
    assert not stale.exists() and alive.exists() and other.exists()


def test_a_qemu_failure_quotes_its_whole_message(tmp_path):
    """L1: only QEMU's last stderr line was kept ("...: and exabytes, respectively.")."""
    from types import SimpleNamespace

    from perflab.execution.vm import machine

    (tmp_path / "qemu.err").write_text("qemu-system-x86_64: -m 900T: at most 2047 MB RAM can be simulated\n"
                                       "Use K, M, G, T, P or E suffixes for kilobytes, megabytes, gigabytes, terabytes,\n"
                                       "petabytes and exabytes, respectively.\n")
    error = machine._boot_failure(machine.VmSpec(kernel="vmlinuz"), SimpleNamespace(returncode=1), tmp_path,
                                  timed_out=False)
    assert "at most 2047 MB RAM can be simulated" in str(error) and "exabytes, respectively." in str(error)
    assert "\n" not in str(error)

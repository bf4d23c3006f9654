"""Jobs on a machine reached over SSH (execution/targets/ssh.py), against a real sshd on 127.0.0.1.

The sshd (tests/services.py) runs, as root, in a UTS namespace of its own with another hostname:
what the run records of the machine then visibly comes from the far side, not from this one.
The run directory of a named machine is put under the test's own directory (its `tmpdir`), so
that what is left behind there is this test's alone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import assert_one_line_error
from perflab.execution.targets.ssh import IDLE_SECONDS
from services import SshServer, free_port, sshd_named, until

FAR_NAME = "perflab-far-box"


@pytest.fixture(scope="module")
def far(tmp_path_factory):
    """The tests' machine over SSH, named FAR_NAME where it can be (root: a UTS namespace)."""
    yield from sshd_named(FAR_NAME)


@pytest.fixture
def on_far(cli, far, tmp_path):
    """`cli` reaching `far`: its ssh config, and a configured machine `far` whose run directories go
    under tmp_path/far-runs."""
    runs = tmp_path / "far-runs"
    runs.mkdir()
    config = tmp_path / "perflab.toml"
    config.write_text(f'[machine.far]\nssh = "{SshServer.HOST}"\ntmpdir = "{runs}"\nconnect_timeout = 20\n')
    cli.env.update(PERFLAB_SSH_CONFIG=str(far.config), PERFLAB_CONFIG=str(config))
    cli.runs_dir = runs
    return cli


def _facts(cli, run_id: int) -> dict:
    (text,) = cli.sql("SELECT e.facts FROM run r JOIN environment e ON e.id = r.environment_id WHERE r.id = ?",
                      (run_id,))[0]
    return json.loads(text)


def _left_behind(runs: Path) -> list[str]:
    """What of a run is still on the machine: run directories, and processes started from one."""
    left = [str(p) for p in runs.iterdir()]
    for pid in filter(str.isdigit, os.listdir("/proc")):
        for link in ("exe", "cwd"):
            try:
                target = os.readlink(f"/proc/{pid}/{link}")
            except OSError:
                continue
            if target.startswith(str(runs)):
                left.append(f"process {pid} ({link} {target})")
    return left


def _ssh_of(perflab_pid: int) -> list[str]:
    """ssh processes perflab `perflab_pid` started (their control path names its pid)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if cmdline.startswith("ssh ") and f"perflab-ssh-{perflab_pid}-" in cmdline:
            found.append(f"{pid}: {cmdline[:120]}")
    return found


def test_will_it_scale_over_ssh_stores_samples_and_the_far_machines_facts(cli, far):
    cli.env["PERFLAB_SSH_CONFIG"] = str(far.config)
    cli("run", "will-it-scale", "--test", "getppid1", "--duration", "1", "--warmup-time", "0", "--runs", "2",
        "--on", far.on, "--monitor", "vmstat", timeout=300)
    (run_id, status, params, monitors), = cli.sql("SELECT id, status, params, monitors FROM run")
    assert status == "finished"
    assert json.loads(params)["on"] == far.on
    ops = cli.sql("SELECT value FROM sample WHERE metric = 'will-it-scale.per_process_ops'")
    assert len(ops) == 2 and all(v > 0 for (v,) in ops)
    # The /proc monitors ran there: the machine's /proc, read through the agent.
    assert json.loads(monitors)["vmstat"]["status"] == "ran"
    assert json.loads(monitors)["vmstat"]["where"] == f"on the SSH machine {far.on}"
    assert cli.sql("SELECT count(*) FROM sample WHERE metric = 'vmstat.cpu.us'")[0][0] == 2
    facts = _facts(cli, run_id)
    assert facts["ssh_machine"] == far.on
    assert facts["libc"].startswith("static") and facts["kernel_release"] == os.uname().release
    # Its work directory is the run directory's there, not this machine's scratch directory.
    assert facts["workdir_backing"] == "the run directory on the SSH machine"
    assert "/perflab-run." in facts["workdir"] and facts["workdir_fs"] != "n/a"
    if far.hostname:
        # The machine's own word (its uname, through the agent), not this machine's.
        assert facts["hostname"] == FAR_NAME and facts["testbox"] == FAR_NAME
        assert facts["controller"] == os.uname().nodename != FAR_NAME
    # THP: the far machine's setting (its fact, read there), not this machine's read here.
    assert facts["thp_in_effect"] == f"system setting of {far.on} (the run's fact thp_enabled, read there)"
    assert facts["thp_enabled"] != "n/a"


def test_a_thp_mode_on_a_far_machine_is_the_harness_s_and_this_machine_s_setting_untouched(cli, far, system_thp):
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    before = thp.read_text() if thp.exists() else None
    cli.env["PERFLAB_SSH_CONFIG"] = str(far.config)
    cli("run", "will-it-scale", "--test", "getppid1", "--duration", "1", "--warmup-time", "0", "--runs", "1",
        "--thp", "never", "--on", far.on, timeout=300)
    (run_id, status), = cli.sql("SELECT id, status FROM run")
    assert status == "finished"
    assert _facts(cli, run_id)["thp_in_effect"] == "per process: never via prctl(PR_SET_THP_DISABLE)"
    assert (thp.read_text() if thp.exists() else None) == before


def test_a_cmd_jobs_program_is_looked_up_on_the_far_machine(on_far, tmp_path):
    """`tac` is on the machine's PATH, not on this perflab's: the command is found there."""
    import shutil

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for d in os.environ["PATH"].split(os.pathsep):
        for f in Path(d).glob("*") if Path(d).is_dir() else ():
            if f.name != "tac" and not (bin_dir / f.name).exists():
                try:
                    os.symlink(f, bin_dir / f.name)
                except OSError:
                    pass
    assert shutil.which("tac", path=str(bin_dir)) is None
    job = on_far.tmp / "far.yaml"
    job.write_text("benchmark: cmd\nruns: 2\non: far\ncommand: 'tac /etc/hostname'\n")
    on_far("run", job, timeout=300, env={"PATH": str(bin_dir)})
    (status,), = on_far.sql("SELECT status FROM run")
    assert status == "finished"
    assert on_far.sql("SELECT count(*) FROM sample WHERE metric = 'time.elapsed_time'") == [(2,)]


def test_a_job_files_cmd_runs_on_the_named_machine_and_leaves_nothing(on_far, far):
    cli = on_far
    # The command succeeds only where the machine's name is FAR_NAME (or, without a namespace, anywhere).
    check = f'test "$(uname -n)" = {FAR_NAME}' if far.hostname else "true"
    job = cli.tmp / "far.yaml"
    job.write_text(f"benchmark: cmd\nruns: 3\non: far\nshell: true\ncommand: '{check}'\n")
    cli("run", job, timeout=300)
    (run_id, status, params), = cli.sql("SELECT id, status, params FROM run")
    assert status == "finished" and json.loads(params)["on"] == "far"
    assert cli.sql("SELECT count(*) FROM sample WHERE metric = 'time.elapsed_time'") == [(3,)]
    assert _facts(cli, run_id)["ssh_machine"] == "far"
    assert until("the run directory removed", lambda: not _left_behind(cli.runs_dir))


def _running(runs: Path, program: str) -> bool:
    return any(s.startswith("process") and f"/{program}" in s for s in _left_behind(runs))


# When: as soon as the run directory is there (the programs may still be arriving: the shell there
# must still remove it), or while the benchmark runs (the agent must stop it).
@pytest.mark.parametrize("sig, when", [(signal.SIGINT, "bin/"), (signal.SIGKILL, "bin/"), (signal.SIGKILL, "perflab-run.")])
def test_ctrl_c_or_kill_9_mid_run_leaves_nothing_on_the_machine(on_far, sig, when):
    cli = on_far
    proc = cli.popen("run", "will-it-scale", "--test", "getppid1", "--duration", "60", "--warmup-time", "0",
                     "--runs", "5", "--on", "far")
    until(f"a process of {when} on the machine", lambda: _running(cli.runs_dir, when))
    os.kill(proc.pid, sig)
    _, err = proc.communicate(timeout=120)
    assert "Traceback" not in err
    # Well within the agent's own watchdog (ssh.IDLE_SECONDS): the end of its channel stops it.
    assert until("nothing of the run left on the machine", lambda: not _left_behind(cli.runs_dir),
                 timeout=IDLE_SECONDS * 2 / 3, show=lambda: _left_behind(cli.runs_dir))
    assert until("no ssh of perflab's left", lambda: not _ssh_of(proc.pid), show=lambda: _ssh_of(proc.pid))
    if sig == signal.SIGINT:
        assert proc.returncode == 130
        assert cli.sql("SELECT status FROM run") == [("interrupted",)]


def test_a_bad_on_value_is_a_one_line_error(cli):
    for value, needle in (("ssh://bad host", "--on = 'ssh://bad host'"), ("ssh://box:99999", "port"),
                          ("nosuchbox", "no machine of that name")):
        proc = cli("run", "will-it-scale", "--test", "getppid1", "--on", value, check=False)
        assert_one_line_error(proc, needle)
    # The kernel under test is booted (kexec) only on a configured machine that says kexec = true:
    # refused, not run on the host nor in a guest.
    image = cli.tmp / "vmlinuz"
    image.write_bytes(b"not booted")
    for kernel in (str(image), "debian:6.1.0-47-amd64"):
        proc = cli("run", "will-it-scale", "--test", "getppid1", "--on", "ssh://box", "--kernel", kernel,
                   check=False)
        assert_one_line_error(proc, "ssh://box is not declared kexec-capable")
    proc = cli("run", "will-it-scale", "--test", "getppid1", "--on", "ssh://box", "--kernel", str(cli.tmp / "none"),
               check=False)
    assert_one_line_error(proc, "--kernel", "no such kernel image")
    proc = cli("run", "will-it-scale", "--test", "getppid1", "--on", "ssh://box", "--vm", "tcg", check=False)
    assert_one_line_error(proc, "a job runs in one place")
    job = cli.tmp / "bad.yaml"
    job.write_text("benchmark: will-it-scale\ntest: getppid1\non: ssh://-oProxyCommand=x\n")
    assert_one_line_error(cli("run", job, check=False), f"{job}:3: key 'on'")
    job.write_text("benchmark: will-it-scale\ntest: getppid1\non: ssh://box\nkernel: debian:6.1.0-47-amd64\n")
    assert_one_line_error(cli("run", job, check=False), "ssh://box is not declared kexec-capable")
    job.write_text("benchmark: will-it-scale\ntest: getppid1\non: ssh://box\nkernel: debian:6.1\n")
    assert_one_line_error(cli("run", job, check=False), f"{job}:4: key 'kernel'")
    assert not cli.db.exists() or cli.sql("SELECT count(*) FROM run") == [(0,)]


def test_an_unreachable_machine_fails_the_run_as_target_down_in_one_line(cli):
    on = f"ssh://root@127.0.0.1:{free_port()}"      # nothing listens there
    proc = cli("run", "will-it-scale", "--test", "getppid1", "--duration", "1", "--on", on, check=False, timeout=300)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "target down" in lines[0] and on in lines[0], proc.stderr
    (status, error), = cli.sql("SELECT status, error FROM run")
    assert status == "failed" and error.startswith("target down: cannot reach")


def test_a_bad_machine_in_the_configuration_is_one_line_naming_file_and_key(cli, tmp_path):
    config = tmp_path / "perflab.toml"
    for table, needle in (('[machine.box1]\nssh = "perf@box1"\nport = 22\n', "[machine.box1] unknown key 'port'"),
                          ('[machine.box1]\nssh_config = "~/.ssh/lab"\n', "[machine.box1] has no ssh"),
                          ('[machine.box1]\nssh = "perf@box1"\ntmpdir = "var/tmp"\n', "tmpdir = 'var/tmp'"),
                          ('[machine.box1]\nssh = "perf@bad host"\n', "[machine.box1] ssh = 'perf@bad host'")):
        config.write_text(table)
        proc = cli("run", "will-it-scale", "--test", "getppid1", "--on", "box1", check=False,
                   env={"PERFLAB_CONFIG": str(config)})
        assert_one_line_error(proc, str(config), needle)


def test_rerun_on_puts_a_stored_job_on_the_machine(cli, far):
    cli.env["PERFLAB_SSH_CONFIG"] = str(far.config)
    cli("run", "cmd", "--runs", "2", "--", "true")
    cli("rerun", "1", "--on", far.on, "--tag", "there", timeout=300)
    rows = cli.sql("SELECT id, tag, status, params, job FROM run ORDER BY id")
    assert [(r[0], r[1], r[2]) for r in rows] == [(1, None, "finished"), (2, "there", "finished")]
    assert "on" not in json.loads(rows[0][3]) and json.loads(rows[1][3])["on"] == far.on
    assert json.loads(rows[1][4])["on"] == far.on       # the stored job says where it ran
    assert _facts(cli, 2)["ssh_machine"] == far.on and "ssh_machine" not in _facts(cli, 1)


def test_an_agent_killed_on_the_machine_fails_the_run_as_target_down_and_leaves_nothing(on_far):
    cli = on_far
    proc = cli.popen("run", "will-it-scale", "--test", "getppid1", "--duration", "60", "--warmup-time", "0",
                     "--runs", "3", "--on", "far")
    until("the benchmark started", lambda: _running(cli.runs_dir, "bin/"))
    agent = next(s.split()[1] for s in _left_behind(cli.runs_dir) if s.startswith("process") and s.endswith("/agent)"))
    os.kill(int(agent), signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "Traceback" not in err
    assert "target down: perflab's agent on far ended while running 'getppid1'" in err
    assert cli.sql("SELECT status FROM run") == [("failed",)]
    assert until("nothing of the run left on the machine", lambda: not _left_behind(cli.runs_dir),
                 timeout=IDLE_SECONDS * 2 / 3, show=lambda: _left_behind(cli.runs_dir))


# -- a far user who is not root; a machine behind a jump host --------------------------------

def _processes_of(uid: int) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}").st_uid == uid:
                found.append(f"{pid}: " + Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:100])
        except OSError:
            continue
    return found


def test_a_far_user_who_is_not_root_runs_jobs_and_what_it_may_not_do_is_one_line(cli, far, tmp_path):
    """The machine's user is not root (as root, the test makes one): a job, its monitors and the
    machine's lock work; a run directory it may not write is one line; a dead bisection's copy of
    another user's is not its to sweep, its own is."""
    import pwd

    name, on = far.add_user()
    user = pwd.getpwnam(name)
    assert user.pw_uid != 0
    home = Path(user.pw_dir)
    closed = tmp_path / "closed"          # the test's (root's) directory: not the far user's to write in
    closed.mkdir(mode=0o700)
    config = tmp_path / "perflab.toml"
    alias = on[len("ssh://"):]
    config.write_text(f'[machine.mine]\nssh = "{alias}"\ntmpdir = "{home}"\nconnect_timeout = 20\n'
                      f'[machine.closed]\nssh = "{alias}"\ntmpdir = "{closed}"\nconnect_timeout = 20\n'
                      f'[machine.kmine]\nssh = "{alias}"\ntmpdir = "{home}"\nconnect_timeout = 20\nkexec = true\n')
    cli.env.update(PERFLAB_SSH_CONFIG=str(far.config), PERFLAB_CONFIG=str(config))
    # A dead bisection's copies there: one of the far user's, one of another user (root's, this test's).
    own = home / "perflab-tree-0wn000000000"
    subprocess.run(["su", "-s", "/bin/sh", name, "-c", f"mkdir -p {own}/s0"], check=True, timeout=60) \
        if os.geteuid() == 0 else (own / "s0").mkdir(parents=True)
    other = home / "perflab-tree-0th000000000"
    if os.geteuid() == 0:
        (other / "s0").mkdir(parents=True)
    done = cli("run", "will-it-scale", "--test", "getppid1", "--duration", "1", "--warmup-time", "0", "--runs", "1",
               "--monitor", "vmstat", "--on", "mine", timeout=300)
    (run_id, status, monitors), = cli.sql("SELECT id, status, monitors FROM run")
    assert status == "finished", done.stderr
    assert json.loads(monitors)["vmstat"]["status"] == "ran"
    assert cli.sql("SELECT count(*) FROM sample WHERE metric = 'will-it-scale.per_process_ops'") == [(1,)]
    assert _facts(cli, run_id)["ssh_destination"] == alias
    assert not own.exists()                                       # its own: swept
    assert other.exists() == (os.geteuid() == 0)                  # another user's: left to that user
    # The machine's lock was taken as that user (where the machine's sshd says: tests/services.py):
    # its holder file is gone with its session.
    lock = far.base / "machine-lock"
    assert lock.is_dir() and not (lock / f"holder.{user.pw_uid}").exists()
    assert until("nothing of the run left there",
                 lambda: not list(home.glob("perflab-run.*")) and not _processes_of(user.pw_uid),
                 show=lambda: _processes_of(user.pw_uid))
    # A directory it may not write: the run fails in one line naming the machine and the refusal.
    proc = cli("run", "cmd", "--runs", "1", "--on", "closed", "--", "true", check=False, timeout=300)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "target down: closed: the run directory and agent did not start" in lines[0], lines[0]
    assert "Permission denied" in lines[0], lines[0]
    # A kernel under test needs root there, or sudo without a password (this user has neither):
    # refused in one line before anything is copied, not stored as a kernel that did not boot.
    from perflab.execution.vm import kernel as kernels

    image = kernels.cached(kernels.DEFAULT_PACKAGE)
    if image:
        runs, there = cli.sql("SELECT count(*) FROM run"), set(home.iterdir())
        proc = cli("run", "cmd", "--runs", "1", "--on", "kmine", "--kernel", image, "--", "true", check=False,
                   timeout=300)
        assert_one_line_error(proc, "kmine: its user is not root and `sudo -n true` failed", "needs root there")
        assert cli.sql("SELECT count(*) FROM run") == runs
        assert set(home.iterdir()) == there                                   # nothing copied there
    if os.geteuid() == 0:
        import shutil

        shutil.rmtree(other)


def test_a_machine_behind_a_jump_host_is_reached_through_the_users_ssh_config(cli, far):
    """ProxyJump in the user's ssh config (the tests' sshd is its own jump host): perflab goes through
    the OpenSSH client, so the job runs there; it succeeds only while the jump's `ssh -W` to the
    machine runs (seen on the machine itself, which is this one)."""
    on = far.add_host("perflab-behind-a-jump", f"ProxyJump {SshServer.HOST}")
    cli.env["PERFLAB_SSH_CONFIG"] = str(far.config)
    job = cli.tmp / "jumped.yaml"
    # The pattern matches the jump's argv (-W [127.0.0.1]:PORT), not this command's own text (\[).
    job.write_text(f"benchmark: cmd\nruns: 2\nshell: true\non: {on}\n"
                   f"command: 'pgrep -f -- \"-W \\[127.0.0.1\\]:{far.port}\" >/dev/null'\n")
    cli("run", job, timeout=300)
    (run_id, status), = cli.sql("SELECT id, status FROM run")
    assert status == "finished"
    assert cli.sql("SELECT count(*) FROM sample WHERE metric = 'time.elapsed_time'") == [(2,)]
    assert _facts(cli, run_id)["ssh_destination"] == "perflab-behind-a-jump"
    # The same job without the jump fails: the check above is the jump's, not anything else's.
    job.write_text(job.read_text().replace(on, far.on))
    cli("run", job, "--tag", "direct", timeout=300, check=False)
    assert cli.sql("SELECT status FROM run WHERE tag = 'direct'") == [("failed",)]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a far user of its own, whose ~/.bashrc prints")
def test_a_far_bashrc_that_prints_does_not_garble_what_perflab_reads_there(monkeypatch):
    """bash, a far user's login shell, reads ~/.bashrc for sshd's commands too (the tests' sshd
    turns that off with SHLVL=1, for speed: this test's does not), and a real one may print (a
    greeting, a tool's warning). Its words came first in every short command's output: a bisection's
    far tree was "not a directory", kexec saw no initrd ("Welcome...\\nyes" is not "yes"), the
    machine's CPUs were unknown."""
    import pwd

    from perflab.execution.targets import ssh_machine

    server = SshServer()
    server.env.pop("SHLVL")
    server.start()
    try:
        name, on = server.add_user()
        subprocess.run(["usermod", "-s", "/bin/bash", name], check=True, capture_output=True, timeout=60)
        (Path(pwd.getpwnam(name).pw_dir) / ".bashrc").write_text('echo "Welcome to the lab box"\nprintf "(no newline)"\n')
        plain = subprocess.run(["ssh", "-F", str(server.config), on[len("ssh://"):], "echo yes"],
                               capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert plain.stdout == "Welcome to the lab box\n(no newline)yes\n"      # the far side is chatty indeed
        monkeypatch.setenv(ssh_machine.SSH_CONFIG_ENV, str(server.config))
        machine = ssh_machine.machine_of(on)
        connection = ssh_machine.connection(machine)
        assert connection.run("test -d / && echo yes || echo no") == "yes\n"
        assert connection.run("cd / && pwd -P").strip() == "/"
        assert ssh_machine.machine_cpus(machine) == os.sysconf("SC_NPROCESSORS_ONLN")
    finally:
        ssh_machine.close_connections()
        server.destroy()

"""The lab drives machines over SSH (issue 46, item 4), against the tests' sshd on 127.0.0.1 and a
real redis-server: a worker serving a configured machine (`perflab worker --machine far`) runs a
submitted job there and stores the far machine's facts; the machine runs one job at a time, also
against a `perflab run --on far` from the same controller (the machine lock); and `perflab bisect
--on ssh://...` measures every step there, each commit built here and its tree copied over."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

import test_bisect
from conftest import PERFLAB, assert_one_line_error
from services import SshServer, sshd_named, until
from test_lab import Lab

FAR_NAME = "perflab-lab-far"
WAIT = 300.0      # a backstop for a wait on the machine, not a measure of speed


@pytest.fixture(scope="module")
def far():
    yield from sshd_named(FAR_NAME)


def _far_machine(tmp_path: Path) -> tuple[Path, Path]:
    """A configuration naming `far` (the tests' sshd) the machine `far`, its run directories under
    the returned directory: (that directory, the configuration file)."""
    runs = tmp_path / "far-runs"
    runs.mkdir()
    config = tmp_path / "perflab.toml"
    config.write_text(f'[machine.far]\nssh = "{SshServer.HOST}"\ntmpdir = "{runs}"\nconnect_timeout = 20\n')
    return runs, config


@pytest.fixture
def lab(tmp_path, redis_server, far):
    """A lab whose commands reach `far` as the configured machine `far` (run directories under
    tmp_path/far-runs), with a machine-lock directory of the test's own."""
    runs, config = _far_machine(tmp_path)
    lab = Lab(tmp_path, redis_server.url, str(tmp_path / "shared.db"))
    lab.env.update(PERFLAB_SSH_CONFIG=str(far.config), PERFLAB_CONFIG=str(config),
                   PERFLAB_MACHINE_LOCKS=str(tmp_path / "locks"))
    lab.runs_dir = runs
    yield lab
    lab.stop()


def _start_machine_worker(lab: Lab, name: str) -> subprocess.Popen:
    proc = lab.start_worker(name, serves="--machine", visibility_timeout="600")
    lab.wait_until(f"the worker of {name}", lambda: lab.worker_state(name))
    return proc


def _ended(lab: Lab, sid: str, n: int) -> bool:
    p = lab.progress(sid)
    return sum(int(v) for k, v in p.items() if k.split(":")[0] in ("done", "failed", "cancelled")) >= n


def _runs(lab: Lab):
    from perflab.store import open_store

    store = open_store(lab.db)
    return store, store.find_runs()


def _facts(run) -> dict:
    facts = run.environment or {}
    return json.loads(facts) if isinstance(facts, str) else facts


def test_a_worker_serving_a_machine_runs_the_submitted_job_there_and_stores_its_facts(lab, far):
    _start_machine_worker(lab, "far")
    check = f'test "$(uname -n)" = {FAR_NAME}' if far.hostname else "true"
    job = lab.tmp / "far.yaml"
    job.write_text(f"benchmark: cmd\nruns: 2\nshell: true\ncommand: '{check}'\n")
    sid = lab.submit(job, "far")
    lab.wait_until("the job's end", lambda: _ended(lab, sid, 1), timeout=300)
    assert lab.progress(sid).get("done:far") == "1", lab.progress(sid) | {"logs": lab.logs()}
    lab.wait_until("the run uploaded", lambda: _runs(lab)[1], timeout=120)
    store, (run,) = _runs(lab)
    assert run.status == "finished" and run.box == "far"
    assert run.params["on"] == "far" and run.job["on"] == "far" and run.job["lab"]["submission"] == sid
    facts = _facts(run)
    assert facts["ssh_machine"] == "far" and facts["controller"] == os.uname().nodename
    if far.hostname:      # the far side's own word, not the controller's
        assert facts["hostname"] == FAR_NAME
    assert len([s for s in store.samples([run.id]) if s.metric == "time.elapsed_time"]) == 2


def test_a_submitted_vm_is_refused_on_a_machine_and_a_bad_machine_name_at_start(lab):
    bad = lab.perflab("worker", "--machine", "nowhere", "--db", lab.db, check=False)
    assert_one_line_error(bad, "--machine = 'nowhere'")
    _start_machine_worker(lab, "far")
    job = lab.tmp / "true.yaml"
    job.write_text("benchmark: cmd\nruns: 1\ncommand: /bin/true\n")
    sid = lab.perflab("submit", job, "--box", "far", "--kernel", "debian:6.1.0-50-amd64", "--vm", "kvm").stdout.strip()
    lab.wait_until("the job's end", lambda: _ended(lab, sid, 1), timeout=120)
    assert lab.progress(sid).get("failed:far") == "1"
    state = lab.worker_state("far")
    assert "a guest on it is not built" in state["last_error"], state


def test_the_worker_and_a_run_on_the_same_machine_take_turns(lab, far):
    """The worker's job holds the machine until the test lets it go, which it does only once the
    `perflab run --on far` typed meanwhile said it waits for the machine: the two jobs' lines on
    the machine never interleave."""
    _start_machine_worker(lab, "far")
    log, go = lab.tmp / "turns.log", lab.tmp / "go"
    held = lab.tmp / "held.yaml"
    held.write_text("benchmark: cmd\nruns: 1\nshell: true\ntimeout: 300\n"
                    f"command: 'echo worker-start >> {log}; while [ ! -e {go} ]; do sleep 0.05; done; "
                    f"echo worker-end >> {log}'\n")
    sid = lab.submit(held, "far")
    lab.wait_until("the worker's job running on the machine",
                   lambda: log.exists() and "worker-start" in log.read_text(), timeout=300)
    quick = lab.tmp / "quick.yaml"
    quick.write_text(f"benchmark: cmd\nruns: 1\nshell: true\ncommand: 'echo run-start >> {log}; "
                     f"echo run-end >> {log}'\n")
    with _running(lab.env, lab.tmp, "run", "run", quick, "--on", "far", "--db", lab.tmp / "mine.db") as (run, err):
        said = lab.wait_until("the run waiting for the machine",
                              lambda: "waiting for machine far" in err.read_text(errors="replace")
                              and err.read_text(errors="replace"), timeout=300)
        assert "runs one job at a time" in said and "on " in said
        assert log.read_text().split() == ["worker-start"]      # nothing of the run there yet
        go.touch()
        assert run.wait(300) == 0, err.read_text()
    lab.wait_until("the worker's job ended", lambda: _ended(lab, sid, 1), timeout=120)
    assert log.read_text().split() == ["worker-start", "worker-end", "run-start", "run-end"]
    assert lab.progress(sid).get("done:far") == "1"


def test_bisect_on_an_ssh_machine_finds_the_commit_with_every_step_measured_there(lab, far, tmp_path):
    repo = tmp_path / "repo"
    shas = test_bisect.make_repo(repo)
    job = tmp_path / "count.yaml"
    job.write_text(test_bisect.COUNT_JOB)
    db = tmp_path / "bisect.db"
    done = lab.perflab("bisect", "--repo", repo, "--good", shas[0], "--bad", shas[-1], "--build", test_bisect.BUILD,
                       "--job", job, "--metric", "loop.iterations", "--on", far.on, "--db", db,
                       timeout=test_bisect.BISECT_TIMEOUT)
    out = done.stdout
    assert f"first bad commit: {shas[test_bisect.SLOW_AT - 1]}" in out, out + done.stderr
    assert f"git bisect skip {shas[test_bisect.BROKEN_AT - 1]}" in out           # built here: failed
    from perflab.store import open_store

    store = open_store(str(db))
    runs = store.find_runs()
    assert len(runs) >= 4 and all(r.status == "finished" for r in runs)
    # Every step ran on the SSH machine, in the copy of its commit's tree there.
    assert {r.params["on"] for r in runs} == {far.on}
    assert all(_facts(r)["ssh_machine"] == far.on for r in runs)
    assert {r.commit for r in runs} >= {shas[0], shas[-1], shas[test_bisect.SLOW_AT - 1]}
    commands = {r.params["command"] for r in runs}
    assert len(commands) == 1 and "/perflab-tree-" in commands.pop()
    if far.hostname:
        assert {_facts(r)["hostname"] for r in runs} == {FAR_NAME}
    # Nothing of the bisection is left there (the copies) or in the user's repository.
    (key,) = _tree_keys(runs)
    assert far.ssh(f'ls -d "${{TMPDIR:-/tmp}}/perflab-tree-{key}" 2>&1; true').stdout.strip().endswith(
        "No such file or directory")
    test_bisect.assert_repo_untouched(repo, shas[-1])


def _tree_keys(runs) -> set[str]:
    """The perflab-tree-KEY names the runs' commands used."""
    return {r.params["command"].split("/perflab-tree-")[1].split("/")[0] for r in runs}


def test_bisect_on_a_machine_refuses_what_does_not_run_there(lab, far, tmp_path):
    repo = tmp_path / "repo"
    shas = test_bisect.make_repo(repo, n=3)
    base = ["bisect", "--repo", repo, "--good", shas[0], "--bad", shas[-1], "--metric", "loop.iterations",
            "--db", tmp_path / "x.db"]
    wis = lab.perflab(*base, "--on", far.on, "--job", _write(tmp_path / "w.yaml", "benchmark: will-it-scale\n"
                                                                                    "test: getppid1\n"), check=False)
    assert_one_line_error(wis, "must be a cmd job")
    # A kernel bisection there: each commit's kernel kexec'ed, on a machine declared kexec-capable only.
    kernel = lab.perflab(*base, "--on", far.on, "--kernel", "arch/x86/boot/bzImage", "--", "./prog", check=False)
    assert_one_line_error(kernel, f"{far.on} is not declared kexec-capable")
    # A job file's own `on:` puts the steps there as --on does, and is refused alike.
    on_file = _write(tmp_path / "on.yaml", f"benchmark: cmd\ncommand: ./prog\non: {far.on}\n")
    kind = lab.perflab(*base, "--kind", "--job", on_file, check=False)
    assert_one_line_error(kind, "--on with --kind")
    count = _write(tmp_path / "count.yaml", test_bisect.COUNT_JOB)
    robot = lab.perflab("robot", "--repo", repo, "--job", count, "--on", far.on, "--box", "b1", "--once", check=False)
    assert_one_line_error(robot, "--on with --box")


def _ends_with_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    """A command that failed with one error line, its last, after its progress lines."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and lines, proc.stderr
    assert lines[-1].startswith("perflab: error: ") and sum("error" in line for line in lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[-1], (needle, lines[-1])


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_bisect_on_the_box_of_a_machine_builds_on_the_worker_and_measures_on_the_machine(lab, far, tmp_path):
    """`bisect --box far` where box far is served by `perflab worker --machine far`: the worker fetches
    and builds each commit, copies its tree to the machine and runs the step there."""
    _start_machine_worker(lab, "far")
    repo = tmp_path / "repo"
    shas = test_bisect.make_repo(repo)
    job = _write(tmp_path / "count.yaml", test_bisect.COUNT_JOB)
    done = lab.perflab("bisect", "--repo", repo, "--good", shas[0], "--bad", shas[-1], "--build", test_bisect.BUILD,
                       "--job", job, "--metric", "loop.iterations", "--box", "far", "--db", lab.db,
                       timeout=test_bisect.BISECT_TIMEOUT)
    assert f"first bad commit: {shas[test_bisect.SLOW_AT - 1]}" in done.stdout, done.stdout + done.stderr + lab.logs()
    _store, runs = _runs(lab)
    assert runs and all(r.status == "finished" and r.box == "far" for r in runs)
    assert {r.params["on"] for r in runs} == {"far"}
    assert all(_facts(r)["ssh_machine"] == "far" and r.job["source"]["commit"] == r.commit for r in runs)
    # Each task's copy of the tree is removed when its step ends: nothing of them stays there.
    assert not list(lab.runs_dir.glob("perflab-tree-*")) and not list(lab.runs_dir.iterdir())


def test_kind_on_the_box_of_a_machine_is_refused_before_the_bisection_starts(lab, far, tmp_path):
    """`bisect --box far --kind` where box far's live worker drives the SSH machine far (its heartbeat
    says so): one line at the start, as `bisect --on far --kind` is refused, not "not labelled" at the
    end of a bisection measured there; nothing queued, measured or recorded."""
    from perflab.automate.lab import app

    _start_machine_worker(lab, "far")
    assert lab.worker_state("far")["machine"] == "far"
    shown = lab.perflab("queue").stdout.splitlines()      # the machine a box's worker drives, in its row
    assert shown[0].split()[:2] == ["BOX", "MACHINE"] and [r.split()[:2] for r in shown[1:]] == [["far", "far"]]
    repo = tmp_path / "repo"
    shas = test_bisect.make_repo(repo, n=3)
    job = _write(tmp_path / "count.yaml", test_bisect.COUNT_JOB)
    kind = lab.perflab("bisect", "--repo", repo, "--good", shas[0], "--bad", shas[-1], "--build", test_bisect.BUILD,
                       "--job", job, "--metric", "loop.iterations", "--box", "far", "--kind", "--db", lab.db,
                       check=False, timeout=test_bisect.BISECT_TIMEOUT)
    assert_one_line_error(kind, "--kind with --box far: its worker drives the SSH machine far", "without --kind")
    assert lab.redis.llen(app.queue_name("far")) == 0 and lab.worker_state("far")["state"] == "idle"
    assert not Path(lab.db).exists() or _runs(lab)[1] == []
    assert not Path(lab.db + ".bisect").exists()


def test_a_kernel_bisection_on_the_box_of_a_machine_is_checked_first_then_goes_as_far_as_the_kexec(lab, far, tmp_path):
    """`bisect --box B --kernel IMAGE` where B's worker serves an SSH machine: each commit's kernel
    is built on the worker and kexec'ed on the machine (`bisect --on --kernel`'s path). What the
    machine cannot do is refused by the worker in one line before anything is fetched or built: a
    VM asked for (a guest there is not built), a machine not declared kexec-capable. On one declared
    kexec-capable, the bisection goes as far as it can here: an end's kernel built on the
    worker, then refused at the switch, since this machine (the tests' sshd on 127.0.0.1) is the
    one perflab runs on; nothing of it is left on the machine or in the user's repository."""
    import test_kexec_box
    from perflab.automate.lab import app
    from perflab.execution.vm import kernel as kernels

    image = kernels.cached(kernels.DEFAULT_PACKAGE)
    if not image:
        pytest.skip("needs Debian's kernel: python tools/fetch_kernel.py")
    config = Path(lab.env["PERFLAB_CONFIG"])
    config.write_text(config.read_text() + f'[machine.kfar]\nssh = "{SshServer.HOST}"\ntmpdir = "{lab.runs_dir}"\n'
                                           "connect_timeout = 20\nkexec = true\n")
    _start_machine_worker(lab, "kfar")
    repo = tmp_path / "linux"
    shas = test_kexec_box.kernel_tree(repo, [image, image])
    job = _write(tmp_path / "release.yaml", test_kexec_box.RELEASE_JOB)
    base = ["bisect", "--repo", repo, "--good", shas[0], "--bad", shas[-1], "--build", "sh build.sh",
            "--kernel", "arch/x86/boot/bzImage", "--job", job, "--metric", "kernel.abi", "--db", lab.db]
    built = lambda box: list(lab.spool(box).glob("src/kernel-*/images/*"))  # noqa: E731

    # --vm with no worker of the box alive: which machine will serve it is not known at the start;
    # the bisection waits for the worker, whose one line ends it before anything is fetched or built.
    with _running(lab.env, lab.tmp, "vm", *base, "--box", "far", "--vm", "icount") as (vm, err):
        lab.wait_until("the bisection waiting for a worker",
                       lambda: "no worker of it is alive" in err.read_text(errors="replace"), timeout=300)
        _start_machine_worker(lab, "far")
        vm.wait(300)
        _ends_with_error(subprocess.CompletedProcess(vm.args, vm.returncode, "", err.read_text()),
                         "box far: source.kernel.vm: box far is the SSH machine far", "a guest on it is not built")
    # With the worker alive (it says in its heartbeat which machine it drives): refused at the start.
    vm = lab.perflab(*base, "--box", "far", "--vm", "icount", check=False, timeout=300)
    assert_one_line_error(vm, "--vm with --box far: its worker drives the SSH machine far", "bisect without --vm")
    assert lab.redis.llen(app.queue_name("far")) == 0
    plain = lab.perflab(*base, "--box", "far", check=False, timeout=300)
    _ends_with_error(plain, "box far: box far is the SSH machine far: far is not declared kexec-capable")
    assert not built("far") and not list(lab.spool("far").glob("src/*/mirror.git"))   # nothing fetched
    assert _runs(lab)[1] == []

    done = lab.perflab(*base, "--box", "kfar", check=False, timeout=test_bisect.BISECT_TIMEOUT)
    _ends_with_error(done, "the job fails at the ", "kfar is the machine perflab runs on (same boot_id/machine-id): "
                     "perflab does not kexec its own machine")
    # The first end's kernel was built on the worker, out of tree, and kept there for the next bisection.
    (first,) = [p.name for p in built("kfar")]
    assert first in (shas[0], shas[-1])
    # A refusal, not a kernel that did not boot: no run is stored (the runner's way with bad input).
    lab.wait_until("the worker idle again", lambda: lab.worker_state("kfar").get("state") == "idle", timeout=120)
    assert _runs(lab)[1] == []
    assert not list(lab.runs_dir.iterdir())            # no run directory, no tree left there
    git = lambda *a: subprocess.run(["git", "-C", str(repo), *a], capture_output=True, text=True).stdout  # noqa: E731
    assert git("status", "--porcelain") == "" and git("rev-parse", "HEAD").strip() == shas[-1]
    assert git("worktree", "list").count("\n") == 1      # the kernels were built on the worker


COUNTER = """#include <stdio.h>
int main(void) { printf("{\\"count\\": %%d}\\n", %d); return 0; }
// %s
"""


def test_series_on_an_ssh_machine_names_the_patch_measured_there(lab, far, tmp_path):
    import test_patch_series

    git = test_patch_series._git
    repo = tmp_path / "proj"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "prog.c").write_text(COUNTER % (100, "base"))
    git(repo, "add", "prog.c")
    git(repo, "commit", "-qm", "base")
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-qb", "topic")
    for i in range(1, 6):
        (repo / "prog.c").write_text(COUNTER % (130 if i >= 3 else 100, f"step {i}"))
        git(repo, "commit", "-qam", f"prog: {'count more' if i == 3 else 'a comment'} ({i})")
    mails = tmp_path / "mails"
    git(repo, "format-patch", "-q", "--base", base, "--cover-letter", "-o", str(mails), f"{base}..topic")
    git(repo, "checkout", "-q", "main")
    job = _write(tmp_path / "count.yaml", "benchmark: cmd\ncommand: ./prog\nmetrics:\n"
                                          "  - {name: prog.count, pattern: 'json:count'}\n")
    db = tmp_path / "series.db"
    done = lab.perflab("series", "--repo", repo, "--mbox", mails, "--job", job, "--build", "cc -O1 -o prog prog.c",
                       "--metric", "prog.count", "--on", "far", "--db", db, timeout=test_bisect.BISECT_TIMEOUT)
    assert "the patch: [PATCH 3/5] prog: count more (3) (3 of 5)" in done.stdout, done.stdout + done.stderr
    assert "kind of change: not labelled (the steps ran on an SSH machine" in done.stderr
    from perflab.store import open_store

    runs = open_store(str(db)).find_runs()
    assert runs and {r.params["on"] for r in runs} == {"far"}
    assert all(r.status == "finished" and _facts(r)["ssh_machine"] == "far" for r in runs)
    assert not list(lab.runs_dir.glob("perflab-tree-*"))      # the copies removed there


def test_the_robot_on_an_ssh_machine_reports_the_planted_regression_once(lab, far, tmp_path):
    """`robot --on far`: each commit built here (a fresh worktree), its tree copied to the machine and
    its job run there; the culprit bisected there too (its kind not labelled: valgrind counts here)."""
    import test_robot

    repo = tmp_path / "sut"
    shas = test_robot.make_repo(repo)
    job = _write(tmp_path / "job.yaml", "benchmark: cmd\nargv: [/bin/sh, prog.sh]\nruns: 6\n")
    out = tmp_path / "reports"
    args = ["robot", "--repo", repo, "--job", job, "--start", shas[0], "--out", out, "--once", "--name", "far",
            "--on", "far", "--db", tmp_path / "robot.db"]
    first = lab.perflab(*args, timeout=600)
    assert "1 new report(s)" in first.stdout, first.stdout + first.stderr
    (report,) = out.iterdir()
    assert report.name.startswith(shas[test_robot.SLOW_AT][:12])
    second = lab.perflab(*args, timeout=600)
    assert "0 new report(s)" in second.stdout, second.stdout
    from perflab.store import open_store

    runs = open_store(str(tmp_path / "robot.db")).find_runs()
    assert runs and {r.params["on"] for r in runs} == {"far"}
    assert all(_facts(r)["ssh_machine"] == "far" for r in runs if r.status == "finished")
    assert len({r.params["command"] for r in runs if r.tag == "robot-far"}) == 1     # one command, every pass
    assert not list(lab.runs_dir.glob("perflab-tree-*"))


# -- two controllers, one machine; what a killed bisection leaves there ----------------------

def _controllers(cli, far, tmp_path: Path, n: int = 2) -> tuple[Path, list[dict]]:
    """The environments of `n` controllers of one machine: each its own store and its own lock
    directory (as two hosts have, or two users who set PERFLAB_MACHINE_LOCKS apart), all reaching
    `far` as the configured machine `far` (run directories and trees under the returned directory)."""
    runs, config = _far_machine(tmp_path)
    return runs, [dict(cli.env, PERFLAB_SSH_CONFIG=str(far.config), PERFLAB_CONFIG=str(config),
                       PERFLAB_DB=str(tmp_path / f"controller{i}.db"),
                       PERFLAB_MACHINE_LOCKS=str(tmp_path / f"locks{i}"))
                  for i in range(n)]


def _start(env: dict, tmp: Path, name: str, *args) -> tuple[subprocess.Popen, Path]:
    """`perflab ARGS` started in `tmp`, its stderr in tmp/NAME.err: (the process, that file)."""
    err = tmp / f"{name}.err"
    with open(err, "wb") as stderr:
        proc = subprocess.Popen([PERFLAB, *map(str, args)], env=env, cwd=tmp, stdout=subprocess.DEVNULL, stderr=stderr)
    return proc, err


@contextlib.contextmanager
def _running(env: dict, tmp: Path, name: str, *args):
    """`_start`'s process for the block's time: killed (if it still runs) and reaped when it ends."""
    proc, err = _start(env, tmp, name, *args)
    try:
        yield proc, err
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _holding_job(tmp: Path, log: Path, go: Path, name: str) -> Path:
    """A job on `far` that writes NAME-start, waits for `go`, then writes NAME-end."""
    return _write(tmp / f"{name}.yaml", f"benchmark: cmd\nruns: 1\nshell: true\ntimeout: 300\non: far\n"
                                        f"command: 'echo {name}-start >> {log}; while [ ! -e {go} ]; do sleep 0.05; "
                                        f"done; echo {name}-end >> {log}'\n")


@contextlib.contextmanager
def _second_waiting_for_first(cli, far, tmp_path: Path, first_goes_on: Path):
    """Two controllers of `far`: the first's job on the machine, holding it until `first_goes_on`
    exists; the second's typed meanwhile, waiting for it (it said so, naming the first's pid).
    Yields (log of their jobs' lines, first, its stderr file, second, its stderr file); both are
    killed and reaped when the block ends."""
    _runs, (one, two) = _controllers(cli, far, tmp_path)
    log = tmp_path / "turns.log"
    with _running(one, tmp_path, "first", "run", _holding_job(tmp_path, log, first_goes_on, "first")) as (first,
                                                                                                       first_err):
        until("the first controller's job running on the machine", lambda: log.exists() and log.read_text(),
              timeout=WAIT)
        with _running(two, tmp_path, "second", "run",
                      _holding_job(tmp_path, log, tmp_path, "second")) as (second, second_err):
            until("the second controller waiting for the first",      # its whole line
                  lambda: any(f"pid {first.pid} on" in x and x.endswith("\n")
                              for x in second_err.read_text().splitlines(keepends=True)), timeout=WAIT)
            yield log, first, first_err, second, second_err


def test_two_controllers_driving_one_machine_take_turns_the_waiter_naming_the_holder(cli, far, tmp_path):
    """Two controllers with lock directories of their own (this controller's lock cannot keep them
    apart): the lock on the machine does. The second says whom it waits for (host, pid, job), and
    their lines on the machine never interleave."""
    go = tmp_path / "go"
    with _second_waiting_for_first(cli, far, tmp_path, go) as (log, first, first_err, second, second_err):
        line = next(x for x in second_err.read_text().splitlines() if f"pid {first.pid}" in x)
        assert f"pid {first.pid} on {os.uname().nodename}" in line, line
        assert "waiting for machine far" in line and "the lock on the machine" in line, line
        assert log.read_text().split() == ["first-start"]       # nothing of the second there yet
        go.touch()
        assert first.wait(300) == 0, first_err.read_text()
        assert second.wait(300) == 0, second_err.read_text()
    assert log.read_text().split() == ["first-start", "first-end", "second-start", "second-end"]


def test_a_controller_killed_while_it_holds_the_machine_frees_it_for_the_other(cli, far, tmp_path):
    never = tmp_path / "never"
    with _second_waiting_for_first(cli, far, tmp_path, never) as (log, first, _, second, second_err):
        os.kill(first.pid, signal.SIGKILL)
        assert second.wait(300) == 0, second_err.read_text()
    assert log.read_text().split() == ["first-start", "second-start", "second-end"]


def test_a_bisection_killed_on_a_machine_leaves_no_copy_of_its_tree_there(cli, far, tmp_path):
    runs, (env,) = _controllers(cli, far, tmp_path, 1)
    repo = tmp_path / "repo"
    shas = test_bisect.make_repo(repo)
    go = tmp_path / "go"
    job = _write(tmp_path / "count.yaml", test_bisect.COUNT_JOB.replace(
        "command: ./prog", f"shell: true\ncommand: 'while [ ! -e {go} ]; do sleep 0.05; done; ./prog'"))
    with _running(env, tmp_path, "bisect", "bisect", "--repo", repo, "--good", shas[0], "--bad", shas[-1],
                  "--build", test_bisect.BUILD, "--job", job, "--metric", "loop.iterations",
                  "--on", "far") as (bisect, err):
        # A step waits on the machine in the copy of its commit's tree.
        until("a step running in its tree's copy", lambda: list(runs.glob("perflab-tree-*/cur/prog"))
              or bisect.poll() is not None, timeout=WAIT)
        assert bisect.poll() is None, err.read_text()
        os.kill(bisect.pid, signal.SIGKILL)
    # Its session there ended with perflab's ssh: the shell that held the copy removed it.
    until("the copy removed", lambda: not list(runs.glob("perflab-tree-*")), timeout=120)


def test_the_next_session_on_a_machine_sweeps_a_dead_bisections_tree_and_spares_a_live_ones(cli, far, tmp_path,
                                                                                           monkeypatch):
    """A copy whose holding shell could not remove it (that shell killed there, the machine rebooted
    with it on a disk, an older perflab's) is removed by whatever perflab next takes the machine;
    a live bisection's copy, whose shell holds its flock, is not touched."""
    from perflab.automate.far_tree import FarTrees
    from perflab.execution.targets.ssh_machine import close_connections, machine_of

    runs, (env,) = _controllers(cli, far, tmp_path, 1)
    for key in ("PERFLAB_SSH_CONFIG", "PERFLAB_CONFIG", "PERFLAB_MACHINE_LOCKS"):
        monkeypatch.setenv(key, env[key])
    tree = tmp_path / "built"
    tree.mkdir()
    (tree / "prog.txt").write_text("built at c0ffee\n")
    live = FarTrees(machine_of("far"), "live00000000")
    try:
        live.place(tree, "c0ffee", "a live bisection")
        copy = runs / "perflab-tree-live00000000" / "cur" / "prog.txt"
        assert copy.read_text() == "built at c0ffee\n"
        dead = runs / "perflab-tree-dead00000000"
        (dead / "s0").mkdir(parents=True)
        (dead / "s0" / "prog.txt").write_text("left by a killed perflab\n")
        done = subprocess.run([PERFLAB, "run", "cmd", "--runs", "1", "--on", "far", "--", "true"], env=env,
                              cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert not dead.exists()
        assert f"far: removed {dead}, the copy of a bisection whose perflab is gone" in done.stderr
        assert copy.read_text() == "built at c0ffee\n"      # the live one's, untouched
    finally:
        live.close()
        close_connections()
    assert not list(runs.glob("perflab-tree-*"))


def test_a_lock_lost_with_the_machines_boot_is_taken_again_before_the_reconnection(cli, far, tmp_path,
                                                                                    monkeypatch):
    """What a kexec does to the machine's lock, without the reboot: the session that held it is cut
    (its ssh killed here, as the reboot ends it there). The reconnection the kexec switch polls with
    (machine_lock.keeping) takes it again first; another controller waiting meanwhile names us and
    gets the machine only once we let it go."""
    from perflab.execution import machine_lock
    from perflab.execution.targets.ssh_machine import close_connections, machine_of, reconnect

    _runs, (one, two) = _controllers(cli, far, tmp_path)
    for key in ("PERFLAB_SSH_CONFIG", "PERFLAB_CONFIG", "PERFLAB_MACHINE_LOCKS"):
        monkeypatch.setenv(key, one[key])
    machine = machine_of("far")
    log = tmp_path / "turns.log"
    said, other = [], None
    try:
        with machine_lock.held(machine, "a kernel under test", say=said.append):
            lease, _ = machine_lock._HELD[machine_lock.machine_key(machine)]
            os.kill(lease.process.pid, signal.SIGKILL)       # the session that held it: gone
            lease.process.wait()
            assert not lease.alive()
            machine_lock.keeping(reconnect)(machine)
            assert lease.alive()                               # held again, by a new session
            job = _write(tmp_path / "other.yaml",
                         f"benchmark: cmd\nruns: 1\nshell: true\non: far\ncommand: 'echo other >> {log}'\n")
            other, err = _start(two, tmp_path, "other", "run", job)
            until("the other controller waiting for us", lambda: f"pid {os.getpid()} on" in err.read_text()
                  and "a kernel under test" in err.read_text(), timeout=WAIT)
            assert not log.exists()
        assert other.wait(300) == 0, err.read_text()
        assert log.read_text().split() == ["other"]
    finally:
        if other is not None and other.poll() is None:
            other.kill()
            other.wait()
        close_connections()

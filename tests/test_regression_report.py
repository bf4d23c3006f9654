"""`perflab report regression` (the 0-day email) and `perflab check` (the CI gate)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import uuid
from pathlib import Path

from conftest import assert_one_line_error

FIXTURE = Path(__file__).parent / "data" / "regression-report.txt"
GIT_ENV = {"GIT_AUTHOR_NAME": "Ada Author", "GIT_AUTHOR_EMAIL": "ada@example.org",
           "GIT_COMMITTER_NAME": "Ada Author", "GIT_COMMITTER_EMAIL": "ada@example.org",
           "GIT_AUTHOR_DATE": "2026-11-01T10:00:00+00:00", "GIT_COMMITTER_DATE": "2026-11-01T10:00:00+00:00"}
JOB = {"benchmark": "will-it-scale", "params": {"test": "page_fault2", "mode": "thread", "nr_task": 2,
                                                 "duration": 5.0, "warmup_time": 1.0, "interval": 1.0, "bind": True,
                                                 "thp": "system"},
       "runs": 5, "warmup": 0, "timeout": None, "tag": None, "comment": None, "monitors": {"proc-vmstat": {"interval": 1.0}}}
ENV = {"testbox": "lab-box", "kernel_release": "6.8.0", "cc_version": "gcc 12.2.0", "cpu_model": "Test CPU @ 2.0GHz",
       "cpu_threads": 8, "cpu_cores": 4, "memory_kib": 16 * 1048576, "cpufreq_governor": "performance"}


def make_repo(path: Path) -> list[str]:
    """A repository of three commits with fixed dates: the same shas on every machine."""
    env = dict(os.environ, **GIT_ENV)
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True, env=env)
    shas = []
    for i, subject in enumerate(["mm: base", "mm: take the lock earlier", "mm: tidy"]):
        (path / "f.c").write_text(f"int x = {i};\n")
        subprocess.run(["git", "-C", str(path), "add", "f.c"], check=True, env=env)
        subprocess.run(["git", "-C", str(path), "commit", "-q", "-m", subject], check=True, env=env)
        shas.append(subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], check=True, env=env,
                                   capture_output=True, text=True).stdout.strip())
    return shas


def _run(commit: str, repo: Path, ops: list[float], pgfault: list[float], idle: list[float]) -> dict:
    samples = []
    for rep, (o, f, i) in enumerate(zip(ops, pgfault, idle)):
        samples += [["will-it-scale.per_thread_ops", o, "ops/s", 1, rep, 0],
                    ["proc-vmstat.pgfault", f, "", 0, rep, None],
                    ["vmstat.cpu.id", i, "%", 0, rep, None]]
    return {"uuid": str(uuid.uuid4()), "testbox": "lab-box", "benchmark": "will-it-scale",
            "name": "will-it-scale page_fault2 thread x2", "params": JOB["params"], "tag": None, "commit": commit,
            "dirty": False, "started": "2026-11-01T10:00:00", "finished": "2026-11-01T10:05:00", "status": "finished",
            "comment": None, "error": None, "environment": {**ENV, "sut_repo": str(repo)}, "failures": [],
            "job": JOB, "samples": samples}


def load(cli, tmp_path) -> tuple[Path, list[str]]:
    repo = tmp_path / "linux"
    shas = make_repo(repo)
    doc = {"format": "perflab-export", "version": 2, "runs": [
        _run(shas[0], repo, [10092, 10110, 10075, 10101, 10088], [5.0e6, 5.02e6, 4.98e6, 5.01e6, 4.99e6],
             [10.0, 10.2, 9.9, 10.1, 10.0]),
        _run(shas[1], repo, [8323, 8340, 8310, 8331, 8319], [4.1e6, 4.12e6, 4.08e6, 4.11e6, 4.09e6],
             [10.1, 10.0, 9.9, 10.2, 10.0]),
    ]}
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(doc))
    cli("import", path)
    return repo, shas


def test_regression_report_layout(cli, tmp_path):
    repo, shas = load(cli, tmp_path)
    # No configuration file: the trailer's Reported-by is the default sender, whoever runs the test.
    out = cli("report", "regression", "--base", shas[0][:10], "--head", shas[1][:10], "--subject-tag", "LKP",
              env={"PERFLAB_CONFIG": str(tmp_path / "absent.toml")}).stdout
    text = out.replace(str(repo), "REPO")
    if os.environ.get("PERFLAB_REGEN"):
        FIXTURE.write_text(text)
    assert text.splitlines()[0] == f"Subject: [LKP] {shas[1][:10]}: will-it-scale.per_thread_ops -17.5% regression"
    assert text == FIXTURE.read_text()


def test_report_names_commit_author_machine_parameters_and_reproduce_steps(cli, tmp_path):
    repo, shas = load(cli, tmp_path)
    out = cli("report", "regression", "--base", shas[0][:8], "--head", shas[1][:8], "--build", "make -j8").stdout
    assert "FYI, we noticed a -17.5% regression of will-it-scale.per_thread_ops due to commit:" in out
    assert f'commit: {shas[1]} ("mm: take the lock earlier")' in out
    assert "author: Ada Author <ada@example.org>" in out
    assert "on test machine: lab-box: 8 threads Test CPU @ 2.0GHz with 16G memory" in out
    assert "\ttest: page_fault2" in out and "\tnr_task: 2" in out
    assert "Details are as below:" in out
    # The monitors that changed are in the table, the unchanged one is not.
    assert "proc-vmstat.pgfault" in out and "vmstat.cpu.id" not in out
    assert f"git -C {repo} checkout {shas[1]}" in out and "make -j8" in out
    assert "perflab run \"$OLDPWD/job.yaml\"" in out and "will-it-scale:" in out and "test: page_fault2" in out


def test_the_report_and_check_read_the_store_without_sqlalchemy(cli, tmp_path):
    """Facts, not times (issue 47): `report regression` and `check` read an SQLite store through
    perflab.store.reader, not SQLAlchemy (0.1-0.3 s of each start)."""
    from test_startup import _modules

    _, shas = load(cli, tmp_path)
    loaded, out = _modules(cli.env, "report", "regression", "--base", shas[0][:8], "--head", shas[1][:8])
    assert "-17.5% regression" in out and "sqlalchemy" not in loaded
    loaded, out = _modules(cli.env, "check", "--baseline", shas[1][:8], "--run", shas[0][:8])
    assert "check: no significant regression" in out and "sqlalchemy" not in loaded


def test_unknown_revisions_are_one_line_errors(cli, tmp_path):
    _, shas = load(cli, tmp_path)
    # The other way round it is an improvement mail (tests/test_mail.py), not an error.
    swapped = cli("report", "regression", "--base", shas[1][:8], "--head", shas[0][:8]).stdout
    assert swapped.startswith(f"Subject: [perflab] {shas[0][:10]}: will-it-scale.per_thread_ops +21.2% improvement")
    assert_one_line_error(cli("report", "regression", "--base", "deadbeef", "--head", shas[0][:8], check=False),
                          "deadbeef")


class _SMTPServer:
    """A minimal SMTP server on loopback that keeps what it receives (enough for smtplib)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.port = self.sock.getsockname()[1]
        self.received: list[str] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        conn, _ = self.sock.accept()
        f = conn.makefile("rwb")

        def say(line):
            f.write(line.encode() + b"\r\n")
            f.flush()

        say("220 test ESMTP")
        data = None
        while True:
            line = f.readline()
            if not line:
                break
            text = line.decode(errors="replace").rstrip("\r\n")
            if data is not None:
                if text == ".":
                    self.received.append("\n".join(data))
                    data = None
                    say("250 queued")
                else:
                    data.append(text)
                continue
            verb = text.split(" ")[0].upper()
            if verb == "EHLO":
                say("250 test")
            elif verb == "DATA":
                data = []
                say("354 go on")
            elif verb == "QUIT":
                say("221 bye")
                break
            else:
                say("250 ok")
        conn.close()


def test_to_sends_the_report_through_the_configured_smtp_server(cli, tmp_path):
    _, shas = load(cli, tmp_path)
    server = _SMTPServer()
    config = tmp_path / "config.toml"
    config.write_text(f'[mail]\nfrom = "robot <robot@lab>"\nsmtp = "127.0.0.1:{server.port}"\n')
    out = cli("report", "regression", "--base", shas[0][:8], "--head", shas[1][:8], "--to", "ada@example.org",
              env={"PERFLAB_CONFIG": str(config)}).stdout
    assert f"sent to ada@example.org through 127.0.0.1:{server.port}" in out
    server.thread.join(5)
    (mail,) = server.received
    assert f"Subject: [perflab] {shas[1][:10]}: will-it-scale.per_thread_ops -17.5% regression" in mail
    assert "To: ada@example.org" in mail and "FYI, we noticed" in mail


def test_to_through_sendmail_and_a_bad_configuration(cli, tmp_path):
    _, shas = load(cli, tmp_path)
    spool = tmp_path / "spool.txt"
    sendmail = tmp_path / "sendmail"
    sendmail.write_text(f"#!/bin/sh\ncat > {spool}\n")
    sendmail.chmod(0o755)
    config = tmp_path / "config.toml"
    config.write_text(f'[mail]\nsendmail = "{sendmail}"\n')
    cli("report", "regression", "--base", shas[0][:8], "--head", shas[1][:8], "--to", "ada@example.org",
        env={"PERFLAB_CONFIG": str(config)})
    assert "FYI, we noticed a -17.5% regression" in spool.read_text()
    config.write_text('[mail]\nsmtpserver = "x"\n')
    assert_one_line_error(cli("report", "regression", "--base", shas[0][:8], "--head", shas[1][:8], "--to", "a@b",
                              env={"PERFLAB_CONFIG": str(config)}, check=False), "config.toml", "smtpserver")


def test_check_exits_1_on_a_regression_and_0_without(cli, tmp_path):
    _, shas = load(cli, tmp_path)
    bad = cli("check", "--baseline", shas[0][:8], "--run", shas[1][:8], check=False)
    assert bad.returncode == 1, bad.stderr
    assert "check: REGRESSION in 1 metric(s); worst will-it-scale.per_thread_ops -17.5%" in bad.stdout
    good = cli("check", "--baseline", shas[1][:8], "--run", shas[0][:8])
    assert "check: no significant regression" in good.stdout


def test_check_runs_a_job_and_says_when_samples_are_blind(cli, tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("benchmark: cmd\nargv: [/bin/sleep, '0.01']\nruns: 3\n")
    cli("run", str(job), "--tag", "base")
    out = cli("check", "--baseline", "base", "--job", str(job), check=False)
    assert out.returncode in (0, 1), out.stderr
    assert "check:" in out.stdout
    # A single run per side cannot see a 5% change: said out loud.
    cli("run", "cmd", "--runs", "1", "--tag", "one", "--", "/bin/true")
    cli("run", "cmd", "--runs", "1", "--tag", "two", "--", "/bin/true")
    blind = cli("check", "--baseline", "one", "--run", "two", check=False)
    assert "could not have seen a 5% change" in blind.stdout
    assert_one_line_error(cli("check", "--baseline", "nosuch", "--job", str(job), check=False), "nosuch")

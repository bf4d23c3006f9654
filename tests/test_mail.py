"""The 0-day mail a maintainer acts on (issue 22, point 5): the tags to copy, steps that
measure both sides, the shortest job.yaml, secondary metrics left out, the improvement mail."""

from __future__ import annotations

import email
import email.policy
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import CLI, PERFLAB, assert_one_line_error
from test_regression_report import GIT_ENV, _run, load

IMPROVEMENT_FIXTURE = Path(__file__).parent / "data" / "improvement-report.txt"


def _config(tmp_path, text: str) -> dict:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return {"PERFLAB_CONFIG": str(path)}


def _sendmail(tmp_path) -> tuple[Path, Path]:
    spool, sendmail = tmp_path / "spool.eml", tmp_path / "sendmail"
    sendmail.write_text(f"#!/bin/sh\ncat > {spool}\n")
    sendmail.chmod(0o755)
    return spool, sendmail


def test_trailer_tags_come_from_the_configuration_and_close_the_mails_own_message_id(cli, tmp_path):
    _, shas = load(cli, tmp_path)
    spool, sendmail = _sendmail(tmp_path)
    env = _config(tmp_path, '[mail]\nfrom = "robot <robot@lab.example>"\n'
                            'reported_by = "perflab test robot <lkp@lab.example>"\n'
                            'closes = "https://lists.lab.example/perf/{message_id}"\n'
                            f'sendmail = "{sendmail}"\n')
    out = cli("report", "regression", "--base", shas[0][:8], "--head", shas[1][:8], env=env).stdout
    lines = out.splitlines()
    at = lines.index("| Reported-by: perflab test robot <lkp@lab.example>")
    assert lines[at - 2].startswith("If a separate patch fixes this") and "tags" in lines[at - 1]
    closes = lines[at + 1]
    assert re.fullmatch(r"\| Closes: https://lists\.lab\.example/perf/c8666d549d\.[0-9a-f]{12}-regression@lab\.example",
                        closes), closes
    # The tags come before the details, as the robot's mail has them.
    assert at < lines.index("Details are as below:")
    # Mailed, the Message-ID is the one Closes: names.
    cli("report", "regression", "--base", shas[0][:8], "--head", shas[1][:8], "--to", "ada@example.org", env=env)
    msg = email.message_from_bytes(spool.read_bytes(), policy=email.policy.default)
    assert msg["Message-ID"] == f"<{closes.rsplit('/', 1)[1]}>"
    assert closes in msg.get_content()


def test_without_configuration_reported_by_is_the_sender_and_there_is_no_closes(cli, tmp_path):
    _, shas = load(cli, tmp_path)
    env = _config(tmp_path, '[mail]\nfrom = "lab robot <robot@lab.example>"\n')
    out = cli("report", "regression", "--base", shas[0][:8], "--head", shas[1][:8], env=env).stdout
    assert "| Reported-by: lab robot <robot@lab.example>" in out and "Closes:" not in out


def test_bad_trailer_keys_are_one_line_errors(cli, tmp_path):
    _, shas = load(cli, tmp_path)
    args = ("report", "regression", "--base", shas[0][:8], "--head", shas[1][:8])
    assert_one_line_error(cli(*args, env=_config(tmp_path, '[mail]\ncloses = "https://x/{msgid}"\n'), check=False),
                          "config.toml", "closes", "{msgid}", "{message_id}")
    assert_one_line_error(cli(*args, env=_config(tmp_path, '[mail]\nreported_by = 7\n'), check=False),
                          "config.toml", "reported_by", "7")


def test_one_metric_is_singular_and_parameters_at_their_defaults_are_not_switches(cli, tmp_path):
    _, shas = load(cli, tmp_path)
    out = cli("report", "regression", "--base", shas[0][:8], "--head", shas[1][:8]).stdout
    assert "after FDR over 1 metric;" in out and "1 metrics" not in out
    # bind: True is will-it-scale's default switch: not a parameter worth a line; thp: system is a value.
    assert "\tbind:" not in out and "\tthp: system" in out


def test_the_improvement_mail(cli, tmp_path):
    repo, shas = load(cli, tmp_path)
    out = cli("report", "regression", "--base", shas[1][:10], "--head", shas[0][:10], "--subject-tag", "LKP",
              env={"PERFLAB_CONFIG": str(tmp_path / "absent.toml")}).stdout
    text = out.replace(str(repo), "REPO")
    if os.environ.get("PERFLAB_REGEN"):
        IMPROVEMENT_FIXTURE.write_text(text)
    assert text.splitlines()[0] == f"Subject: [LKP] {shas[0][:10]}: will-it-scale.per_thread_ops +21.2% improvement"
    assert "FYI, we noticed a +21.2% improvement of will-it-scale.per_thread_ops due to commit:" in text
    assert "Reported-by:" not in text   # nothing to fix, nothing to credit
    assert text == IMPROVEMENT_FIXTURE.read_text()


def test_neither_a_regression_nor_an_improvement_is_a_one_line_error(cli, tmp_path):
    repo, shas = load(cli, tmp_path)
    same = _run(shas[2], repo, [10090, 10105, 10080, 10098, 10091], [5.0e6] * 5, [10.0] * 5)
    (tmp_path / "same.json").write_text(json.dumps({"format": "perflab-export", "version": 2, "runs": [same]}))
    cli("import", tmp_path / "same.json")
    assert_one_line_error(cli("report", "regression", "--base", shas[0][:8], "--head", shas[2][:8], check=False),
                          "no significant regression or improvement", shas[2][:8])


def _cmd_repo(path: Path) -> list[str]:
    """A program that gets ten times slower in its second commit."""
    env = dict(os.environ, **GIT_ENV)
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True, env=env)
    shas = []
    for i, (delay, subject) in enumerate([("0.01", "work: base"), ("0.1", "work: wait longer")]):
        (path / "work.sh").write_text(f"#!/bin/sh\nsleep {delay}\n")
        subprocess.run(["git", "-C", str(path), "add", "work.sh"], check=True, env=env)
        subprocess.run(["git", "-C", str(path), "commit", "-q", "-m", subject], check=True, env=env)
        shas.append(subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], check=True, env=env,
                                   capture_output=True, text=True).stdout.strip())
    return shas


def _measure_both(cli, repo: Path, shas: list[str]) -> None:
    for sha, tag in zip(shas, ("good", "bad")):
        subprocess.run(["git", "-C", str(repo), "checkout", "-q", sha], check=True)
        cli("run", "cmd", "--runs", "4", "--repo", repo, "--tag", tag, "--", "sh", repo / "work.sh")


@pytest.fixture(scope="module")
def measured(tmp_path_factory, shared_cache) -> tuple[Path, list[str], Path]:
    """The program's repository and a store with both sides measured once (`perflab run`, the real
    runner), shared by the tests below: each reads a copy of the store."""
    tmp = tmp_path_factory.mktemp("mail-measured")
    repo = tmp / "prog"
    shas = _cmd_repo(repo)
    _measure_both(CLI(tmp / "perflab.db", tmp, shared_cache), repo, shas)
    return repo, shas, tmp / "perflab.db"


def _copy_store(src: Path, dst: Path) -> None:
    import sqlite3

    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    a.close()
    b.close()


def _steps(mail: str, first: str) -> list[str]:
    """The indented commands of the mail from the paragraph that starts with `first`, as one script."""
    lines = mail.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith(first))
    out = []
    for line in lines[start + 1:]:
        if out and not line.startswith("        "):
            break
        if line.startswith("        "):
            out.append(line[8:])
    return out


def _shell(script: list[str], cwd: Path, db: Path) -> str:
    env = dict(os.environ, PERFLAB_DB=str(db), PATH=f"{os.path.dirname(PERFLAB)}:{os.environ['PATH']}")
    done = subprocess.run(["sh", "-ec", "\n".join(script)], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_reproduce_steps_measure_both_sides_and_the_job_holds_only_what_differs(cli, tmp_path, measured):
    repo, shas, db = measured
    _copy_store(db, cli.db)
    mail = cli("report", "regression", "--base", "good", "--head", "bad", "--build", "true").stdout
    script = _steps(mail, "To reproduce:")
    job = yaml.safe_load("\n".join(script[1:script.index("EOF")]))
    assert job == {"benchmark": "cmd", "runs": 4, "cmd": {"argv": [["sh", str(repo / "work.sh")]]}}
    for noise in ("tag:", "prepare:", "metrics:", "- []", "shell:", "ignore_failure:"):
        assert noise not in "\n".join(script), noise
    assert f"git -C {repo} checkout {shas[0]}" in script and f"git -C {repo} checkout {shas[1]}" in script
    # Run as written on a fresh store: both sides measured here, the same regression seen.
    work = tmp_path / "reader"
    work.mkdir()
    out = _shell(script, work, tmp_path / "reader.db")
    assert re.search(r"\+\d+\.\d%.*time\.elapsed_time", out.split("-- regressions --")[1]), out
    # Secondary metrics (the time.* resource figures) are left out unless asked for.
    assert "time.user_time" not in mail.split("Details are as below:")[1].split("left out of this mail")[0]
    assert "secondary metrics left out of this mail: " in mail and "time.user_time" in mail
    kept = cli("report", "regression", "--base", "good", "--head", "bad", "--secondary").stdout
    assert "-- secondary metrics" in kept and "left out of this mail" not in kept


def test_the_base_runs_exported_beside_the_mail_are_what_the_steps_compare_with(cli, tmp_path, measured):
    repo, shas, db = measured
    _copy_store(db, cli.db)
    export = tmp_path / "out" / "base-runs.json"
    export.parent.mkdir()
    mail = cli("report", "regression", "--base", "good", "--head", "bad", "--export-base", export).stdout
    assert json.loads(export.read_text())["runs"][0]["commit"] == shas[0]
    assert "The base runs measured here are in base-runs.json beside this mail;" in mail
    script = _steps(mail, "To reproduce:")
    later = _steps(mail, "The base runs measured here")
    assert later[0] == "perflab import base-runs.json" and later[-1].startswith("perflab compare --cross-box box=")
    # Beside the mail: the job file of the steps above and the exported runs; no base measured here.
    out = _shell(script[:script.index("EOF") + 1] + later, export.parent, tmp_path / "reader.db")
    assert "time.elapsed_time" in out.split("-- regressions --")[1], out
    # Mailed, the export travels as an attachment.
    spool, sendmail = _sendmail(tmp_path)
    env = _config(tmp_path, f'[mail]\nsendmail = "{sendmail}"\n')
    cli("report", "regression", "--base", "good", "--head", "bad", "--export-base", export, "--to", "a@b.example",
        env=env)
    msg = email.message_from_bytes(spool.read_bytes(), policy=email.policy.default)
    (attached,) = [p for p in msg.iter_attachments()]
    assert attached.get_filename() == "base-runs.json"
    assert json.loads(attached.get_payload(decode=True)) == json.loads(export.read_text())
    assert_one_line_error(cli("report", "regression", "--base", "good", "--head", "bad", "--export-base",
                              tmp_path / "nodir" / "x.json", check=False), "--export-base", "nodir")


def test_every_shipped_job_reduced_to_its_differing_keys_expands_to_the_same_job(tmp_path):
    from perflab import benchmarks, jobs
    from perflab.jobs.minimal import minimal, to_yaml

    seen = 0
    for path in jobs.shipped():
        for job in jobs.load_atomic(str(path), []):
            stored = job.to_dict()
            text = to_yaml(minimal(stored))
            assert "tag:" not in text and ": null" not in text and "- []" not in text, (path, text)
            again = tmp_path / "job.yaml"
            again.write_text(text)
            (back,) = jobs.load_atomic(str(again), [])
            family = benchmarks.family(job.benchmark)
            assert family.parse_params(back.params) == family.parse_params(job.params), (path, text)
            for key in ("benchmark", "warmup", "timeout", "monitors", "kernel", "vm", "measure"):
                assert getattr(back, key) == getattr(job, key), (path, key, text)
            assert (back.runs or family.runs_for(family.parse_params(back.params))) == \
                (job.runs or family.runs_for(family.parse_params(job.params))), (path, text)
            seen += 1
    assert seen > 10

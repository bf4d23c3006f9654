"""Issue 22, points 2, 9, 10 and 11: feedback during runs, the command line and job files,
the smaller items (log, --name, serve, tags with '='), and the compiler as a variant."""

from __future__ import annotations

import re
import shutil
import time
from types import SimpleNamespace

import pytest

from conftest import assert_one_line_error
from perflab import jobs
from perflab.analysis.selection import select
from perflab.core import cbuild
from perflab.core.errors import PerflabError
from perflab.runner import loop, progress
from perflab.store import open_store
from test_runner_fast import FakeExecutor, FakeFamily, job

# -- 2. feedback during runs ------------------------------------------------------------


@pytest.fixture
def still_clock(monkeypatch):
    """The bar's clock stands still unless the test moves it: what the figures read does not depend
    on how long the machine took between two lines of the test."""
    clock = SimpleNamespace(now=1000.0)
    monkeypatch.setattr(progress, "time", SimpleNamespace(monotonic=lambda: clock.now))
    return clock


def test_the_bar_moves_within_a_repetition_on_the_declared_duration(still_clock):
    bar = progress.Bar(None, total=3, ticker=False)
    bar.begin("a", "x", declared=10.0)
    bar.rep_began -= 5.0                               # half of the declared 10 s have passed
    assert bar.fraction() == pytest.approx(0.5, abs=0.02)
    assert bar.completed() == pytest.approx(0.5, abs=0.02)
    assert bar.eta() == pytest.approx(5.0 + 2 * 10.0, abs=0.2)
    bar.rep_began -= 100.0                             # overdue: never shown finished before it is
    assert bar.fraction() == progress.MOST_OF_A_REPETITION


def test_without_a_duration_the_eta_is_na_then_the_previous_repetition_is_the_guess(still_clock):
    bar = progress.Bar(None, total=2, ticker=False)
    bar.begin("a", "x", declared=None)
    assert bar.fraction() == 0.0 and progress.fmt_eta(bar.eta()) == "n/a"
    bar.rep_began -= 4.0
    bar.step()
    bar.begin("a", "x", declared=None)                 # the same job again: its last took 4 s
    assert bar.expected == pytest.approx(4.0, abs=0.1)
    bar.rep_began -= 1.0
    assert bar.fraction() == pytest.approx(0.25, abs=0.05)
    assert progress.fmt_eta(bar.eta()) == "0:00:03"


def test_the_ticker_moves_the_bar_a_few_times_a_second(monkeypatch):
    monkeypatch.setattr(progress, "PROGRESS_AFTER_S", 0.0)
    bar = progress.Bar(None, total=1)
    try:
        bar.begin("a", "x", declared=2.0)
        # Until the ticker has moved it past 0.1 (0.2 s into the 2 s declared, a tick of 0.25 s later
        # on an idle machine), with a deadline no load reaches rather than a fixed wait.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with bar._lock:
                if bar.progress is not None and bar.progress.tasks[0].completed > 0.1:
                    break
            time.sleep(0.02)
        assert bar.progress is not None
        task = bar.progress.tasks[0]
        assert 0.1 < task.completed < 1.0          # moved without any repetition ending
    finally:
        bar.close()


def test_declared_seconds_of_a_job():
    wis = jobs.expand_atomic({"benchmark": "will-it-scale", "test": "brk1", "duration": 12, "warmup_time": 1})[0]
    assert progress.declared_seconds(wis.parsed) == 13.0
    cmd = jobs.expand_atomic({"benchmark": "cmd", "command": "true"})[0]
    assert progress.declared_seconds(cmd.parsed) is None


def test_labels_put_the_varying_parameters_first_and_never_cut_them():
    text = progress.label("mode=thread nr_task=192", "will-it-scale page_fault1 " + "x" * 80, "2/3")
    assert text.startswith("mode=thread nr_task=192 2/3  will-it-scale")
    fam = FakeFamily()
    outcomes = [loop.JobOutcome(job(fam, params={"items": ["a"], "base": b})) for b in (1.0, 2.0)]
    heads = loop._varying(outcomes)
    assert list(heads.values()) == ["base=1.0", "base=2.0"]


def test_each_atomic_jobs_line_is_printed_as_it_finishes(tmp_path, monkeypatch):
    monkeypatch.setattr(loop, "check_jobs", lambda jobs: None)
    store = open_store(str(tmp_path / "p.db"))
    fam = FakeFamily()
    ex = FakeExecutor()
    seen = []

    def on_done(o):
        seen.append((o.run_id, len(ex.calls)))
        return f"done #{o.run_id}"

    first, second = loop.run_jobs(store, [job(fam, runs=2, params={"items": ["a"], "base": 1.0}),
                                          job(fam, runs=2, params={"items": ["a"], "base": 2.0})],
                                  executor=ex, on_done=on_done)
    # The first job's line came when only its own two processes had run, not at the end.
    assert seen == [(first.run_id, 2), (second.run_id, 4)]
    assert first.varying == "base=1.0"


# -- 9. command line and job files ------------------------------------------------------

BAD = """benchmark: will-it-scale
runs: 1
test: brk1
mode: proces
nr_tasks: 2
thp: [always, nevr]
"""


def test_every_job_file_error_at_its_own_line_with_did_you_mean(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(BAD)
    with pytest.raises(jobs.JobErrors) as e:
        jobs.load(path)
    problems = e.value.problems
    assert len(problems) == 3, problems
    assert problems[0].startswith(f"{path}:4: ") and "mode = 'proces'" in problems[0]
    assert "did you mean 'process'" in problems[0]
    assert problems[1].startswith(f"{path}:5: ") and "did you mean 'nr_task'" in problems[1]
    assert problems[2].startswith(f"{path}:6: ") and "did you mean 'never'" in problems[2]


def test_a_misspelt_family_is_named_with_did_you_mean(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("benchmark: wil-it-scale\n")
    with pytest.raises(jobs.JobError, match=r"bad.yaml:1: unknown benchmark 'wil-it-scale' \(did you mean 'will-it-scale'\?\)"):
        jobs.load(path)


def test_the_cli_prints_every_error_one_line_each(cli, tmp_path):
    (tmp_path / "bad.yaml").write_text(BAD)
    proc = cli("run", "bad.yaml", check=False)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and len(lines) == 3, proc.stderr
    assert all(line.startswith("perflab: error: bad.yaml:") for line in lines)


def test_run_job_file_takes_job_keys_and_parameters_as_options(cli, tmp_path):
    (tmp_path / "sleep.yaml").write_text("benchmark: cmd\ncommand: sleep 0.01\nruns: 5\n")
    proc = cli("run", "sleep.yaml", "--runs", "2", "--warmup", "1", "--shell", "false")
    assert proc.stdout.startswith("run #1: ")
    reps = cli.sql("select count(distinct repetition) from sample where run_id = 1")
    assert reps == [(2,)]
    bad = cli("run", "sleep.yaml", "--runs", "0", check=False)
    assert bad.returncode == 2 and "--runs" in bad.stderr


def test_help_lists_allowed_values_and_defaults(cli, tmp_path):
    text = cli("run", "will-it-scale", "--help").stdout
    assert "--mode process|thread" in text
    assert "[default: 5.0]" in " ".join(text.split())       # --duration
    (tmp_path / "w.yaml").write_text("benchmark: will-it-scale\ntest: brk1\n")
    text = cli("run", "w.yaml", "--help").stdout
    assert "--mode process|thread" in text and "--runs" in text and "--cc COMPILER" in text


def test_jobs_list_whole_sentences_and_singular(cli):
    text = cli("jobs", "list").stdout
    flat = " ".join(text.split())
    assert "lmbench-quick.yaml lmbench 1 atomic job " in flat
    assert not re.search(r"(^| )1 atomic jobs", flat)
    # aim7's description spans three comment lines: shown whole, to its full stop
    assert "here N% of the CPUs)." in flat


# -- 10. smaller ---------------------------------------------------------------------------

def test_log_shows_status_and_a_familys_primary_metric(cli):
    cli("run", "will-it-scale", "--test", "getppid1", "--duration", "0.2", "--warmup-time", "0", "--runs", "1")
    cli("run", "cmd", "--runs", "1", "--name", "quick-true", "--", "true")
    lines = cli("log").stdout.splitlines()
    wis, cmd = lines[2], lines[3]
    assert "[will-it-scale.per_process_ops ops/s]" in wis
    assert wis.split()[3] not in ("-",) and float(wis.split()[3]) > 0     # the value in the first column
    assert " done " in wis and " done " in cmd


def test_run_cmd_header_prints_the_name(cli):
    out = cli("run", "cmd", "--runs", "1", "--name", "quick-true", "--", "true").stdout
    assert out.splitlines()[0] == "run #1: quick-true (true)"


def test_a_tag_with_an_equals_sign_is_pointed_at_tag_equals(cli):
    cli("run", "cmd", "--runs", "2", "--tag", "opt=O2", "--", "true")
    store = open_store(str(cli.db))
    with pytest.raises(PerflabError, match=r"'tag=opt=O2'"):
        select(store, "opt=O2")
    assert [r.tag for r in select(store, "tag=opt=O2").runs] == ["opt=O2"]


def test_serve_links_each_run_to_its_page(cli):
    from perflab.automate.lab.dashboard import Dashboard

    cli("run", "cmd", "--runs", "2", "--", "true")
    board = Dashboard(open_store(str(cli.db)))
    assert "<a href='/run/1'>1</a>" in board.index()
    page = board.run_page("1")
    assert "time.elapsed_time" in page and "<h1>run #1: cmd true</h1>" in page


# -- 11. the compiler as a variant -------------------------------------------------------

def test_compiling_with_changes_the_compiler_and_the_flags(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    (tmp_path / "p.c").write_text("int main(void) { return 0; }\n")
    with cbuild.compiling_with("gcc", "-O0"):
        assert cbuild.cc_command() == "gcc"
        o0 = cbuild.build("p", tmp_path)
    with cbuild.compiling_with("gcc", "-O1 -g"):
        o1 = cbuild.build("p", tmp_path)
    assert o0 != o1 and o0.is_file() and o1.is_file()


def test_cc_and_cflags_are_matrix_axes_and_a_missing_compiler_names_its_package():
    missing = "clang" if shutil.which("clang") is None else "no-such-cc-17"
    points = jobs.expand_atomic({"benchmark": "lmbench", "quick": True, "cc": ["gcc", missing],
                                 "cflags": ["-O1", "-O2"]}, "c.yaml")
    assert [(p.target.toolchain.cc, p.target.toolchain.cflags) for p in points] == [
        ("gcc", "-O1"), ("gcc", "-O2"), (missing, "-O1"), (missing, "-O2")]
    assert points[0].to_dict()["cc"] == "gcc"
    with pytest.raises(jobs.JobError, match=rf"c.yaml: key 'cc' = '{missing}': .*not found: install it \(package {missing}"):
        jobs.check_compilers(points, "c.yaml")
    with pytest.raises(jobs.JobErrors, match=r"key 'cc' = 3"):
        jobs.expand_atomic({"benchmark": "lmbench", "cc": 3}, "c.yaml")


def test_one_job_file_compares_compilers_and_report_lmbench_prints_a_row_each(cli, tmp_path):
    (tmp_path / "cc.yaml").write_text("benchmark: lmbench\nquick: true\nonly: [processes]\n"
                                      "cc: gcc\ncflags: [-O0, -O2]\n")
    out = cli("run", "cc.yaml", "--tag", "t", env={"PERFLAB_LMBENCH_TINY": "1"}, timeout=300).stdout
    assert out.splitlines()[0].startswith("run #1: cflags=-O0 lmbench")
    store = open_store(str(cli.db))
    facts = [store.get_run(i).environment for i in (1, 2)]
    assert [(f["cc"], f["cflags"]) for f in facts] == [("gcc", "-O0"), ("gcc", "-O2")]
    rows = [line.split()[0] for line in cli("report", "lmbench", "t").stdout.splitlines() if line.startswith("6.")
            or "-t-gcc-" in line]
    assert len(rows) >= 2 and rows[0].endswith("-t-gcc-O0") and rows[1].endswith("-t-gcc-O2")
    missing = cli("run", "cc.yaml", "--cc", "no-such-cc-17", check=False)
    assert_one_line_error(missing, "no-such-cc-17", "package no-such-cc-17")

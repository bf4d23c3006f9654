"""The series mail's reproduce section reproduces (issue 44, finding 8): pasted into a fresh
directory as a shell script, it clones, builds and measures the base, applies the mailbox with
`git am`, builds and measures the head, and compares; the counts it measures are the ones the
series measured (valgrind instructions: exact, whatever the load)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from conftest import PERFLAB
from test_patch_series import PROGRAM, mailed

STEP = " " * 8


def _project(tmp_path: Path) -> tuple[Path, Path, str]:
    """A C program, and three patches on it mailed with a cover letter; the second doubles the work."""
    return mailed(tmp_path, {"prog.c": PROGRAM % (50000, "base")},
                  [(subject, {"prog.c": PROGRAM % (n, f"step {i}")}) for i, (n, subject) in
                   enumerate(((50000, "prog: say why"), (100000, "prog: twice the work"), (100000, "prog: a comment")), 1)])


def _section(mail: str) -> list[str]:
    """The commands of the mail's reproduce section, as a reader copies them."""
    lines = mail.splitlines()
    start = lines.index("To reproduce:")
    out = []
    for line in lines[start + 2:]:
        if not line.startswith(STEP):
            break
        out.append(line[len(STEP):])
    return out


def _counts(db: Path) -> dict[str, list[float]]:
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT run.tag, sample.value FROM sample JOIN run ON run.id = sample.run_id "
                           "WHERE sample.metric = 'valgrind.instructions' ORDER BY run.tag").fetchall()
    finally:
        con.close()
    out: dict[str, list[float]] = {}
    for tag, value in rows:
        out.setdefault(tag, []).append(value)
    return out


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")
@pytest.mark.parametrize("given", ["file", "directory"])
def test_the_series_mails_reproduce_section_run_in_a_fresh_directory_measures_base_and_head(cli, tmp_path, given):
    repo, mails, base = _project(tmp_path)
    if given == "file":
        mbox = tmp_path / "series.mbox"        # the cover letter first, as b4 and format-patch give it
        mbox.write_text("".join(p.read_text() for p in sorted(mails.glob("*.patch"))))
    else:
        mbox = mails
    job = tmp_path / "job.yaml"
    job.write_text("benchmark: cmd\ncommand: ./prog\nmeasure: instructions\nruns: 2\n")
    mail = tmp_path / "report.txt"
    # Without --metric (the directory's run), the job's one headline metric: its count (finding 10).
    metric = ["--metric", "valgrind.instructions"] if given == "file" else []
    done = cli("series", "--repo", repo, "--mbox", mbox, "--job", job, "--build", "cc -O1 -o prog prog.c",
               *metric, "--out", mail, "--no-kind", "--no-revert", timeout=900)
    assert given == "file" or "metric: valgrind.instructions (the job's headline metric)" in done.stderr
    text = mail.read_text()
    steps = _section(text)
    script = "\n".join(steps)
    assert "git am " in script and "perflab run " in script, text
    assert "python" not in script and "from perflab.cli import" not in script, script     # as a user types it
    # The lkp table's columns say which side is which.
    table = text.split("Details are as below:")[1]
    assert any(l.split() == ["base", "head"] for l in table.splitlines()), table

    fresh = tmp_path / "reader"
    fresh.mkdir()
    reader_db = tmp_path / "reader.db"
    env = dict(os.environ, PERFLAB_DB=str(reader_db), PATH=f"{os.path.dirname(PERFLAB)}:{os.environ['PATH']}",
               XDG_CACHE_HOME=str(cli.env["XDG_CACHE_HOME"]),
               GIT_AUTHOR_NAME="Reader", GIT_AUTHOR_EMAIL="reader@example.org",
               GIT_COMMITTER_NAME="Reader", GIT_COMMITTER_EMAIL="reader@example.org")
    done = subprocess.run(["sh", "-ec", script], cwd=fresh, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (script, done.stdout, done.stderr)
    # Both sides measured: the base counts what the series' base counted, the head what its head
    # counted (the patches applied: twice the work); the comparison calls it.
    series = _counts(cli.db)
    here = _counts(reader_db)
    assert set(here) == {"base", "head"}, here
    (series_tag,) = {t for t in series if not t.endswith("-kind")}
    con = sqlite3.connect(cli.db)
    try:
        by_commit = dict(con.execute("SELECT run.\"commit\", sample.value FROM sample JOIN run ON run.id = sample.run_id "
                                     "WHERE sample.metric = 'valgrind.instructions' AND run.tag = ?",
                                     (series_tag,)).fetchall())
    finally:
        con.close()
    # A count is exact, but a process's start-up work depends on its environment (the length of
    # the paths and variables the loader reads): the reader's counts match the series' within a
    # few dozen instructions of 400,000, and the patch's work (300,000) exactly but for that.
    series_base = by_commit[base]
    series_head = next(v for c, v in by_commit.items() if c != base and v != series_base)
    assert len(set(here["base"])) == 1 and len(set(here["head"])) == 1, here
    assert abs(here["base"][0] - series_base) < 100, (here, by_commit)
    assert abs((here["head"][0] - here["base"][0]) - (series_head - series_base)) < 100, (here, by_commit)
    assert here["head"][0] > 1.5 * here["base"][0], here        # the head run saw the patches
    assert "-- regressions --" in done.stdout and "valgrind.instructions" in done.stdout.split("-- regressions --")[1]


def test_a_recipes_build_in_the_mail_is_typed_as_a_user_types_it(tmp_path):
    """The build a series runs calls this very perflab (on PATH or not); the mail's says `perflab`."""
    from perflab.execution.vm import recipe

    spec = tmp_path / "recipe.yaml"
    spec.write_text("config: perflab\nname: -series\n")
    one = recipe.series_recipe(str(spec), str(tmp_path))
    assert "from perflab.cli import entry" in recipe.build_command(one)
    typed = recipe.build_command(one, typed=True)
    assert "perflab kernel config --tree . -o" in typed and "python" not in typed and "import" not in typed, typed


def test_the_headline_metric_is_the_jobs_one_or_the_choice_is_asked_for(cli, tmp_path):
    """Issue 44, finding 10: --metric may be left out when the job has one headline metric."""
    from perflab.automate import bisect, series
    from perflab.core.errors import UsageProblem

    job = tmp_path / "job.yaml"
    for text, metric in (("benchmark: cmd\ncommand: ./prog\n", "time.elapsed_time"),
                         ("benchmark: cmd\ncommand: ./prog\nmeasure: instructions\n", "valgrind.instructions")):
        job.write_text(text)
        assert series.headline_metric(bisect.file_job(str(job))) == metric
    job.write_text("benchmark: will-it-scale\ntest: getppid1\n")
    with pytest.raises(UsageProblem, match="give --metric: the will-it-scale job has 3 headline metrics "
                                           r"\(will-it-scale.per_process_ops, "):
        series.headline_metric(bisect.file_job(str(job)))
    repo, mails, _base = _project(tmp_path)
    from conftest import assert_one_line_error

    assert_one_line_error(cli("series", "--repo", repo, "--mbox", mails, "--job", job, check=False),
                          "give --metric", "will-it-scale.scalability")
